"""A search query: what people type, read once into terms, and written for each database.

The syntax: words are ANDed (``deploy friday``: both, anywhere in the same event); a
``"quoted phrase"`` matches those words one after the other; a word ending in ``*`` is a prefix
(``depl*``: deploy, deployment…). Case and accents never matter. Anything else between words
(punctuation, operators) only separates them: ``q4-plan.md`` is the phrase ``q4 plan md``.
"""

import re
from dataclasses import dataclass

from core.errors import ApplicationError

from .text import WORD, folded_word, normalized

MAX_QUERY_CHARS = 200
MAX_TERMS = 12
MIN_PREFIX_CHARS = 2

_PART = re.compile(r'"([^"]*)"?(\*?)|([^\s"]+)')


@dataclass(frozen=True)
class Term:
    """Words that must appear one after the other (one word: anywhere); the last one may be a
    prefix."""

    words: tuple[str, ...]
    prefix: bool = False

    def matches(self, words: list[str], at: int) -> bool:
        """Whether the term matches the folded ``words`` starting at index ``at``."""
        if at + len(self.words) > len(words):
            return False
        last = len(self.words) - 1
        for offset, word in enumerate(self.words):
            found = words[at + offset]
            if offset == last and self.prefix:
                if not found.startswith(word):
                    return False
            elif found != word:
                return False
        return True


def invalid(message: str) -> ApplicationError:
    return ApplicationError("invalid_query", message, status=400)


def _folded_words(text: str) -> list[str]:
    # As search.text indexes them.
    return [w for w in map(folded_word, WORD.findall(normalized(text))) if w]


def parse(query: str) -> list[Term]:
    """The terms of a query. Raises ApplicationError ``invalid_query`` (400) for one that finds
    nothing by construction: empty, too long, too many terms, a one-letter prefix."""
    query = (query or "").strip()
    if not query:
        raise invalid("Type what to search for.")
    if len(query) > MAX_QUERY_CHARS:
        raise invalid(f"A search is at most {MAX_QUERY_CHARS} characters.")
    terms = []
    for match in _PART.finditer(query):
        quoted, quoted_star, bare = match.groups()
        text = quoted if quoted is not None else bare
        prefix = bool(quoted_star) or (bare is not None and bare.endswith("*"))
        if quoted is not None and text.rstrip().endswith("*"):
            prefix = True
        words = _folded_words(text)
        if not words:
            continue
        if prefix and len(words[-1]) < MIN_PREFIX_CHARS:
            raise invalid(f"A prefix needs at least {MIN_PREFIX_CHARS} letters: “{words[-1]}*”.")
        term = Term(tuple(words), prefix)
        if term not in terms:
            terms.append(term)
    if not terms:
        raise invalid("Type at least one word (letters or digits) to search for.")
    if len(terms) > MAX_TERMS:
        raise invalid(f"A search has at most {MAX_TERMS} words or phrases.")
    return terms


def postgresql_tsquery(terms: list[Term]) -> str:
    """The query as a tsquery's text, cast as it is (its words are folded already; each is only
    letters and digits, so quoting it is safe)."""

    def one(term: Term) -> str:
        parts = [f"'{word}'" for word in term.words]
        if term.prefix:
            parts[-1] += ":*"
        return "(" + " <-> ".join(parts) + ")"

    return " & ".join(one(term) for term in terms)


def sqlite_match(terms: list[Term]) -> str:
    """The query as an FTS5 MATCH expression: each term a quoted string (so no word is read as
    an operator), ``*`` after it for a prefix."""
    return " AND ".join(
        '"' + " ".join(term.words) + '"' + ("*" if term.prefix else "") for term in terms
    )
