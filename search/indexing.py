"""The index kept as events are stored: conversations' event log hands the searched events of
every batch it writes to this hook (conversations.hooks.index), inside the same transaction."""

from datetime import datetime

from conversations.events import EventType
from selection.models import Selection

from .models import SearchEntry
from .text import SEARCHED_TYPES, entry_text, normalized, words_of


def answer_words(data: dict, selections=Selection.objects) -> str | None:
    """A selection.resolved's answer as people read it (option labels, yes or no, a form's field
    titles), from its question (read from ``selections``: the migration passes its own); None
    if the question is gone."""
    found = (
        selections.filter(pk=data.get("selection"))
        .values("kind", "options", "schema", "answer")
        .first()
    )
    if found is None:
        return None
    return Selection(**{**found, "answer": data.get("answer")}).answer_in_words()


def entry_for(
    *,
    conversation_id: str,
    seq: int,
    type_: str,
    data: dict,
    created_at: datetime,
    selections=Selection.objects,
) -> SearchEntry | None:
    """The entry an event makes, or None if it says nothing searchable."""
    words_of_answer = (
        answer_words(data, selections) if type_ == EventType.SELECTION_RESOLVED else None
    )
    said, who = entry_text(type_, data, words_of_answer)
    text = normalized(said)
    words = words_of(text)
    if not words:
        return None
    return SearchEntry(
        conversation_id=conversation_id,
        seq=seq,
        type=type_,
        who=who[:300],
        text=text,
        words=words,
        created_at=created_at,
    )


class EventIndex:
    """What conversations.hooks.index provides: the types it wants, and storing them."""

    types = SEARCHED_TYPES

    def store(self, *, conversation_id: str, events: list[tuple[int, str, dict]], created_at):
        entries = [
            entry
            for seq, type_, data in events
            if (
                entry := entry_for(
                    conversation_id=conversation_id,
                    seq=seq,
                    type_=type_,
                    data=data,
                    created_at=created_at,
                )
            )
        ]
        if entries:
            SearchEntry.objects.bulk_create(entries)
