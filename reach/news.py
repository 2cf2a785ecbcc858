"""What a question's news says outside Parley, made once for every channel (email, Slack,
webhooks) and worded as Parley's own page words it: the question, the conversation, who is asked,
who asked and why, its options, when it expires, and once settled, who settled it, how and
where."""

from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from django.conf import settings
from django.urls import reverse
from django.utils.text import Truncator

from core.people import person
from selection.links import answer_link_url
from selection.models import Selection, Via

from .preferences import preference_for

# How much of the input that led to the question is quoted.
WHY_CHARS = 500

KIND_WORDS = {
    "choice": "Choose",
    "text": "Type an answer",
    "confirm": "Confirm",
    "form": "Fill in the form",
}
PATH_WORDS = {"file": "Pick a file", "folder": "Pick a folder", "any": "Pick a file or folder"}
OUTCOME_WORDS = {
    "answered": "Answered",
    "dismissed": "Dismissed",
    "declined": "Declined",
    "expired": "Expired",
    "cancelled": "Cancelled",
}
HEADLINES = {
    "asked": "A question for you",
    "asked_anyone": "A new question",
    "reminded": "Reminder: a question waits for you",
    "escalated": "Nobody has answered yet",
}


def name_of(user) -> str:
    return (user.get_full_name() or user.get_username()) if user else ""


def outcome_line(selection: Selection) -> str:
    """How a settled question reads: "Answered by Bob Brown in Slack: Ship it"."""
    words = OUTCOME_WORDS.get(selection.status, selection.status.title())
    if selection.answered_by is not None:
        words += f" by {name_of(selection.answered_by)}"
    if selection.answered_via:
        words += f" {Via(selection.answered_via).label}"
    if answer := selection.answer_in_words():
        words += f": {answer}"
    return words


@dataclass
class News:
    """A question's news for one reader (``reader``: None for a channel or a webhook)."""

    cause: str
    selection: Selection
    reader: object = None
    named: list = field(default_factory=list)

    @property
    def conversation(self):
        return self.selection.conversation

    @property
    def workspace_name(self) -> str:
        return self.conversation.workspace.name

    @property
    def headline(self) -> str:
        if self.cause == "asked":
            addressed = self.reader is not None and self.selection.addressee_id == self.reader.pk
            return HEADLINES["asked" if addressed else "asked_anyone"]
        if self.cause == "settled":
            return outcome_line(self.selection)
        return HEADLINES[self.cause]

    @property
    def title(self) -> str:
        """A subject line: the headline and where."""
        return f"{self.headline} in “{self.conversation.title}”"

    @property
    def prompt(self) -> str:
        return self.selection.prompt

    @property
    def kind_words(self) -> str:
        if self.selection.kind == Selection.Kind.PATH:
            return PATH_WORDS.get(self.selection.mode, PATH_WORDS["file"])
        return KIND_WORDS[self.selection.kind]

    @property
    def options(self) -> list[dict]:
        return list(self.selection.options or [])

    @property
    def asked_by(self) -> str:
        """Who the agent asked for: "the agent, in Alice Anders's turn"."""
        starter = self.selection.turn.started_by
        return f"the agent, in {name_of(starter)}’s turn" if starter else "the agent"

    @property
    def why(self) -> str:
        """The input that led to the question (its turn's), cut to a readable length."""
        return Truncator(self.selection.turn.input).chars(WHY_CHARS)

    @property
    def who_is_asked(self) -> str:
        if self.selection.addressee_id:
            return name_of(self.selection.addressee)
        return f"anyone in {self.workspace_name} who may answer"

    @property
    def expires_at(self) -> datetime:
        return self.selection.expires_at

    @property
    def expires_text(self) -> str:
        """When it expires, in the reader's time zone (UTC without one)."""
        zone = "UTC"
        if self.reader is not None:
            zone = preference_for(self.reader).timezone
        local = self.expires_at.astimezone(ZoneInfo(zone))
        return f"at {local:%H:%M} on {local:%a %d %b} ({zone})"

    @property
    def conversation_url(self) -> str:
        path = reverse("conversation", args=[self.conversation.pk])
        return f"{settings.PARLEY_PUBLIC_URL}{path}#question-{self.selection.pk}"

    @property
    def answer_url(self) -> str | None:
        """The reader's own answer link; None without a reader."""
        if self.reader is None:
            return None
        return answer_link_url(selection_id=self.selection.pk, user=self.reader)

    def payload(self) -> dict:
        """The question as a webhook carries it: the same payload as the API's, with where it
        was asked and who asked."""
        return {
            "selection": self.selection.to_payload(),
            "conversation": {
                "id": self.conversation.pk,
                "title": self.conversation.title,
                "url": self.conversation_url,
            },
            "workspace": {"id": self.conversation.workspace.slug, "name": self.workspace_name},
            "asked_for": person(self.selection.turn.started_by),
            "input": self.why,
            "to": [person(user) for user in self.named],
        }
