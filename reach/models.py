"""What reaching people outside Parley keeps: the outbox of deliveries and their attempts, each
person's choices, a workspace's Slack channel and webhook endpoints, and who is who on Slack."""

from django.conf import settings
from django.db import models

from conversations.models import Workspace
from core.ids import new_id
from selection.models import Selection


def new_delivery_id() -> str:
    """A delivery's id, e.g. ``dlv_9f2c4e1a7b3d5c60``: also its idempotency key (the email's
    Message-ID, the webhook's ``webhook-id``), the same on every attempt."""
    return new_id("dlv")


def new_endpoint_id() -> str:
    return new_id("whk")


class Channel(models.TextChoices):
    EMAIL = "email", "Email"
    SLACK = "slack", "Slack"
    WEBHOOK = "webhook", "Webhook"


class Reach(models.TextChoices):
    """Which questions a person hears of on a channel."""

    OFF = "off", "Nothing"
    ADDRESSED = "addressed", "Questions for me"
    ALL = "all", "Every question I may answer"


class WebhookEndpoint(models.Model):
    """Where a workspace's webhooks go: a URL, the event types it wants, and its signing secret
    (Standard Webhooks' ``whsec_…``, shown once when it is made)."""

    id = models.CharField(primary_key=True, max_length=24, default=new_endpoint_id)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=2000)
    description = models.CharField(max_length=200, blank=True)
    event_types = models.JSONField(default=list)
    secret = models.CharField(max_length=100)
    enabled = models.BooleanField(default=True)
    # Deliveries that failed for good in a row (any success resets it); at the limit
    # (PARLEY_WEBHOOK_DISABLE_AFTER) the endpoint is disabled, saying why.
    failures_in_a_row = models.PositiveIntegerField(default=0)
    disabled_reason = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "webhook endpoint"
        ordering = ["workspace", "created_at"]

    def __str__(self):
        return f"{self.url} ({self.workspace})"


class Delivery(models.Model):
    """One notification to one address on one channel, written in the transaction of the event
    that causes it and sent by upkeep on any process, at least once."""

    class Cause(models.TextChoices):
        ASKED = "asked", "Asked"
        REMINDED = "reminded", "Reminded"
        ESCALATED = "escalated", "Escalated"
        SETTLED = "settled", "Settled"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"  # to be sent (again) from next_attempt_at
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed"  # for good: every attempt failed, or a refusal
        SKIPPED = "skipped", "Skipped"  # nothing to send any more (see reason)

    id = models.CharField(primary_key=True, max_length=24, default=new_delivery_id)
    selection = models.ForeignKey(Selection, on_delete=models.CASCADE, related_name="deliveries")
    cause = models.CharField(max_length=10, choices=Cause.choices)
    channel = models.CharField(max_length=10, choices=Channel.choices)
    # Who it is for (email, a Slack direct message); none for a channel or a webhook.
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Where: an email address (for email and a Slack direct message), "#<Slack channel id>", a
    # webhook endpoint's id; for a Slack update, the id of the delivery whose message it updates.
    address = models.CharField(max_length=320)
    endpoint = models.ForeignKey(
        WebhookEndpoint,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="deliveries",
    )
    # A Slack message's update (cause "settled"): the delivery that posted it.
    updates = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="updated_by"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    reason = models.CharField(max_length=300, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    # A claim: the process sending it, until when (a process that died lets it lapse).
    claimed_by = models.CharField(max_length=64, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    # What the far side calls it once sent: a Slack message's "channel ts", an email's
    # Message-ID.
    reference = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "deliveries"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["selection", "cause", "channel", "address"],
                name="one_delivery_per_address",
            ),
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at"],
                condition=models.Q(status="pending"),
                name="delivery_due",
            ),
        ]

    def __str__(self):
        return f"{self.channel} {self.cause} → {self.address} ({self.status})"


# The webhook event type of each cause (what an endpoint chooses among, and its body's "type").
EVENT_TYPES = {
    Delivery.Cause.ASKED: "question.asked",
    Delivery.Cause.REMINDED: "question.reminded",
    Delivery.Cause.ESCALATED: "question.escalated",
    Delivery.Cause.SETTLED: "question.resolved",
}


class Attempt(models.Model):
    """One try at sending a delivery, as the admin and an endpoint's delivery log show it."""

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveIntegerField()
    process = models.CharField(max_length=64)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    ok = models.BooleanField(default=False)
    # What the far side said: an HTTP status, SMTP's reply, Slack's error; never a secret.
    response = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["delivery", "number"]
        constraints = [
            models.UniqueConstraint(fields=["delivery", "number"], name="one_attempt_per_number"),
        ]

    def __str__(self):
        return f"{self.delivery_id} #{self.number} ({'ok' if self.ok else 'failed'})"


class Preference(models.Model):
    """What a person wants to hear of, where, and when not. No row: the defaults (every channel
    set up for questions addressed to them, the browser for all they may answer)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="reach_preference"
    )
    email = models.CharField(max_length=10, choices=Reach.choices, default=Reach.ADDRESSED)
    slack = models.CharField(max_length=10, choices=Reach.choices, default=Reach.ADDRESSED)
    browser = models.CharField(max_length=10, choices=Reach.choices, default=Reach.ALL)
    # Quiet hours, in the person's time zone: email and Slack wait until they end. Both null:
    # none. A window may pass midnight (22:00 to 07:00).
    quiet_from = models.TimeField(null=True, blank=True)
    quiet_until = models.TimeField(null=True, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"{self.user}'s notifications"


class WorkspaceReach(models.Model):
    """A workspace's own channels, set by its owners: the Slack channel where questions for
    anyone go."""

    workspace = models.OneToOneField(Workspace, on_delete=models.CASCADE, related_name="reach")
    slack_channel = models.CharField(max_length=80, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "workspace channels"
        verbose_name_plural = "workspace channels"

    def __str__(self):
        return f"{self.workspace}'s channels"


class SlackUser(models.Model):
    """Who a person is on Slack, as ``users.lookupByEmail`` said for the email they had then
    (empty ``slack_id``: no Slack user has it). Looked up again when the email changes."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="slack_user"
    )
    email = models.EmailField()
    slack_id = models.CharField(max_length=32, blank=True, db_index=True)
    looked_up_at = models.DateTimeField()

    def __str__(self):
        return f"{self.user} = {self.slack_id or 'nobody'} on Slack"
