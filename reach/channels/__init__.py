"""The channels a question's news goes out on, each behind one interface (see base.Channel):
``prepare`` reads what sending takes from the database (in a database thread), ``send`` sends it
(in a sending thread, touching no database), ``remember`` keeps what the send learned (in the
transaction that records it)."""

from .base import Channel, Defer, Result, Skip
from .email import EmailChannel
from .slack import SlackChannel
from .webhooks import WebhookChannel

CHANNELS: dict[str, Channel] = {
    "email": EmailChannel(),
    "slack": SlackChannel(),
    "webhook": WebhookChannel(),
}

__all__ = ["CHANNELS", "Channel", "Defer", "Result", "Skip"]
