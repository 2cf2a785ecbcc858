"""The index kept as events are stored: conversations' event log hands the searched events of
every batch it writes to this hook (conversations.hooks.index), inside the same transaction."""

from datetime import datetime

from conversations.events import EventType
from core.prepared import PreparedLookup
from selection.models import Selection

from .models import SearchEntry
from .text import entry_text, normalized, words_of


def questions_answered(events, selections=Selection.objects) -> dict[str, dict]:
    """The questions whose answers are among ``events`` ((seq, type, data) each), by id, in one
    read (from ``selections``: the migration passes its own): what reading an answer needs."""
    resolved = EventType.SELECTION_RESOLVED
    ids = [data.get("selection") for _, type_, data in events if type_ == resolved]
    if not ids:
        return {}
    if len(ids) == 1 and selections is Selection.objects:
        # An answer's own batch (the answer's path): its question, by a lookup compiled once.
        found = _QUESTION.first(str(ids[0]))
        return {found.pk: {name: getattr(found, name) for name in READ}} if found else {}
    found = selections.filter(pk__in=ids).values("id", *READ)
    return {question.pop("id"): question for question in found}


# What reading an answer needs of its question.
READ = ("kind", "options", "schema", "field_order")
_QUESTION = PreparedLookup(lambda pk: Selection.objects.filter(pk=pk).only(*READ))


def answer_words(data: dict, questions: dict[str, dict]) -> str | None:
    """A selection.resolved's answer as people read it (option labels, yes or no, a form's fields
    in their order), from its question; None if the question is gone."""
    question = questions.get(data.get("selection"))
    if question is None:
        return None
    return Selection(**question, answer=data.get("answer")).answer_in_words()


def entry_for(
    *,
    conversation_id: str,
    seq: int,
    type_: str,
    data: dict,
    created_at: datetime,
    questions: dict[str, dict],
) -> SearchEntry | None:
    """The entry an event makes, or None if it says nothing searchable. ``questions``: those
    answered among the events, from ``questions_answered``."""
    words_of_answer = (
        answer_words(data, questions) if type_ == EventType.SELECTION_RESOLVED else None
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
    """What conversations.hooks.index provides: storing a batch's messages."""

    def store(self, *, conversation_id: str, events: list[tuple[int, str, dict]], created_at):
        questions = questions_answered(events)
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
                    questions=questions,
                )
            )
        ]
        if entries:
            SearchEntry.objects.bulk_create(entries)
