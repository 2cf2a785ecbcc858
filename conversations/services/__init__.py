"""Every write to conversations, turns and their event log, by topic: ``events`` (the log and a
turn's journal steps), ``conversations``, ``turns`` (the state machine), ``ownership`` (which
process holds a turn, and how a waiting turn is woken) and ``members`` (memberships and
watchers). The public services of each are gathered here.

Events are appended in the same transaction as the state they record, numbered from the
conversation's counter, and published only once that transaction commits ("write, then
publish"), so whatever a client saw live it can replay.

Lock order. Every transaction that takes more than one row lock takes them in this order, so two
writers never wait on each other in a circle (PostgreSQL's "deadlock detected"):

    Turn  ->  Selection  ->  Conversation (its event counter, always last: see append_events)

Steering, Stop, a turn's writes and its end lock the turn first; an answer locks the turn
before it settles the question (selection.services); the counter is taken by append_events,
which every writer calls last.

Fencing. The writes a turn makes itself (its events, its questions, its end) run only while its
process still owns it: the turn is locked and its ``runner`` checked in the same transaction
(``ownership.lock_owned_turn``). A process whose turn was taken over learns it at its next
write, or at its next lease renewal, and stops that turn. Writes from people and upkeep
(answers, steering, Stop, expiry, claims) are made by whichever process receives them, and are
not fenced.
"""

from .conversations import (
    MAX_TITLE_CHARS,
    ConversationRights,
    conversation_create,
    conversation_delete,
    conversation_rights,
    conversation_update,
)
from .events import EventSpec, append_events, turn_events_append, turn_steps_record
from .members import membership_set, role_checked, watcher_add, watcher_remove, watchers_upkeep
from .ownership import (
    TurnLost,
    TurnReleased,
    Unowned,
    turn_claim,
    turn_hand_back,
    turn_release,
    turn_wake,
    turns_let_go,
    turns_renew,
    turns_unowned,
)
from .turns import (
    TURN_LOST_ERROR,
    turn_await_input,
    turn_cancel,
    turn_finish,
    turn_mark_running,
    turn_start,
    turn_steer,
)

__all__ = [
    "MAX_TITLE_CHARS",
    "TURN_LOST_ERROR",
    "ConversationRights",
    "EventSpec",
    "TurnLost",
    "TurnReleased",
    "Unowned",
    "append_events",
    "conversation_create",
    "conversation_delete",
    "conversation_rights",
    "conversation_update",
    "membership_set",
    "role_checked",
    "turn_await_input",
    "turn_cancel",
    "turn_claim",
    "turn_events_append",
    "turn_finish",
    "turn_hand_back",
    "turn_mark_running",
    "turn_release",
    "turn_start",
    "turn_steer",
    "turn_steps_record",
    "turn_wake",
    "turns_let_go",
    "turns_renew",
    "turns_unowned",
    "watcher_add",
    "watcher_remove",
    "watchers_upkeep",
]
