"""News for people wherever they are in Parley, not only on a conversation's page.

Each person's own socket (``/ws/me/``, see selection.consumers) hears, on every process, of what
may change what waits for them: a question asked, settled, reminded or escalated, and a turn
ended. Notices go to a channel-layer group per workspace, once the transaction that stored
what they announce commits. Like every layer message they are at most once: a socket that
misses one is only late until its next notice, and reads everything from the database.
"""

import asyncio
import logging
from functools import partial

from channels.layers import get_channel_layer
from django.db import transaction

from core.metrics import LAYER_ERRORS
from core.process import server_loop

logger = logging.getLogger(__name__)

# Sends in flight, so that the loop keeps a reference to each until it is done.
_sending: set[asyncio.Task] = set()


def people_group_name(workspace_id: int) -> str:
    return f"parley.people.{workspace_id}"


def people_notify(*, workspace_id: int, notice: dict) -> None:
    """Tell the sockets of every person in the workspace, once the caller's transaction
    commits (at once outside one). ``notice`` holds ``kind`` and the ids it concerns."""
    transaction.on_commit(partial(server_loop.call_soon, _send, workspace_id, notice))


def _send(workspace_id: int, notice: dict) -> None:
    task = asyncio.get_running_loop().create_task(_group_send(workspace_id, notice))
    _sending.add(task)
    task.add_done_callback(_sending.discard)


async def _group_send(workspace_id: int, notice: dict) -> None:
    try:
        await get_channel_layer().group_send(
            people_group_name(workspace_id), {"type": "people.notice", "notice": notice}
        )
    except Exception as exc:
        LAYER_ERRORS.labels("send").inc()
        logger.warning("Could not tell workspace %s's people (%r)", workspace_id, exc)
