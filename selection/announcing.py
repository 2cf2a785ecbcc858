"""Where a question's news leaves Parley: the hook through which the reach app (email, Slack,
webhooks) hears that a question was asked, reminded, escalated or settled, inside the
transaction that stores it (so its notifications commit or roll back with it). The selection
app never imports reach; reach registers itself here in its ``AppConfig.ready()``."""

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .models import Selection


class Announcements(Protocol):
    def announce(self, *, selection: "Selection", cause: str, to: list) -> None:
        """Called inside the transaction that writes the question's event. ``cause``: asked,
        reminded, escalated or settled; ``to``: the people a reminder or escalation names."""


_listeners: list[Announcements] = []


def listen(listener: Announcements) -> None:
    """Register a listener (once, at app start)."""
    if listener not in _listeners:
        _listeners.append(listener)


def announce(*, selection: "Selection", cause: str, to=()) -> None:
    for listener in _listeners:
        listener.announce(selection=selection, cause=cause, to=list(to))
