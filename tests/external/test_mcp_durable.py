"""A question an outside agent asked through MCP survives a Parley restart: its answer is still
delivered to the task, from a new session on the new process."""

import asyncio
import signal

import httpx
from mcp import types

from tests.helpers import of_type, pending_question, reply_to, turn_events
from tests.mcp_client import (
    ACCEPT,
    INITIALIZE,
    mcp_session,
    open_raw_session,
    rpc_result,
    tool_call,
)


async def test_a_task_is_answered_after_its_server_restarted(make_server, people):
    first = make_server()
    headers = {"Accept": ACCEPT, "Authorization": f"Bearer {people.bob.token}"}
    async with httpx.AsyncClient(base_url=first.url, headers=headers, timeout=30) as http:
        session = await open_raw_session(http)
        asked = {"kind": "confirm", "prompt": "Deploy on Friday?"}
        call = tool_call(2, "ask", asked, task={"ttl": 600_000})
        task = rpc_result(await http.post("/mcp/", json=call, headers=session))["task"]
    assert task["status"] == "working"
    async with first.async_client(people.alice) as rest:
        question = await pending_question(rest)
    # A deploy: SIGTERM, and a new process on the same database.
    await asyncio.to_thread(first.stop)
    second = make_server()
    async with second.async_client(people.alice) as rest:
        await reply_to(rest, question, answer=True)
        events = await turn_events(rest, question["conversation"], timeout=60)
        async with mcp_session(second.url, people.bob.token) as mcp:
            found = await mcp.experimental.get_task(task["taskId"])
            assert found.status == "completed"
            result = await mcp.experimental.get_task_result(task["taskId"], types.CallToolResult)
    assert result.structuredContent["status"] == "answered"
    assert result.structuredContent["answer"] is True
    assert result.structuredContent["answered_by"] == "alice"
    # The turn went on where the team answered, and ended: its session had gone.
    assert of_type(events, "turn.resumed")
    assert of_type(events, "turn.notice")[-1]["data"]["kind"] == "session_ended"
    assert events[-1]["type"] == "turn.completed"


async def test_a_task_whose_session_had_ended_is_answered_after_a_restart(make_server, people):
    first = make_server()
    async with mcp_session(first.url, people.bob.token) as mcp:
        asked = {"kind": "confirm", "prompt": "Migrate tonight?"}
        created = await mcp.experimental.call_tool_as_task("ask", asked, ttl=600_000)
    # The session ended (its DELETE): the turn is held open for its task alone, and then
    # its process restarts.
    async with first.async_client(people.alice) as rest:
        question = await pending_question(rest)
    await asyncio.to_thread(first.stop)
    second = make_server()
    async with second.async_client(people.alice) as rest:
        await reply_to(rest, question, answer=False)
        events = await turn_events(rest, question["conversation"], timeout=60)
    async with mcp_session(second.url, people.bob.token) as mcp:
        async with asyncio.timeout(30):
            while True:
                found = await mcp.experimental.get_task(created.task.taskId)
                if found.status != "working":
                    break
                await asyncio.sleep(0.05)
        assert found.status == "completed"
        result = await mcp.experimental.get_task_result(created.task.taskId, types.CallToolResult)
    assert result.structuredContent["answer"] is False
    assert of_type(events, "turn.resumed")
    assert events[-1]["type"] == "turn.completed"


async def test_a_stopping_process_ends_its_sessions_and_sends_new_ones_elsewhere(
    make_server, people
):
    """At SIGTERM the process ends its MCP sessions as a DELETE would: the open stream for the
    server's messages finishes (it is not cut off when the process stops), and the session's
    next request is answered 404, the protocol's "open a new session". A new session is
    refused with 503 ``shutting_down`` before anything is done, for the balancer to send it to
    another process."""
    live = make_server(PARLEY_SHUTDOWN_GRACE_SECONDS="30")
    headers = {"Accept": ACCEPT, "Authorization": f"Bearer {people.bob.token}"}
    async with httpx.AsyncClient(base_url=live.url, headers=headers, timeout=30) as http:
        session = await open_raw_session(http)
        get_headers = {**session, "Accept": "text/event-stream"}
        async with http.stream("GET", "/mcp/", headers=get_headers) as stream:
            assert stream.status_code == 200
            live.process.send_signal(signal.SIGTERM)
            # Finishes while the process still serves (its grace is 30 s); raises if cut off.
            async with asyncio.timeout(20):
                async for _ in stream.aiter_bytes():
                    pass
        assert live.process.poll() is None
        listed = await http.post(
            "/mcp/", json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=session
        )
        assert listed.status_code == 404
        opened = await http.post("/mcp/", json=INITIALIZE)
        assert opened.status_code == 503
        assert opened.json()["error"]["code"] == "shutting_down"
        assert opened.headers["retry-after"] == "1"
    live.process.send_signal(signal.SIGTERM)  # a second SIGTERM stops it at once
    assert live.process.wait(timeout=20) == 0
