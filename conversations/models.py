"""Workspaces and their members, conversations, turns, and the per-conversation event log."""

from pathlib import Path

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from core.ids import new_id

from .events import MESSAGE_EVENT_TYPES, TERMINAL_EVENT_TYPES, EventType, event_envelope

# Public ids: a short type prefix and 16 random hex digits, e.g. ``c_9f2c4e1a7b3d5c60``.


def new_conversation_id() -> str:
    return new_id("c")


def new_turn_id() -> str:
    return new_id("t")


class Workspace(models.Model):
    slug = models.SlugField(max_length=50, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="workspaces"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    @property
    def files_root(self) -> Path:
        """The folder on disk that agents and path pickers of this workspace work inside."""
        return Path(settings.PARLEY_FILES_ROOT) / self.slug


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner", "Owner"
        MEMBER = "member", "Member"
        VIEWER = "viewer", "Viewer"

    # The roles that may act (start, steer and stop turns, answer questions); viewers watch.
    ACTING_ROLES = (Role.OWNER, Role.MEMBER)

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )

    class Source(models.TextChoices):
        """Where a membership came from. One the identity provider's roles claim made is
        re-read at each sign-in (accounts.sso), and removed when the claim no longer names it."""

        ADMIN = "admin", "Given by an admin"
        INVITATION = "invitation", "Invitation"
        SSO = "sso", "Identity provider"

    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    source = models.CharField(max_length=12, choices=Source.choices, default=Source.ADMIN)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "user"], name="unique_membership"),
        ]

    def __str__(self):
        return f"{self.user} is {self.role} of {self.workspace}"

    @property
    def can_act(self) -> bool:
        """Owners and members may start, steer and stop turns and answer questions."""
        return self.role in self.ACTING_ROLES


class Conversation(models.Model):
    id = models.CharField(primary_key=True, max_length=24, default=new_conversation_id)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="conversations")
    title = models.CharField(max_length=200)
    agent = models.CharField(max_length=50)
    # The model its agent uses, for an agent that offers several ('' for the agent's default).
    model = models.CharField(max_length=100, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # The seq of the newest event, and the counter that hands out the next ones.
    last_seq = models.PositiveBigIntegerField(default=0)
    # When its newest event was stored (when it was created, until it has one): the lists'
    # order. Stamped by append_events in the update that takes the counter, so reading it costs
    # nothing. Not indexed, on purpose: that update runs for every batch of every turn, and an
    # index on a column it changes would be rewritten each time (PostgreSQL could no longer
    # make it a HOT update). A workspace's rows are found by its index and sorted.
    last_activity_at = models.DateTimeField(default=timezone.now, editable=False)
    # When it was archived: hidden from the home list, still found by search. Null if it is not.
    archived_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["workspace", "-created_at"], name="conversation_by_workspace")
        ]

    def __str__(self):
        return self.title

    def get_absolute_url(self) -> str:
        """Its live page (the admin's "View on site" goes there)."""
        return reverse("conversation", args=[self.pk])

    @property
    def is_archived(self) -> bool:
        return self.archived_at is not None


class TurnStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    AWAITING_INPUT = "awaiting_input", "Awaiting input"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


# At module level so that the constraint in Turn.Meta can name them too.
ACTIVE_TURN_STATUSES = (TurnStatus.QUEUED, TurnStatus.RUNNING, TurnStatus.AWAITING_INPUT)


