"""Hooks through which a lower layer reaches a higher one without importing it.

Services never import the turn runtime, and the conversations app never imports the selection
app. Where they must reach up or across (launch a turn once it is committed, wake a turn, store
a question a turn asks, close a turn's questions when it ends), they call a hook that the layer
providing it filled at app start, in its ``AppConfig.ready()``, the way Django's signals and
Channels' layers let an app plug in:

- ``turns`` is filled by the conversations app with its turn runtime
  (:class:`conversations.runtime.runner.TurnRunner`);
- ``questions`` is filled by the selection app (:class:`selection.hooks.TurnQuestions`);
- ``index`` is filled by the search app (:class:`search.indexing.EventIndex`);
- ``record_parts`` is added to by every app whose rows go with a conversation or a workspace
  (search's index entries, activity's seen marks), for the admin's delete pages.
"""

from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from django.core.exceptions import ImproperlyConfigured

if TYPE_CHECKING:
    from .events import Frame
    from .models import Turn

Provider = TypeVar("Provider")


class Hook(Generic[Provider]):
    """A place for one provider, registered once at app start and fetched where it is used."""

    def __init__(self, name: str):
        self.name = name
        self._provider: Provider | None = None

    def register(self, provider: Provider) -> None:
        self._provider = provider

    def get(self) -> Provider:
        if self._provider is None:
            raise ImproperlyConfigured(f"Nothing provides {self.name}: is its app installed?")
        return self._provider


class Parts:
    """A place for many: the models that each app adds at app start."""

    def __init__(self, name: str):
        self.name = name
        self._models: list = []

    def add(self, model) -> None:
        if model not in self._models:
            self._models.append(model)

    def models(self) -> tuple:
        return tuple(self._models)


class Turns(Protocol):
    """The turn runtime, as services see it. Each method is safe to call from any thread."""

    def launch(self, turn_id: str) -> None:
        """Start running a committed turn in this process."""

    def resume(self, turn_id: str, reason: str, held_from: str | None = None) -> None:
        """Claim a turn nobody holds and resume it in this process from its journal; nothing
        happens if another process claims it first. ``held_from`` (who held it before): the
        turn is held for this process already (see services.ownership.turn_wake)."""

    def notify(self, inbox: str, message: dict) -> None:
        """Send a control message (Stop, steering, a wake-up) to a turn's inbox, wherever the
        turn runs. A wake-up only: what it announces is already stored, and a turn that misses
        it finds out from the database."""


class Questions(Protocol):
    """What turns need of the questions they ask (the selection app provides it). Each method
    reaches the database: call it from a database thread (see core.dbthreads)."""

    def store(
        self,
        *,
        selection_id: str,
        turn_id: str,
        ordinal: int,
        fields: dict,
        addressee: Any,
        timeout_seconds: float,
        process: str,
        step: dict | None = None,
        escalate: bool | None = None,
    ) -> Any:
        """Store a question a running turn asks (``fields``: see questions.clean_question;
        ``addressee``: a user or None) under ``selection_id``, with its journal ``step``, and
        announce it. ``escalate``: whether it goes to the owners near its end (None: the
        setting). A write of the turn's own, fenced (TurnLost). A retry stores it once."""

    def outcome(self, selection_id: str) -> dict | None:
        """A settled question's outcome (``{"status", "answer", "answered_by"}``), None while
        it is pending; a question that no longer exists is taken as cancelled."""

    def settled(self, ids: list[str]) -> list[str]:
        """Which of these questions are no longer pending (or no longer exist)."""

    def upkeep(self) -> None:
        """Remind, escalate and expire the pending questions whose time for it has come."""

    def close_for_turn(self, *, turn: "Turn") -> list["Frame"]:
        """Inside the transaction that ends ``turn``: cancel its pending questions and append
        every ``selection.resolved`` it still owes, before its terminal event. Returns the
        frames appended."""

    def pending_payloads(self, *, conversation_ids: list[str]) -> dict[str, list[dict]]:
        """The questions still pending in each conversation, oldest first."""

    def reply(
        self, *, user, conversation_id: str, selection_id: str, answer: Any, action: str | None
    ) -> dict:
        """Answer (or dismiss, or decline) a question of this conversation for ``user``, as the
        socket's ``selection.reply`` does. Returns ``{"selection", "status"}``; raises
        ApplicationError as the REST reply does."""


class EventIndex(Protocol):
    """The search index, as the event log sees it (the search app provides it). The event log
    hands it the messages (``events.MESSAGE_EVENT_TYPES``) of each batch it stores."""

    def store(self, *, conversation_id: str, events: list[tuple[int, str, dict]], created_at):
        """Inside the transaction that stores them: index these events (seq, type, data) of one
        conversation, stored at ``created_at``."""


turns: Hook[Turns] = Hook("the turn runtime")
questions: Hook[Questions] = Hook("the questions turns ask")
index: Hook[EventIndex] = Hook("the search index")
# Models of higher apps whose rows are part of a conversation's record: deleted with their
# conversation (or its workspace) and never on their own. The admin's delete pages take them
# with the conversation without asking for their own delete permission.
record_parts: Parts = Parts("the parts of a conversation's record kept by higher apps")
