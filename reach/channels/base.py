"""What every channel shares: how a send went, and the checks made again before anything is
sent (the question still open, its reader still allowed to answer it)."""

from dataclasses import dataclass
from typing import Any, Protocol

from core.errors import ApplicationError
from selection.access import selection_access

from ..models import Delivery
from ..news import name_of


@dataclass(frozen=True)
class Result:
    """How a send went: ``reference`` (what the far side calls it) when it worked; otherwise
    ``response`` says what went wrong, ``final`` when trying again cannot help (a refusal), and
    ``retry_after`` when the far side said when to come back."""

    ok: bool
    reference: str = ""
    response: str = ""
    final: bool = False
    retry_after: float | None = None
    learned: Any = None


@dataclass(frozen=True)
class Skip:
    """Nothing to send any more, and why (settled before it was sent, access lost, ...)."""

    reason: str


@dataclass(frozen=True)
class Defer:
    """Not yet: look again in ``seconds`` (a Slack update waiting for its message)."""

    seconds: float


class Channel(Protocol):
    def prepare(self, delivery) -> Any | Skip | Defer: ...

    def send(self, outgoing) -> Result: ...

    def remember(self, delivery, result) -> None: ...


def still_wanted(delivery: Delivery) -> Skip | None:
    """A Skip if the delivery's news is stale: a question settled before it was sent (only its
    outcome is news now), or a reader who may no longer answer it (nothing reaches a person who
    lost access)."""
    selection = delivery.selection
    if delivery.cause != Delivery.Cause.SETTLED and not selection.is_pending:
        return Skip("The question was settled before this was sent.")
    if delivery.recipient is not None:
        if not delivery.recipient.is_active:
            return Skip(f"{name_of(delivery.recipient)} can no longer sign in.")
        try:
            selection_access(user=delivery.recipient, selection_id=selection.pk, answering=True)
        except ApplicationError:
            return Skip(f"{name_of(delivery.recipient)} may no longer answer it.")
    return None
