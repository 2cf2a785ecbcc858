"""What of an event is searched, and the one way text becomes words: the same Python rules for
both databases (each then indexes the words as they are), so both find the same events."""

import re
import unicodedata

from conversations.events import MESSAGE_EVENT_TYPES, EventType

# The event types whose words are searched: the messages, as people count what is new (never the
# message.delta pieces: their message's message.completed holds the whole text).
SEARCHED_TYPES = MESSAGE_EVENT_TYPES

# A word: letters and digits (any script), nothing else; everything between words separates them.
WORD = re.compile(r"[^\W_]+")
# Longer words are not indexed (PostgreSQL refuses lexemes over 2 KB); PostgreSQL keeps positions
# up to 16,383, so a phrase matches within a message's first MAX_WORDS words on both databases.
MAX_WORD_CHARS = 100
MAX_WORDS = 16_000


def fold(word: str) -> str:
    """A word as indexed and looked for: accents dropped, case folded (``Café`` → ``cafe``)."""
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def folded_word(word: str) -> str:
    """A word as indexed: folded, and kept whole if folding split it ("" if nothing is left)."""
    return "".join(WORD.findall(fold(word)))


def normalized(text: str) -> str:
    """The text an entry keeps (NFC, so that an accent is part of its letter, not a separator)."""
    return unicodedata.normalize("NFC", text)


def word_spans(text: str):
    """Each indexed word of a normalized text: (folded word, start, end), in order."""
    count = 0
    for match in WORD.finditer(text):
        word = match.group()
        if len(word) > MAX_WORD_CHARS:
            continue
        folded = folded_word(word)
        if not folded:
            continue
        yield folded, match.start(), match.end()
        count += 1
        if count >= MAX_WORDS:
            return


def words_of(text: str) -> str:
    """The words of a normalized text, folded, separated by single spaces: what both databases
    index (PostgreSQL's 'simple' configuration and SQLite's unicode61 tokenizer split it at the
    spaces alone, and change nothing more)."""
    return " ".join(word for word, _, _ in word_spans(text))


def _name(who) -> str:
    return (who or {}).get("name") or (who or {}).get("username") or ""


def entry_text(type_: str, data: dict, answer_words=None) -> tuple[str, str]:
    """What an event of a searched type says, and who said it (a person's name; "" for the
    agent). ``answer_words``: a selection.resolved's answer as people read it, if known."""
    if type_ == EventType.TURN_STARTED:
        return data.get("input") or "", _name(data.get("started_by"))
    if type_ == EventType.TURN_STEERED:
        return data.get("input") or "", _name(data.get("by"))
    if type_ == EventType.MESSAGE_COMPLETED:
        return data.get("text") or "", ""
    if type_ == EventType.SELECTION_REQUESTED:
        parts = [data.get("prompt") or ""]
        for option in data.get("options") or ():
            parts += [option.get("label") or "", option.get("description") or ""]
        return "\n".join(part for part in parts if part), ""
    if type_ == EventType.SELECTION_RESOLVED:
        answer = data.get("answer")
        if answer_words is None:
            answer_words = _plain_answer(answer)
        return answer_words, _name(data.get("answered_by"))
    return "", ""


def _plain_answer(answer) -> str:
    if answer is None:
        return ""
    if isinstance(answer, bool):
        return "yes" if answer else "no"
    if isinstance(answer, list):
        return ", ".join(_plain_answer(value) for value in answer)
    if isinstance(answer, dict):
        return "; ".join(f"{key}: {_plain_answer(value)}" for key, value in sorted(answer.items()))
    return str(answer)
