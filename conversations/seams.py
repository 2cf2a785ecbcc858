"""Seams through which a lower layer reaches a higher one without importing it.

Services never import the turn runtime, and the conversations app never imports the selection
app. Where they must reach up or across (launch a turn once it is committed, wake a turn, close
a turn's questions when it ends), they call a seam that the layer providing it filled at app
start, in its ``AppConfig.ready()``, the way Django's signals and Channels' layers let an app
plug in:

- ``turns`` is filled by the conversations app with its turn runtime
  (:class:`conversations.runtime.runner.TurnRunner`);
- ``questions`` is filled by the selection app (:class:`selection.hooks.TurnQuestions`).
"""

from typing import Any, Generic, Protocol, TypeVar

from django.core.exceptions import ImproperlyConfigured

Provider = TypeVar("Provider")


class Seam(Generic[Provider]):
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


class Turns(Protocol):
    """The turn runtime, as services see it."""

    def launch(self, turn_id: str) -> None:
        """Start running a committed turn in this process. Safe to call from any thread."""

    def resume(self, turn_id: str, reason: str, held_from: str | None = None) -> None:
        """Claim a turn nobody holds and resume it in this process from its journal. Safe to
        call from any thread; does nothing if another process claims it first. ``held_from``
        (who held it before): the turn is held for this process already
        (services.ownership.turn_wake)."""

    def notify(self, inbox: str, message: dict) -> None:
        """Send a control message (Stop, steering, a wake-up) to a turn's inbox, wherever the
        turn runs. Safe to call from any thread. A wake-up only: what it announces is already
        stored, and a turn that misses it finds out from the database."""


class Questions(Protocol):
    """What a turn needs of the questions it asks (the selection app provides it)."""

    async def prepare(self, *, workspace_id: int, files_root, addressee: str | None, **fields):
        """Check a question before it is asked; returns what :meth:`ask` takes. Raises
        ValueError when the question is malformed (the agent's bug: it fails the turn)."""

    async def ask(
        self,
        question,
        *,
        turn_id: str,
        ordinal: int,
        timeout: float,
        step: dict,
        releasable: bool,
        selection_id: str | None = None,
        escalate: bool | None = None,
    ) -> dict:
        """Store the question (with its journal ``step``; under ``selection_id`` if given;
        ``escalate``: whether it goes to the owners near its end), announce it, and wait (holding no
        thread) until it is settled. Returns ``{"selection", "status", "answer",
        "answered_by"}``. If ``releasable``, a long wait lets go of the turn (raising
        TurnReleased); settling the question then resumes it."""

    async def wait_again(self, selection_id: str, *, turn_id: str, releasable: bool) -> dict:
        """For a resumed turn: the outcome of a question it had asked, waiting for it (as
        :meth:`ask` does) if it is still pending."""

    def upkeep(self) -> None:
        """Remind, escalate and expire the pending questions whose time for it has come
        (process upkeep, from any thread)."""

    def wake(self, selection_id: str, outcome: dict | None) -> None:
        """A wake-up for a parked question reached this process (on the server loop)."""

    def close_for_turn(self, *, turn) -> None:
        """Inside the transaction that ends ``turn``: cancel its pending questions and append
        every ``selection.resolved`` it still owes, before its terminal event."""

    def pending_payloads(self, *, conversation_ids: list[str]) -> dict[str, list[dict]]:
        """The questions still pending in each conversation, oldest first."""

    def reply(
        self, *, user, conversation_id: str, selection_id: str, answer: Any, action: str | None
    ) -> dict:
        """Answer (or dismiss, or decline) a question of this conversation for ``user``, as the
        socket's ``selection.reply`` does. Returns ``{"selection", "status"}``; raises
        ApplicationError as the REST reply does."""


turns: Seam[Turns] = Seam("the turn runtime")
questions: Seam[Questions] = Seam("the questions turns ask")
