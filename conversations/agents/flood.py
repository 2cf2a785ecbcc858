"""A load-generating agent for benchmarks and stress tests.

Input: ``<count> [events|text|markdown] [every <ms>]``. ``events`` (the default) reports
``count`` events as ``count // 2`` tool calls (a started and a completed event each); ``text``
streams ``count`` numbered words ("w1 w2 …"), which coalesce into deltas; ``markdown`` streams a
Markdown answer of ``count`` characters (headings, paragraphs, lists, code blocks) in pieces of
20, as a model's tokens come. With ``every <ms>`` it pauses between steps; without, it goes as
fast as the event log lets it. Enable it with
``PARLEY_AGENTS='{"flood": "conversations.agents.flood.FloodAgent"}'``.
"""

import asyncio

from . import Agent

MARKDOWN_PIECE = 20


def markdown_answer(length: int) -> str:
    """A Markdown answer of ``length`` characters, section after section."""
    sections = []
    number = 0
    while sum(map(len, sections)) < length:
        number += 1
        sections.append(
            f"## Step {number}\n\n"
            f"Open **section {number}** and check the `value_{number}` it holds: the numbers "
            "should add up, and nothing in it should point outside the workspace. If one does, "
            "note it below and go on.\n\n"
            f"- read the notes of step {number}\n- compare them with the plan\n"
            "- keep what still holds\n\n"
            f"```python\ndef step_{number}(plan):\n    return plan.check({number})\n```\n\n"
        )
    return "".join(sections)[:length]


def parse_flood(text: str) -> tuple[int, str, float]:
    words = text.split()
    count = int(words[0]) if words and words[0].isdigit() else 1000
    mode = next((word for word in ("text", "markdown") if word in words), "events")
    pause = 0.0
    if "every" in words:
        index = words.index("every")
        if index + 1 < len(words):
            pause = float(words[index + 1]) / 1000
    return count, mode, pause


class FloodAgent(Agent):
    resumable = True

    async def run(self, ctx) -> None:
        count, mode, pause = parse_flood(ctx.input)
        if mode == "markdown":
            answer = markdown_answer(count)
            for start in range(0, len(answer), MARKDOWN_PIECE):
                await ctx.say(answer[start : start + MARKDOWN_PIECE])
                if pause and not ctx.replaying:
                    await asyncio.sleep(pause)
            return
        if mode == "text":
            for number in range(1, count + 1):
                await ctx.say(f"w{number} ")
                if pause and not ctx.replaying:
                    await asyncio.sleep(pause)
            return
        for number in range(count // 2):
            async with ctx.tool("tick", {"n": number}) as call:
                call.result = number
            if pause and not ctx.replaying:
                await asyncio.sleep(pause)
