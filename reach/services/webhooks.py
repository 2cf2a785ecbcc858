"""A workspace's webhook endpoints, as its owners make and change them: each with its URL, the
event types it takes, and a signing secret (Standard Webhooks' ``whsec_…``) made here and shown
once; and a test event sent on demand."""

import base64
import secrets
from datetime import UTC, datetime
from urllib.parse import urlsplit

from django.db import transaction

from conversations.models import Workspace
from core import egress
from core.errors import ApplicationError
from core.ids import new_id

from ..channels.base import Result
from ..channels.webhooks import SCHEMES, Outgoing, event_body, post
from ..models import EVENT_TYPES, WebhookEndpoint
from ..news import name_of

# Bytes of randomness in a secret (Standard Webhooks asks for 24 to 64).
SECRET_BYTES = 32
MAX_URL_CHARS = 2000
MAX_DESCRIPTION_CHARS = 200
# Endpoints a workspace may have: each question's news is sent to every one.
MAX_ENDPOINTS = 20
# Every event type there is, in the order they happen.
ALL_EVENT_TYPES = list(EVENT_TYPES.values())
TEST_EVENT_TYPE = "webhook.test"


def new_secret() -> str:
    """A signing secret in Standard Webhooks' form: ``whsec_`` and base64 of random bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def clean_url(url) -> str:
    """An endpoint's URL: http or https, with a host, no spaces; ApplicationError otherwise."""
    if not isinstance(url, str) or not url.strip():
        raise ApplicationError("invalid", "url: an http or https URL is required.")
    url = url.strip()
    if len(url) > MAX_URL_CHARS:
        raise ApplicationError("invalid", f"url: at most {MAX_URL_CHARS} characters.")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError:
        raise ApplicationError("invalid", "url: not a URL.") from None
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise ApplicationError(
            "invalid",
            "url: must be an http or https URL with a host, such as https://example.com/hook.",
        )
    if any(char.isspace() or ord(char) < 32 for char in url):
        raise ApplicationError("invalid", "url: may not contain spaces.")
    if parts.username or parts.password:
        raise ApplicationError("invalid", "url: may not hold a user name or password.")
    try:
        egress.check_literal(parts.hostname)
    except egress.Refused as refused:
        raise ApplicationError(
            "invalid", f"url: {refused} Webhooks go to public addresses only."
        ) from None
    return url


def clean_event_types(event_types) -> list[str]:
    """The event types an endpoint takes: some of ALL_EVENT_TYPES, kept in their order."""
    if not isinstance(event_types, list) or not event_types:
        raise ApplicationError(
            "invalid", f"event_types: a list of one or more of {', '.join(ALL_EVENT_TYPES)}."
        )
    unknown = [kind for kind in event_types if kind not in ALL_EVENT_TYPES]
    if unknown:
        known = ", ".join(ALL_EVENT_TYPES)
        raise ApplicationError(
            "invalid", f"event_types: {', '.join(map(str, unknown))} is not one of {known}."
        )
    return [kind for kind in ALL_EVENT_TYPES if kind in event_types]


def clean_description(description) -> str:
    if not isinstance(description, str):
        raise ApplicationError("invalid", "description: must be a string.")
    description = description.strip()
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise ApplicationError(
            "invalid", f"description: at most {MAX_DESCRIPTION_CHARS} characters."
        )
    return description


def webhook_endpoint_create(
    *,
    workspace: Workspace,
    user,
    url: str,
    description: str = "",
    event_types: list[str] | None = None,
) -> WebhookEndpoint:
    """A new endpoint, enabled, taking ``event_types`` (all of them if None), with a new
    secret (on the returned object: the one time it is shown). Raises ApplicationError
    ``invalid`` for bad input, and ``too_many_endpoints`` (409) past MAX_ENDPOINTS."""
    endpoint = WebhookEndpoint(
        workspace=workspace,
        url=clean_url(url),
        description=clean_description(description),
        event_types=clean_event_types(ALL_EVENT_TYPES if event_types is None else event_types),
        secret=new_secret(),
        created_by=user,
    )
    with transaction.atomic():
        # The workspace's row, locked: two at once cannot both pass the count.
        Workspace.objects.select_for_update().filter(pk=workspace.pk).first()
        if WebhookEndpoint.objects.filter(workspace=workspace).count() >= MAX_ENDPOINTS:
            raise ApplicationError(
                "too_many_endpoints",
                f"A workspace may have at most {MAX_ENDPOINTS} webhook endpoints.",
                status=409,
            )
        endpoint.save()
    return endpoint


def webhook_endpoint_update(
    *,
    endpoint: WebhookEndpoint,
    user,
    url: str | None = None,
    description: str | None = None,
    event_types: list[str] | None = None,
    enabled: bool | None = None,
) -> WebhookEndpoint:
    """Change what is given (None: unchanged). Enabling clears its run of failures and why it
    was disabled; disabling says who did it. Raises ApplicationError ``invalid`` for bad
    input, changing nothing."""
    changes = {}
    if url is not None:
        changes["url"] = clean_url(url)
    if description is not None:
        changes["description"] = clean_description(description)
    if event_types is not None:
        changes["event_types"] = clean_event_types(event_types)
    if enabled is True:
        changes.update(enabled=True, failures_in_a_row=0, disabled_reason="")
    elif enabled is False:
        changes.update(enabled=False, disabled_reason=f"Disabled by {name_of(user)}.")
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        if enabled is not None and enabled == endpoint.enabled:
            # Already so: neither its failures nor the reason it was disabled change.
            for name in ("enabled", "failures_in_a_row", "disabled_reason"):
                changes.pop(name, None)
        for name, value in changes.items():
            setattr(endpoint, name, value)
        if changes:
            endpoint.save(update_fields=list(changes))
    return endpoint


def webhook_endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    """Delete it, with its delivery log; what was still to be sent to it is not sent."""
    WebhookEndpoint.objects.filter(pk=endpoint.pk).delete()


def webhook_endpoint_test(*, endpoint: WebhookEndpoint) -> Result:
    """Send it a signed ``webhook.test`` event now, once (not through the outbox, and not in
    its delivery log), and say how it went."""
    outgoing = Outgoing(
        delivery_id=new_id("msg"),
        endpoint_id=endpoint.pk,
        url=endpoint.url,
        body=event_body(
            event_type=TEST_EVENT_TYPE,
            at=datetime.now(UTC),
            data={
                "endpoint": endpoint.pk,
                "workspace": {"id": endpoint.workspace.slug, "name": endpoint.workspace.name},
                "message": "A test from Parley: this endpoint's signature checks out.",
            },
        ),
        secret=endpoint.secret,
    )
    return post(outgoing)
