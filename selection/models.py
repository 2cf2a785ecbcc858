"""Selections: the questions an agent asks a person in the middle of a turn, and their answers."""

from django.conf import settings
from django.db import models

from conversations.events import format_ts
from conversations.models import Conversation, Turn
from conversations.questions import KINDS, MODES, new_selection_id
from core.people import person


class Via(models.TextChoices):
    """Where an answer was given, as people are told it ("answered by Bob in Slack")."""

    PAGE = "page", "in Parley"
    API = "api", "through the API"
    SOCKET = "socket", "over a socket"
    ADMIN = "admin", "in the admin"
    LINK = "link", "from an answer link"
    SLACK = "slack", "in Slack"


class Selection(models.Model):
    # The question kinds and a path question's modes, as conversations.questions defines them.
    Kind = models.TextChoices(
        "Kind", [(name.upper(), (name, k.label)) for name, k in KINDS.items()]
    )

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        ANSWERED = "answered", "Answered"
        DISMISSED = "dismissed", "Dismissed"
        DECLINED = "declined", "Declined"
        EXPIRED = "expired", "Expired"
        CANCELLED = "cancelled", "Cancelled"

    Mode = models.TextChoices(
        "Mode", [(name.upper(), (name, label)) for name, label in MODES.items()]
    )

    id = models.CharField(primary_key=True, max_length=24, default=new_selection_id)
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="selections"
    )
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="selections")
    # The n-th question of its turn: what a resumed turn matches stored answers by.
    ordinal = models.PositiveIntegerField()
    kind = models.CharField(max_length=10, choices=Kind.choices)
    prompt = models.TextField()
    # choice: [{"label", "value", "description"?}]
    options = models.JSONField(default=list, blank=True)
    multiple = models.BooleanField(default=False)
    allow_freeform = models.BooleanField(default=False)
    min_choices = models.PositiveIntegerField(null=True, blank=True)
    max_choices = models.PositiveIntegerField(null=True, blank=True)
    # path: what may be picked, and the folder (relative to the workspace's files) to pick in.
    mode = models.CharField(max_length=10, choices=Mode.choices, blank=True)
    root = models.CharField(max_length=1024, blank=True)
    # form: a flat JSON schema (the subset MCP elicitation allows).
    schema = models.JSONField(null=True, blank=True)
    # Its fields' names in the order the question defined them: PostgreSQL's jsonb keeps no key
    # order, so the schema alone cannot say it (see form_field_names).
    field_order = models.JSONField(default=list, blank=True, editable=False)
    addressee = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    answer = models.JSONField(null=True, blank=True)
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    answered_at = models.DateTimeField(null=True, blank=True)
    # Where the answer came from (see Via); empty for what nobody gave (expiry, cancelling).
    answered_via = models.CharField(max_length=10, choices=Via.choices, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    # When process upkeep reminds the people who may answer it (its addressee, else the
    # members), and escalates it to the workspace's owners; null: never. Set when it is asked
    # (see selection.services.selection_request); the *_at fields once it was done.
    remind_at = models.DateTimeField(null=True, blank=True)
    reminded_at = models.DateTimeField(null=True, blank=True)
    escalate_at = models.DateTimeField(null=True, blank=True)
    escalated_at = models.DateTimeField(null=True, blank=True)
    # The seq of its selection.resolved event, once that is written (exactly one per question).
    resolved_seq = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        verbose_name = "question"
        verbose_name_plural = "questions"
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["turn", "ordinal"], name="unique_question_per_turn"),
        ]
        indexes = [
            models.Index(fields=["conversation", "status"], name="selection_by_conversation"),
            models.Index(fields=["status", "expires_at"], name="selection_by_status"),
            models.Index(
                fields=["remind_at"],
                condition=models.Q(status="pending", reminded_at__isnull=True),
                name="selection_reminder_due",
            ),
            models.Index(
                fields=["escalate_at"],
                condition=models.Q(status="pending", escalated_at__isnull=True),
                name="selection_escalation_due",
            ),
        ]

    def __str__(self):
        return f"{self.id} ({self.kind}, {self.status})"

    @property
    def is_pending(self) -> bool:
        return self.status == self.Status.PENDING

    def to_payload(self) -> dict:
        """The one shape of a selection: in selection.requested, the API and the admin."""
        return {
            "id": self.id,
            "conversation": self.conversation_id,
            "turn": self.turn_id,
            "ordinal": self.ordinal,
            "kind": self.kind,
            "prompt": self.prompt,
            "options": self.options,
            "multiple": self.multiple,
            "allow_freeform": self.allow_freeform,
            "min_choices": self.min_choices,
            "max_choices": self.max_choices,
            "mode": self.mode or None,
            "root": self.root if self.kind == self.Kind.PATH else None,
            "schema": self.schema,
            # A form's field names in its own order (the schema's object may have lost it).
            "field_order": self.form_field_names() if self.kind == self.Kind.FORM else None,
            "addressee": person(self.addressee),
            "status": self.status,
            "answer": self.answer,
            "answered_by": person(self.answered_by),
            "answered_at": format_ts(self.answered_at) if self.answered_at else None,
            "answered_via": self.answered_via or None,
            "created_at": format_ts(self.created_at),
            "expires_at": format_ts(self.expires_at),
            "reminded_at": format_ts(self.reminded_at) if self.reminded_at else None,
            "escalated_at": format_ts(self.escalated_at) if self.escalated_at else None,
        }

    def answer_in_words(self) -> str:
        """How its answer reads to a person, as on the conversation page: option labels for
        values, yes or no, quoted text, a form's field titles with their values ("" for none)."""
        answer = self.answer
        if answer is None:
            return ""
        if self.kind == self.Kind.CHOICE:
            labels = {option["value"]: option["label"] for option in self.options}
            values = answer if isinstance(answer, list) else [answer]
            return ", ".join(labels.get(value, f"“{value}”") for value in values)
        if self.kind == self.Kind.CONFIRM:
            return "yes" if answer else "no"
        if self.kind == self.Kind.TEXT:
            return f"“{answer}”"
        if self.kind == self.Kind.FORM and isinstance(answer, dict):
            fields = (self.schema or {}).get("properties", {})
            # In the form's order (any name it does not know after, by name).
            order = [name for name in self.form_field_names() if name in answer]
            order += sorted(set(answer) - set(order))
            return "; ".join(
                f"{fields.get(name, {}).get('title') or name}: "
                + (
                    ("yes" if answer[name] else "no")
                    if isinstance(answer[name], bool)
                    else str(answer[name])
                )
                for name in order
            )
        return str(answer)

    def form_field_names(self) -> list[str]:
        """A form question's field names in the order it defined them (a question stored before
        that order was kept: as its schema gives them)."""
        properties = list((self.schema or {}).get("properties", {}))
        kept = [name for name in self.field_order if name in properties]
        return kept + [name for name in properties if name not in kept]

    def outcome(self) -> dict:
        """What its agent is told once it is settled: status, answer, and who answered."""
        return {
            "status": self.status,
            "answer": self.answer,
            "answered_by": self.answered_by.get_username() if self.answered_by else None,
        }

    def resolution_payload(self) -> dict:
        """The data of its selection.resolved event."""
        return {
            "selection": self.id,
            "status": self.status,
            "answer": self.answer,
            "answered_by": person(self.answered_by),
            "answered_via": self.answered_via or None,
        }
