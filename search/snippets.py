"""A result's snippet: a short part of what was said around the first match, with where the
matching words are (offsets into the snippet) and as HTML with only ``<mark>`` added to text
that is escaped first."""

import re

from django.utils.html import escape

from .query import Term
from .text import word_spans

SNIPPET_CHARS = 240
# How much comes before the first match, at most.
LEAD_CHARS = 60
_SPACE = re.compile(r"\s")


def matches(text: str, terms: list[Term]) -> list[tuple[int, int]]:
    """Where the terms match in ``text`` (normalized, as stored): (start, end) character
    offsets, in order, not overlapping; a phrase is one span."""
    spans = list(word_spans(text))
    words = [word for word, _, _ in spans]
    found = []
    for at in range(len(spans)):
        for term in terms:
            if term.matches(words, at):
                found.append((spans[at][1], spans[at + len(term.words) - 1][2]))
    found.sort()
    merged = []
    for start, end in found:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def snippet(text: str, terms: list[Term]) -> dict:
    """``{"text", "highlights": [[start, end], ...], "html"}``: up to SNIPPET_CHARS of the text
    from a little before its first match (an ellipsis where it was cut; line breaks as spaces),
    the matches' offsets in that text, and the same as HTML (escaped, matches in ``<mark>``)."""
    found = matches(text, terms)
    start = 0
    if found and found[0][0] > LEAD_CHARS:
        start = found[0][0] - LEAD_CHARS
        # From the start of a word.
        while start < found[0][0] and not text[start - 1].isspace():
            start += 1
    end = min(len(text), start + SNIPPET_CHARS)
    if found and found[0][1] > end:
        end = found[0][1]
    before = "…" if start > 0 else ""
    after = "…" if end < len(text) else ""
    shown = before + _SPACE.sub(" ", text[start:end]) + after
    shift = len(before) - start
    highlights = [
        [max(s, start) + shift, min(e, end) + shift] for s, e in found if s < end and e > start
    ]
    html, at = [], 0
    for s, e in highlights:
        html += [escape(shown[at:s]), "<mark>", escape(shown[s:e]), "</mark>"]
        at = e
    html.append(escape(shown[at:]))
    return {"text": shown, "highlights": highlights, "html": "".join(html)}
