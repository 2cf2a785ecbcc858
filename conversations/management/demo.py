"""The demo workspace's first conversations, made by running real turns of the builtin agent in
this process (the seed_demo command): "Getting started" (what to try), one where a question
was asked, answered by Bob, and the agent carried on, and one whose question waits for whoever
signs in (the turn parked on it and let go of, so that the server resumes it when answered).

Seeded once, with the workspace itself: what people did since (a conversation deleted, renamed,
answered) is kept when the command runs again.
"""

import asyncio
import time

from django.conf import settings

from core.dbthreads import run_db
from core.process import server_loop

from .. import hooks, services
from ..models import Conversation, Turn
from ..questions import MAX_TIMEOUT_SECONDS

# How long a seeded turn may take to reach its question or its end.
SEED_TURN_SECONDS = 60

# (title, who starts it, what they type, who answers its question and with what, or None
# for a turn that asks nothing; LIVE for the one left waiting).
LIVE = object()
CONVERSATIONS = [
    ("Getting started", "alice", "help", None),
    ("Summarize the Q3 report", "alice", "summarize", ("bob", "reports/q3-summary.md")),
    ("Where is the budget mentioned?", "bob", "find", LIVE),
]


def demo_conversations_seed(*, workspace, users: dict) -> list[str]:
    """Seed the demo's conversations (see the module) in ``workspace``, just made; the titles
    of those seeded. ``users``: the demo people by username."""
    asyncio.run(_seed(workspace, users))
    return [title for title, *_ in CONVERSATIONS]


# What the seeding changes of the settings, for its own turns only (restored after).
SEEDING = ("PARLEY_BUILTIN_PACE_MS", "PARLEY_SELECTION_TIMEOUT_SECONDS")
SEEDING_LIVE = ("PARLEY_RELEASE_PARKED_AFTER_SECONDS",)


async def _seed(workspace, users: dict) -> None:
    kept = {name: getattr(settings, name) for name in SEEDING + SEEDING_LIVE}
    # Seeded quickly (no reading pace).
    settings.PARLEY_BUILTIN_PACE_MS = 0
    server_loop.bind()
    try:
        for title, starter, text, answer in CONVERSATIONS:
            conversation = await run_db(_conversation, workspace, users[starter], title)
            if answer is LIVE:
                # The waiting question waits as long as any may.
                settings.PARLEY_SELECTION_TIMEOUT_SECONDS = MAX_TIMEOUT_SECONDS
                # Parked, it lets go at once: the server resumes it when someone answers.
                settings.PARLEY_RELEASE_PARKED_AFTER_SECONDS = 0
            turn, _ = await run_db(
                services.turn_start, conversation=conversation, user=users[starter], input=text
            )
            if answer is None:
                await _until(turn.pk, lambda t: t.status in Turn.ENDED_STATUSES)
            elif answer is LIVE:
                await _until(
                    turn.pk, lambda t: t.status == Turn.Status.AWAITING_INPUT and not t.runner
                )
            else:
                await _until(turn.pk, lambda t: t.status == Turn.Status.AWAITING_INPUT)
                who, value = answer
                await run_db(_answer, conversation.pk, users[who], value)
                await _until(turn.pk, lambda t: t.status in Turn.ENDED_STATUSES)
    finally:
        # This process served no one: it stops its turns without a server's farewell.
        await server_loop.shut_down(serving=False)
        for name, value in kept.items():
            setattr(settings, name, value)


def _conversation(workspace, user, title: str) -> Conversation:
    found = Conversation.objects.filter(workspace=workspace, title=title).first()
    return found or services.conversation_create(workspace=workspace, user=user, title=title)


def _answer(conversation_id: str, user, value) -> None:
    """Answer the conversation's question as ``user`` would from the page."""
    questions = hooks.questions.get()
    (pending,) = questions.pending_payloads(conversation_ids=[conversation_id])[conversation_id]
    questions.reply(
        user=user,
        conversation_id=conversation_id,
        selection_id=pending["id"],
        answer=value,
        action=None,
    )


async def _until(turn_id: str, reached) -> Turn:
    deadline = time.monotonic() + SEED_TURN_SECONDS
    while True:
        turn = await run_db(Turn.objects.get, pk=turn_id)
        if reached(turn):
            return turn
        if time.monotonic() > deadline:
            raise RuntimeError(f"The demo's turn {turn_id} is stuck ({turn.status}).")
        await asyncio.sleep(0.05)
