"""Marking a conversation seen by a person."""

from django.db import IntegrityError, transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from conversations.models import Conversation
from conversations.notices import people_notify
from core.errors import not_found

from .models import Seen


def conversation_seen(*, user, conversation, seq: int) -> int:
    """Record that ``user`` has seen ``conversation`` up to event ``seq`` (at most its latest;
    a mark never goes back). Returns the mark as stored. The person's other pages hear of it
    on their own socket.

    Raises ApplicationError ``not_found`` (404) when the conversation was deleted since the
    caller checked access (nothing is stored)."""
    seq = max(0, min(seq, conversation.last_seq))
    now = timezone.now()
    marks = Seen.objects.filter(user=user, conversation=conversation)
    try:
        with transaction.atomic():
            # Foreign keys are checked at commit: without this a mark of a deleted conversation
            # would be written, then refused by the commit (a 500).
            if not Conversation.objects.filter(pk=conversation.pk).exists():
                raise not_found("Conversation")
            if not marks.update(last_seq=Greatest(F("last_seq"), Value(seq)), seen_at=now):
                try:
                    with transaction.atomic():
                        Seen.objects.create(
                            user=user, conversation=conversation, last_seq=seq, seen_at=now
                        )
                except IntegrityError:
                    # Another page of theirs marked it first: take the later of the two.
                    marks.update(last_seq=Greatest(F("last_seq"), Value(seq)), seen_at=now)
            stored = marks.values_list("last_seq", flat=True).first()
            if stored is None:  # deleted (and its marks with it) while we wrote
                raise not_found("Conversation")
            people_notify(
                workspace_id=conversation.workspace_id,
                notice={"kind": "seen", "conversation": conversation.pk, "user": user.pk},
            )
    except IntegrityError as error:  # deleted before our commit: the mark points nowhere
        raise not_found("Conversation") from error
    return stored
