"""Webhooks, as the Standard Webhooks specification has them (signed by the ``standardwebhooks``
library): one JSON body per delivery, ``{"type", "timestamp", "data"}``, POSTed to a workspace's
endpoint with ``webhook-id`` (the delivery's id, the same on every try, so that a receiver can
tell a repeat), ``webhook-timestamp`` (this try's) and ``webhook-signature``. A 2xx delivers it;
429 and 503 are tried again when their Retry-After says; 410 Gone ends it and disables the
endpoint; anything else is tried again with the sender's backoff."""

import json
import logging
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

import httpx
from django.contrib.auth import get_user_model
from standardwebhooks.webhooks import Webhook

from conversations.events import EventType, format_ts
from conversations.models import TurnEvent
from core import egress

from ..models import EVENT_TYPES, Delivery, WebhookEndpoint
from ..news import News
from .base import Result, Skip, still_wanted

logger = logging.getLogger(__name__)

SCHEMES = ("http", "https")
TIMEOUT = httpx.Timeout(10.0, connect=5.0)
USER_AGENT = "Parley-Webhooks/1"
# How much of a receiver's answer the delivery log keeps, and the longest Retry-After heeded.
SAID_CHARS = 200
MAX_RETRY_AFTER_SECONDS = 3600.0
# A Result's ``learned``: the endpoint answered 410 Gone.
GONE = "gone"
# The event in the log that named the people a reminder or an escalation is for.
NAMING_EVENTS = {
    Delivery.Cause.REMINDED: EventType.SELECTION_REMINDED,
    Delivery.Cause.ESCALATED: EventType.SELECTION_ESCALATED,
}


def is_web_url(url: str) -> bool:
    """Whether ``url`` is one a webhook may go to: http or https, with a host."""
    parts = urlsplit(url)
    return parts.scheme in SCHEMES and bool(parts.hostname)


@dataclass(frozen=True)
class Outgoing:
    """A webhook ready to send: its body is fixed, its signature made at each try."""

    delivery_id: str
    endpoint_id: str
    url: str
    body: str
    secret: str = field(repr=False)


def event_body(*, event_type: str, at: datetime, data: dict) -> str:
    """A webhook's body, as sent and signed: ``{"type", "timestamp", "data"}``."""
    return json.dumps(
        {"type": event_type, "timestamp": format_ts(at), "data": data},
        separators=(",", ":"),
        ensure_ascii=False,
    )


def signed_headers(outgoing: Outgoing, now: datetime) -> dict:
    signature = Webhook(outgoing.secret).sign(outgoing.delivery_id, now, outgoing.body)
    return {
        "webhook-id": outgoing.delivery_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature,
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
    }


def post(outgoing: Outgoing) -> Result:
    """POST it once (in a sending thread: no database here) and judge the answer."""
    if not is_web_url(outgoing.url):
        return Result(
            ok=False, final=True, response="Refused: a webhook's URL must be http or https."
        )
    try:
        target = egress.pinned(outgoing.url)
    except egress.Refused as refused:
        return Result(ok=False, final=True, response=f"Refused: {refused}")
    headers = {**signed_headers(outgoing, datetime.now(UTC)), **target.headers}
    try:
        with httpx.Client(timeout=TIMEOUT, follow_redirects=False) as client:
            with client.stream(
                "POST",
                target.url,
                content=outgoing.body.encode(),
                headers=headers,
                extensions=target.extensions,
            ) as response:
                # The start of what it said, for the log; the rest is not read.
                start = next(response.iter_bytes(SAID_CHARS), b"")
                return judged(response, start.decode(errors="replace"))
    except httpx.HTTPError as error:
        return Result(ok=False, response=f"{type(error).__name__}: {error}"[:300])


def judged(response: httpx.Response, text: str) -> Result:
    said = f"{response.status_code} {response.reason_phrase}".strip()
    if text := re.sub(r"\s+", " ", text).strip():
        said += f": {text[:SAID_CHARS]}"
    status = response.status_code
    if 200 <= status < 300:
        return Result(ok=True, response=said)
    if status == 410:
        return Result(ok=False, response=said, final=True, learned=GONE)
    if status in (429, 503):
        return Result(
            ok=False, response=said, retry_after=retry_after(response.headers.get("Retry-After"))
        )
    return Result(ok=False, response=said)


def retry_after(value: str | None) -> float | None:
    """Retry-After in seconds (a number or an HTTP date), at most an hour; None if absent or
    unreadable (the sender's backoff then)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            seconds = (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 1.0), MAX_RETRY_AFTER_SECONDS)


def named_people(delivery: Delivery) -> list:
    """Whom a reminder or escalation named, as its event in the conversation's log says."""
    event_type = NAMING_EVENTS.get(delivery.cause)
    if event_type is None:
        return []
    event = (
        TurnEvent.objects.filter(
            turn_id=delivery.selection.turn_id,
            type=event_type,
            data__selection=delivery.selection_id,
        )
        .order_by("seq")
        .first()
    )
    ids = [entry["id"] for entry in (event.data.get("to") or [])] if event else []
    people = get_user_model().objects.in_bulk(ids)
    return [people[pk] for pk in ids if pk in people]


class WebhookChannel:
    def prepare(self, delivery: Delivery):
        endpoint: WebhookEndpoint | None = delivery.endpoint
        if endpoint is None:
            return Skip("The webhook endpoint was deleted.")
        if not endpoint.enabled:
            why = f": {endpoint.disabled_reason}" if endpoint.disabled_reason else "."
            return Skip(f"The webhook endpoint is disabled{why}")
        event_type = EVENT_TYPES[delivery.cause]
        if event_type not in endpoint.event_types:
            return Skip(f"The webhook endpoint no longer takes {event_type}.")
        if skip := still_wanted(delivery):
            return skip
        news = News(
            cause=delivery.cause, selection=delivery.selection, named=named_people(delivery)
        )
        return Outgoing(
            delivery_id=delivery.pk,
            endpoint_id=endpoint.pk,
            url=endpoint.url,
            body=event_body(event_type=event_type, at=delivery.created_at, data=news.payload()),
            secret=endpoint.secret,
        )

    def send(self, outgoing: Outgoing) -> Result:
        return post(outgoing)

    def remember(self, delivery: Delivery, result) -> None:
        if isinstance(result, Result) and result.learned == GONE:
            # The receiver says it is gone for good: nothing more goes there until an owner
            # enables it again.
            WebhookEndpoint.objects.filter(pk=delivery.endpoint_id).update(
                enabled=False,
                disabled_reason=f"Disabled: it answered {result.response[:150]}",
            )
            logger.warning("Webhook endpoint %s disabled: it answered 410", delivery.endpoint_id)