class Turn(models.Model):
    Status = TurnStatus
    ACTIVE_STATUSES = ACTIVE_TURN_STATUSES
    # A turn ends in one of these statuses, with the one terminal event it writes, last.
    TERMINAL_EVENT_OF_STATUS = {
        Status.COMPLETED: EventType.TURN_COMPLETED,
        Status.FAILED: EventType.TURN_FAILED,
        Status.CANCELLED: EventType.TURN_CANCELLED,
    }
    ENDED_STATUSES = tuple(TERMINAL_EVENT_OF_STATUS)

    id = models.CharField(primary_key=True, max_length=24, default=new_turn_id)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="turns")
    input = models.TextField()
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The agent of this turn when it is not the conversation's: "external" for an outside agent
    # working through MCP (see external.agent); blank for the conversation's own.
    agent = models.CharField(max_length=50, blank=True)
    interactive = models.BooleanField(default=True)
    # Whether its agent asks before it writes or renames a file (started with false: it does not).
    confirm_writes = models.BooleanField(default=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    # What its watchers were told of a failure (a short reason), and what only admins see:
    # the exception and its traceback (see conversations.runtime.failures).
    error = models.TextField(blank=True)
    failure_detail = models.TextField(blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Where it runs: the channel-layer name of its control inbox, the process that owns it,
    # and the lease that process renews. A turn whose lease has run out (or is empty: handed
    # back, or released from memory while it waits for an answer) is owned by nobody, and the
    # next process to claim it resumes it from its journal (see TurnStep).
    inbox = models.CharField(max_length=200, blank=True)
    runner = models.CharField(max_length=100, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # How many batches of events its runner has written: a batch retried after its commit
    # was lost on the way back is recognised and not written twice.
    batches_written = models.PositiveIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation"],
                condition=Q(status__in=[str(status) for status in ACTIVE_TURN_STATUSES]),
                name="one_active_turn_per_conversation",
            ),
        ]
        indexes = [models.Index(fields=["status", "lease_expires_at"], name="turn_lease")]

    def __str__(self):
        return f"{self.id} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE_STATUSES


class ParkedTurn(Turn):
    """A turn waiting for an answer, as the admin lists them (with who holds each, if anyone)."""

    class Meta:
        proxy = True
        verbose_name = "parked turn"


class TurnStep(models.Model):
    """One completed step of a turn, in order: its journal, from which a resumed turn is rebuilt.

    A step is a tool call's outcome, a question asked (its answer lives on the question), the
    steering the agent took in, the outcome of a recorded ``ctx.step`` (a model's output), or the
    time (``ctx.now``) or random seed (``ctx.random``) the agent was given.
    Text is not journaled here: the turn's ``message.delta`` events are its record. ``said``
    is how many characters the agent had said when it took the step, so a replay checks that
    text and steps come in the same order. Written in the same transaction as the step's
    events.
    """

    class Kind(models.TextChoices):
        TOOL = "tool", "Tool call"
        ASK = "ask", "Question"
        STEERING = "steering", "Steering taken in"
        STEP = "step", "Recorded step"
        CLOCK = "clock", "The time read"
        SEED = "seed", "A random seed drawn"

    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveIntegerField()
    kind = models.CharField(max_length=10, choices=Kind.choices)
    name = models.CharField(max_length=200, blank=True)
    # A digest of the step's arguments: a replay that calls it with others has diverged.
    digest = models.CharField(max_length=64, blank=True)
    said = models.PositiveBigIntegerField(default=0)
    outcome = models.JSONField(default=dict)

    class Meta:
        ordering = ["turn", "index"]
        constraints = [
            models.UniqueConstraint(fields=["turn", "index"], name="unique_step_per_turn"),
        ]

    def __str__(self):
        return f"{self.turn_id} step {self.index} ({self.kind} {self.name})"


class TurnEvent(models.Model):
    Type = EventType
    TERMINAL_TYPES = TERMINAL_EVENT_TYPES

    # No single-column indexes on these: (conversation, seq) and (turn, seq) lead with them,
    # and every index is paid for on each event written.
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="events", db_index=False
    )
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="events", db_index=False)
    seq = models.PositiveBigIntegerField()
    type = models.CharField(max_length=40, choices=Type.choices)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["conversation", "seq"]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "seq"], name="unique_event_seq_per_conversation"
            ),
        ]
        indexes = [
            models.Index(fields=["turn", "seq"], name="event_by_turn"),
            # A running turn's steering, re-read now and then without visiting its other events.
            models.Index(
                fields=["turn", "seq"],
                condition=Q(type=EventType.TURN_STEERED.value),
                name="event_steering",
            ),
            # Unread counts (the activity app): the messages after a person's mark, without
            # visiting the deltas between them. The IN list sorted, as the count writes it.
            models.Index(
                fields=["conversation", "seq"],
                condition=Q(type__in=sorted(MESSAGE_EVENT_TYPES)),
                name="event_messages",
            ),
        ]

    def __str__(self):
        return f"{self.conversation_id}#{self.seq} {self.type}"

    def to_envelope(self) -> dict:
        return event_envelope(
            seq=self.seq,
            type=self.type,
            conversation_id=self.conversation_id,
            turn_id=self.turn_id,
            created_at=self.created_at,
            data=self.data,
        )


class Watcher(models.Model):
    """A socket open on a conversation: who is watching it right now, and from which process.

    Rows are added and removed as sockets come and go; the process renews ``seen_at`` with its
    turn leases, so the rows of a process that died are cleared once they fall behind.
    """

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="watchers"
    )
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    process = models.CharField(max_length=100)
    connected_at = models.DateTimeField(auto_now_add=True)
    seen_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["process", "seen_at"], name="watcher_by_process")]

    def __str__(self):
        return f"{self.user} watching {self.conversation_id}"
