"""Marking a conversation seen by a person."""

from django.db import IntegrityError, transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from conversations.notices import people_notify

from .models import Seen


def conversation_seen(*, user, conversation, seq: int) -> int:
    """Record that ``user`` has seen ``conversation`` up to event ``seq`` (at most its latest;
    a mark never goes back). Returns the mark as stored. The person's other pages hear of it
    on their own socket."""
    seq = max(0, min(seq, conversation.last_seq))
    now = timezone.now()
    marks = Seen.objects.filter(user=user, conversation=conversation)
    with transaction.atomic():
        if not marks.update(last_seq=Greatest(F("last_seq"), Value(seq)), seen_at=now):
            try:
                with transaction.atomic():
                    Seen.objects.create(
                        user=user, conversation=conversation, last_seq=seq, seen_at=now
                    )
            except IntegrityError:
                # Another page of theirs marked it first: take the later of the two.
                marks.update(last_seq=Greatest(F("last_seq"), Value(seq)), seen_at=now)
        stored = marks.values_list("last_seq", flat=True).get()
        people_notify(
            workspace_id=conversation.workspace_id,
            notice={"kind": "seen", "conversation": conversation.pk, "user": user.pk},
        )
    return stored
