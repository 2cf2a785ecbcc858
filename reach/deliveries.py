"""Where a question went: its deliveries as people read them ("Emailed Bob", "Slack DM to Bob",
"Webhook question.asked to https://hooks.example.com/…"), for the question's card, REST and the
admin alike; and a failed delivery sent again (the admin's action).

What is shown names a person, a Slack channel or a webhook's site: never an email address to
people other than staff, never a secret, never a link (an endpoint's URL is cut to its origin,
and any address in a far side's reply with it)."""

import re
from urllib.parse import urlsplit

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from .models import Channel, Delivery
from .news import name_of
from .outbox import EVENT_TYPES
from .sender import sender

# What a delivery to a person (or a Slack channel) did, by cause and channel.
WORDS = {
    (Delivery.Cause.ASKED, Channel.EMAIL): "Emailed {to}",
    (Delivery.Cause.ASKED, Channel.SLACK): "Slack DM to {to}",
    (Delivery.Cause.REMINDED, Channel.EMAIL): "Reminded {to} by email",
    (Delivery.Cause.REMINDED, Channel.SLACK): "Reminded {to} in Slack",
    (Delivery.Cause.ESCALATED, Channel.EMAIL): "Escalated to {to} by email",
    (Delivery.Cause.ESCALATED, Channel.SLACK): "Escalated to {to} in Slack",
    (Delivery.Cause.SETTLED, Channel.EMAIL): "Outcome emailed to {to}",
    (Delivery.Cause.SETTLED, Channel.SLACK): "Outcome shown in the Slack DM to {to}",
}
CHANNEL_WORDS = {
    Delivery.Cause.ASKED: "Slack message in {to}",
    Delivery.Cause.SETTLED: "Outcome shown in the Slack message in {to}",
}
URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s\"'<>]+", re.IGNORECASE)


def deliveries_of(*, selection_id: str) -> QuerySet[Delivery]:
    """A question's deliveries, in the order they were planned."""
    return (
        Delivery.objects.filter(selection_id=selection_id)
        .select_related("recipient", "endpoint")
        .order_by("created_at", "pk")
    )


def shown_url(url: str) -> str:
    """A URL as it may be shown: its origin, and "/…" for whatever followed (a path or a query
    may hold a secret: Slack's own incoming webhooks keep theirs in the path)."""
    parts = urlsplit(url)
    if not parts.scheme or not parts.hostname:
        return "…"
    host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    rest = "/…" if parts.path.strip("/") or parts.query or parts.fragment else ""
    return f"{parts.scheme}://{host}{rest}"


def shown_reason(reason: str) -> str:
    """What went wrong, as it may be shown: any URL in it cut to its origin."""
    return URL.sub(lambda found: shown_url(found.group()), reason)


def is_slack_channel(delivery: Delivery) -> bool:
    return delivery.channel == Channel.SLACK and delivery.address.startswith("#")


def to_whom(delivery: Delivery) -> str:
    """Who or where it went: a person's name, a Slack channel, a webhook endpoint's site."""
    if delivery.channel == Channel.WEBHOOK:
        return shown_url(delivery.endpoint.url) if delivery.endpoint else "a removed endpoint"
    if is_slack_channel(delivery):
        return delivery.address
    if delivery.recipient is not None:
        return name_of(delivery.recipient)
    return "someone no longer here"


def went(delivery: Delivery) -> str:
    """Where it went, in words: "Emailed Bob", "Reminded Bob in Slack", "Slack message in
    #C0123", "Webhook question.asked to https://hooks.example.com/…"."""
    to = to_whom(delivery)
    if delivery.channel == Channel.WEBHOOK:
        return f"Webhook {EVENT_TYPES[delivery.cause]} to {to}"
    if is_slack_channel(delivery):
        words = CHANNEL_WORDS.get(delivery.cause, "Slack message in {to}")
    else:
        words = WORDS[(delivery.cause, delivery.channel)]
    return words.format(to=to)


def how_it_went(delivery: Delivery, *, clock=timezone.localtime) -> str:
    """Whether it worked, in words (times in the server's zone, as the admin shows them):
    "sent 12:01:07", "waits until 07:00:00", "trying again at 12:03:10 (451 busy)", "failed:
    550 no such user", "skipped: the question was settled before this was sent."."""
    if delivery.status == Delivery.Status.SENT:
        return f"sent {clock(delivery.sent_at):%H:%M:%S}"
    reason = shown_reason(delivery.reason)
    if delivery.status == Delivery.Status.PENDING:
        at = f"{clock(delivery.next_attempt_at):%H:%M:%S}"
        if delivery.attempts and reason:
            return f"trying again at {at} ({reason})"
        if delivery.next_attempt_at > timezone.now():
            return f"waits until {at}"
        return "sending"
    return f"{delivery.get_status_display().lower()}: {reason}" if reason else delivery.status


@transaction.atomic
def delivery_send_again(*, delivery: Delivery) -> bool:
    """Send a failed delivery again now: it is pending once more, due at once, under the same id
    (its idempotency key), for one more try (a try that fails fails it for good again: it
    keeps its count of attempts). Returns False, changing nothing, unless it had failed."""
    again = Delivery.objects.filter(pk=delivery.pk, status=Delivery.Status.FAILED).update(
        status=Delivery.Status.PENDING,
        next_attempt_at=timezone.now(),
        reason="",
        claimed_by="",
        claimed_until=None,
    )
    if again:
        transaction.on_commit(sender.nudge)
    return bool(again)
