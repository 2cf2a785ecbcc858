"""What people wrote, quoted in the builtin agent's Markdown so that it shows exactly as written:
one line in quotation marks (or, holding Markdown's marks, as a code span), several lines as a
code block whose fence is longer than any run of backticks inside it (CommonMark: a fence closes
only on a run at least as long as the one that opened it)."""

import re

# Marks that may format text within a line of Markdown (code, emphasis, links, escapes,
# entities; raw HTML is shown as text anyway): text holding any of them is quoted as code.
MARKDOWN_MARKS = re.compile(r"[`*_~\[\]\\]|&#?\w+;")


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def fenced(text: str, language: str = "") -> str:
    """``text`` as a code block of its own, exactly as written (lines, backticks and fences),
    highlighted as ``language`` if given."""
    fence = "`" * max(3, _longest_backtick_run(text) + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def inline(text: str) -> str:
    """One line of ``text``, exactly as written: “in quotation marks”, or a code span when it
    holds Markdown's marks (its backticks longer than any run inside)."""
    if not MARKDOWN_MARKS.search(text):
        return f"“{text}”"
    ticks = "`" * (_longest_backtick_run(text) + 1)
    # CommonMark strips one space from each end of a span: pad only where a backtick at an end
    # would join the fence, or where the text's own spaces at both ends would be stripped.
    pad = " " if text[:1] == "`" or text[-1:] == "`" or (text[:1] == text[-1:] == " ") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def quoted(text: str, sentence: str, block_lead: str) -> str:
    """``text`` quoted where ``{}`` is in ``sentence`` if it is one line; else ``block_lead``
    with ``text`` as a code block below it."""
    if "\n" in text:
        return f"{block_lead}\n\n{fenced(text)}\n"
    return sentence.format(inline(text))
