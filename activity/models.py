"""How far each person has seen each conversation: the mark their unread counts start from."""

from django.conf import settings
from django.db import models

from conversations.models import Conversation


class Seen(models.Model):
    """The seq of the newest event a person has seen of a conversation (never goes back)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+")
    last_seq = models.PositiveBigIntegerField(default=0)
    seen_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "conversation"], name="one_seen_mark_per_person"
            )
        ]

    def __str__(self):
        return f"{self.user} saw {self.conversation_id} to #{self.last_seq}"
