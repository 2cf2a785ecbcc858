"""The outbox: when a question is asked, reminded, escalated or settled, the deliveries it causes
are written here, inside the transaction that writes its event (so none is lost, and none is
sent for a question rolled back), and the sender is nudged once that commits.

Who hears of what, on which channel, is decided here once: the person a question is addressed
to (or an escalation names) on every channel they keep for questions addressed to them; the
others who may answer it on the channels they keep for every question; a workspace's Slack
channel for a question to anyone; its webhook endpoints for the event types they chose. Whether
they may still see it is asked again when it is sent (see reach.sender)."""

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from conversations.models import Membership
from core.prepared import PreparedLookup
from selection.models import Selection

from .models import EVENT_TYPES, Channel, Delivery, WebhookEndpoint, WorkspaceReach
from .preferences import hears, preference_for, quiet_until
from .sender import sender


def email_is_set_up() -> bool:
    return bool(settings.PARLEY_EMAIL_URL)


def slack_is_set_up() -> bool:
    return bool(settings.PARLEY_SLACK_BOT_TOKEN and settings.PARLEY_SLACK_SIGNING_SECRET)


def person_channels() -> list[str]:
    """The channels that reach one person, among those set up."""
    return [
        channel
        for channel, set_up in (
            (Channel.EMAIL, email_is_set_up()),
            (Channel.SLACK, slack_is_set_up()),
        )
        if set_up
    ]


def may_answer(selection: Selection) -> list:
    """Everyone who may answer it now: its addressee and the owners if it has one, else the
    workspace's members and owners; active people only."""
    memberships = Membership.objects.filter(
        workspace_id=selection.conversation.workspace_id,
        role__in=Membership.ACTING_ROLES,
        user__is_active=True,
    ).select_related("user", "user__reach_preference")
    if selection.addressee_id is not None:
        memberships = memberships.filter(user_id=selection.addressee_id) | memberships.filter(
            role=Membership.Role.OWNER
        )
    return [membership.user for membership in memberships.order_by("user__username")]


class Outbox:
    """The listener the selection app announces questions to (see selection.announcing)."""

    def announce(self, *, selection: Selection, cause: str, to: list) -> None:
        deliveries = plan(selection=selection, cause=cause, to=to)
        if deliveries:
            Delivery.objects.bulk_create(deliveries, ignore_conflicts=True)
            transaction.on_commit(sender.nudge)


# Every question asked and settled reads these, in the transaction that asks or settles it:
# compiled once (see core.prepared).
_SLACK_MESSAGES = PreparedLookup(
    lambda selection_id: Delivery.objects.filter(
        selection_id=selection_id, channel=Channel.SLACK, updates__isnull=True
    ).exclude(status__in=(Delivery.Status.FAILED, Delivery.Status.SKIPPED))
)
_WEBHOOKS = PreparedLookup(
    lambda workspace_id: WebhookEndpoint.objects.filter(workspace_id=workspace_id, enabled=True),
    kinds=(int,),
)


def plan(*, selection: Selection, cause: str, to: list) -> list[Delivery]:
    """The deliveries ``cause`` makes for ``selection`` (unsaved)."""
    now = timezone.now()
    planned: list[Delivery] = []

    def add(channel, address, *, recipient=None, endpoint=None, updates=None, at=None):
        planned.append(
            Delivery(
                selection=selection,
                cause=cause,
                channel=channel,
                address=address,
                recipient=recipient,
                endpoint=endpoint,
                updates=updates,
                next_attempt_at=at or now,
            )
        )

    if cause == Delivery.Cause.SETTLED:
        # Every Slack message about it says how it ended (once each is posted).
        for message in _SLACK_MESSAGES.all(selection.pk):
            # (Addressed by the message it updates: one person may have had several.)
            add(Channel.SLACK, message.pk, updates=message)
    else:
        channels = person_channels()
        if channels:
            if cause == Delivery.Cause.ASKED:
                readers = may_answer(selection)
            else:
                readers = list(to)
            for reader in readers:
                addressed = reader.pk == selection.addressee_id or (
                    cause == Delivery.Cause.ESCALATED
                )
                preference = preference_for(reader)
                if not reader.email:
                    continue
                at = quiet_until(preference, now)
                for channel in channels:
                    if hears(preference, channel, addressed=addressed):
                        add(channel, reader.email.lower(), recipient=reader, at=at)
        if cause == Delivery.Cause.ASKED and selection.addressee_id is None and slack_is_set_up():
            channel_id = (
                WorkspaceReach.objects.filter(workspace_id=selection.conversation.workspace_id)
                .values_list("slack_channel", flat=True)
                .first()
            )
            if channel_id:
                add(Channel.SLACK, f"#{channel_id}")
    event_type = EVENT_TYPES[cause]
    for endpoint in _WEBHOOKS.all(selection.conversation.workspace_id):
        if event_type in endpoint.event_types:
            add(Channel.WEBHOOK, endpoint.pk, endpoint=endpoint)
    return planned
