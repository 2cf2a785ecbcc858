"""An outside agent's MCP session on one Parley process, the team on another: the answer crosses
over Redis."""

import asyncio

import pytest
from mcp import types

from tests.helpers import (
    CEILING,
    CHOICE,
    MEMBERSHIPS,
    admin_of,
    membership_of,
    of_type,
    pending_question,
    post_form,
    reply_to,
    turn_events,
)
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


async def test_a_member_removed_on_b_loses_their_mcp_session_on_a(nodes, people):
    a, b = nodes
    admin = await asyncio.to_thread(admin_of, b, people)
    try:
        async with (
            mcp_session(a.url, people.bob.token) as mcp,
            b.async_client(people.alice) as rest,
        ):
            asking = asyncio.create_task(mcp.call_tool("ask", CHOICE))
            question = await pending_question(rest)
            membership = await membership_of(people.bob, people.workspace)
            done = await asyncio.to_thread(
                post_form, admin, f"{MEMBERSHIPS}{membership}/delete/", {"post": "yes"}
            )
            assert done.status_code == 302, done.text
            result = await asyncio.wait_for(asking, CEILING)
            assert result.isError and "no longer have access" in result.content[0].text
            refused = await mcp.call_tool("post", {"text": "Still here"})
            assert refused.isError and "no longer have access" in refused.content[0].text
            events = await turn_events(rest, question["conversation"])
    finally:
        admin.close()
    assert of_type(events, "message.completed") == []
    assert of_type(events, "selection.resolved")[0]["data"]["status"] == "cancelled"


async def test_a_task_asked_on_a_is_collected_on_b_after_its_session_ended(nodes, people):
    a, b = nodes
    async with mcp_session(a.url, people.bob.token) as mcp:
        created = await mcp.experimental.call_tool_as_task("ask", CHOICE, ttl=600_000)
    # The session on A has ended (DELETE); its task lives on, and its question stays open.
    task_id = created.task.taskId
    async with b.async_client(people.alice) as rest:
        question = await pending_question(rest)
        await reply_to(rest, question, answer="pg")
        events = await turn_events(rest, question["conversation"])
    async with mcp_session(b.url, people.bob.token) as later:
        # tasks/result waits for the result, as the protocol says.
        result = await asyncio.wait_for(
            later.experimental.get_task_result(task_id, types.CallToolResult), CEILING
        )
        found = await later.experimental.get_task(task_id)
    assert found.status == "completed"
    assert result.structuredContent["answer"] == "pg"
    assert result.structuredContent["answered_by"] == "alice"
    # The turn, held open on A for its task, ended once the task was answered.
    assert events[-1]["type"] == "turn.completed"
    resolved = of_type(events, "selection.resolved")
    assert [e["data"]["answered_by"]["username"] for e in resolved] == ["alice"]
