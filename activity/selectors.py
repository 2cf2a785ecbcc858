"""A person's conversations across their workspaces by latest activity, with what is new."""

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from conversations.events import MESSAGE_EVENT_TYPES
from conversations.models import Conversation, TurnEvent
from conversations.selectors import conversations_for_user

from .models import Seen


def with_unread(conversations: QuerySet[Conversation], *, user) -> QuerySet[Conversation]:
    """Annotate each conversation with ``seen_seq`` (how far the person has seen it, 0 if never)
    and ``unread`` (the messages stored after that: see MESSAGE_EVENT_TYPES)."""
    seen = Seen.objects.filter(user=user, conversation=OuterRef("pk")).values("last_seq")[:1]
    unread = (
        TurnEvent.objects.filter(
            conversation=OuterRef("pk"),
            seq__gt=OuterRef("seen_seq"),
            type__in=MESSAGE_EVENT_TYPES,
        )
        .order_by()
        .values("conversation")
        .annotate(count=Count("pk"))
        .values("count")
    )
    return conversations.annotate(
        seen_seq=Coalesce(Subquery(seen), Value(0), output_field=IntegerField())
    ).annotate(unread=Coalesce(Subquery(unread), Value(0), output_field=IntegerField()))


def recent_conversations(*, user, limit: int = 50) -> list[Conversation]:
    """The person's ``limit`` conversations (not archived) of every workspace they belong to,
    latest activity first, each with its active turn, ``seen_seq`` and ``unread``."""
    return list(with_unread(conversations_for_user(user=user, archived=False), user=user)[:limit])


def unread_of(*, user, conversation_id: str) -> int:
    conversations = Conversation.objects.filter(pk=conversation_id)
    return with_unread(conversations, user=user).values_list("unread", flat=True).first() or 0
