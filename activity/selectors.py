"""A person's conversations across their workspaces by latest activity, with what is new."""

import re

from django.db.models import (
    BooleanField,
    F,
    Func,
    IntegerField,
    OuterRef,
    QuerySet,
    Subquery,
    Value,
)
from django.db.models.functions import Coalesce

from conversations.events import MESSAGE_EVENT_TYPES
from conversations.models import Conversation, TurnEvent
from conversations.selectors import conversations_for_user

from .models import Seen

# An unread count stops at this many: each conversation's count reads at most this many rows
# (of the partial index of message events), so a conversation nobody has opened in months costs
# what any other does. The sidebar shows "99+" above 99.
UNREAD_CAP = 100

# In the order of the index's condition (conversations' event_messages): SQLite uses a partial
# index only when the query repeats its condition as written, IN list and all, with the values
# written out (a parameter it cannot match when it plans the query).
MESSAGE_TYPES = sorted(MESSAGE_EVENT_TYPES)


class InWritten(Func):
    """``expression IN ('a', 'b')`` with the values written into the SQL: constant names only."""

    output_field = BooleanField()

    def __init__(self, expression, values: list[str]):
        assert all(re.fullmatch(r"[a-z_.]+", value) for value in values), values
        self.values = values
        super().__init__(expression)

    def as_sql(self, compiler, connection, **extra):
        sql, params = compiler.compile(self.source_expressions[0])
        written = ", ".join(f"'{value}'" for value in self.values)
        return f"{sql} IN ({written})", params


class CappedCount(Subquery):
    """How many rows the (sliced) subquery gives: COUNT(*) over it, so the slice caps the rows
    read."""

    template = "(SELECT COUNT(*) FROM (%(subquery)s) AS capped)"
    output_field = IntegerField()


def with_unread(conversations: QuerySet[Conversation], *, user) -> QuerySet[Conversation]:
    """Annotate each conversation with ``seen_seq`` (how far the person has seen it, 0 if never)
    and ``unread`` (the messages stored after that, see MESSAGE_EVENT_TYPES, at most
    UNREAD_CAP)."""
    seen = Seen.objects.filter(user=user, conversation=OuterRef("pk")).values("last_seq")[:1]
    unread = TurnEvent.objects.filter(
        InWritten(F("type"), MESSAGE_TYPES),
        conversation=OuterRef("pk"),
        seq__gt=OuterRef("seen_seq"),
    ).order_by()
    return conversations.annotate(
        seen_seq=Coalesce(Subquery(seen), Value(0), output_field=IntegerField())
    ).annotate(unread=CappedCount(unread.values("seq")[:UNREAD_CAP]))


def recent_conversations(*, user, limit: int = 50) -> list[Conversation]:
    """The person's ``limit`` conversations (not archived) of every workspace they belong to,
    latest activity first, each with its active turn, ``seen_seq`` and ``unread``."""
    return list(with_unread(conversations_for_user(user=user, archived=False), user=user)[:limit])


def unread_of(*, user, conversation_id: str) -> int:
    conversations = Conversation.objects.filter(pk=conversation_id)
    return with_unread(conversations, user=user).values_list("unread", flat=True).first() or 0
