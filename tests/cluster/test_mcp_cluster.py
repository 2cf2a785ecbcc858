"""An outside agent's MCP session on one Parley process, the team on another: the answer crosses
over Redis."""

import asyncio

import pytest

from tests.helpers import CHOICE, of_type, pending_question, reply_to, turn_events
from tests.mcp_client import mcp_session

pytestmark = pytest.mark.cluster


async def test_an_answer_given_on_b_reaches_the_outside_agent_on_a(nodes, people):
    a, b = nodes
    async with (
        mcp_session(a.url, people.bob.token) as mcp,
        b.async_client(people.alice) as rest,
    ):
        asking = asyncio.create_task(mcp.call_tool("ask", CHOICE))
        question = await pending_question(rest)
        await reply_to(rest, question, answer="sqlite")
        result = await asyncio.wait_for(asking, 30)
        assert result.structuredContent["answer"] == "sqlite"
        # Steering and Stop sent to B reach the session's turn on A too.
        steered = await rest.post(
            f"/api/conversations/{question['conversation']}/steer/",
            json={"expected_turn_id": question["turn"], "input": "Use the small one"},
        )
        assert steered.status_code == 202, steered.text
        asking = asyncio.create_task(mcp.call_tool("ask", {"kind": "text", "prompt": "Size?"}))
        second = await pending_question(rest)
        stopped = await rest.post(
            f"/api/conversations/{question['conversation']}/cancel/",
            json={"turn_id": question["turn"]},
        )
        assert stopped.status_code == 202
        result = await asyncio.wait_for(asking, 30)
        assert result.structuredContent["stopped"] is True
        events = await turn_events(rest, question["conversation"])
    assert second["id"] != question["id"]
    assert events[-1]["type"] == "turn.cancelled"
    assert [e["data"]["input"] for e in of_type(events, "turn.steered")] == ["Use the small one"]
