"""The search index: one entry per searched event, written in the transaction that stores it."""

from django.db import models

from conversations.models import Conversation


class SearchEntry(models.Model):
    """What one event said, as searched and shown: its text (for snippets) and its words (folded,
    see search.text), which each database indexes as they are written: PostgreSQL in a generated
    ``tsvector`` column with a GIN index, SQLite in an FTS5 table kept by triggers (both made by
    this app's first migration, beside the table)."""

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    seq = models.PositiveBigIntegerField()
    type = models.CharField(max_length=40)
    who = models.CharField(
        max_length=300, blank=True, help_text="A person's name; blank: the agent"
    )
    text = models.TextField()
    words = models.TextField()
    created_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "search entries"
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="unique_search_entry"),
        ]
        # Newest first is by id (the order stored, see search.selectors): each database reads
        # its own index of ids (the primary key, FTS5's rowids) backwards, and needs no other.

    def __str__(self):
        return f"{self.conversation_id}#{self.seq} {self.type}"
