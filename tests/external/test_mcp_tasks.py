"""Questions an outside agent asks as MCP tasks outlive the session that asked them: the session's
end (DELETE) cuts short only the calls waiting without a task; the turn goes on while its tasks
work (the team answers, or stops it), and ends with the last; the answer is collected from a later
session. A real Daphne, the official mcp client and raw HTTP where the client can't."""

import asyncio
import contextlib

import httpx
import pytest
from asgiref.sync import sync_to_async
from mcp import types
from mcp.shared.exceptions import McpError

from conversations.models import Turn
from external.models import ExternalTask
from selection.models import Selection
from selection.services import selection_cancel
from tests.helpers import CHOICE, of_type, pending_question, reply_to, turn_events
from tests.mcp_client import (
    ACCEPT,
    INITIALIZE,
    mcp_session,
    open_raw_session,
    rpc_result,
    tool_call,
)


async def _settled(mcp, task_id: str, status: str) -> types.GetTaskResult:
    async with asyncio.timeout(30):
        while (found := await mcp.experimental.get_task(task_id)).status != status:
            assert found.status == "working", found
            await asyncio.sleep(0.05)
    return found


async def _until(condition, timeout: float = 30):
    """What the coroutine function ``condition`` returns, once it is true."""
    async with asyncio.timeout(timeout):
        while True:
            if found := await condition():
                return found
            await asyncio.sleep(0.05)


async def _pending_at_least(rest, count: int) -> list | None:
    found = (await rest.get("/api/selections/?status=pending")).json()
    return found if len(found) >= count else None


async def _settled_question(selection_id: str) -> bool:
    return (await Selection.objects.aget(pk=selection_id)).status != "pending"


async def _turn_status(turn_id: str) -> str:
    return (await Turn.objects.aget(pk=turn_id)).status


async def test_a_task_outlives_its_session_ended_at_once(server, people):
    async with mcp_session(server.url, people.bob.token) as mcp:
        created = await mcp.experimental.call_tool_as_task("ask", CHOICE, ttl=600_000)
    # The session was DELETEd the moment the task came back.
    task_id = created.task.taskId
    async with server.async_client(people.alice) as rest:
        question = await pending_question(rest)
        assert question["prompt"] == "Which database?"
        # The turn waits for its task: still running, the question open to the team.
        assert await _turn_status(question["turn"]) in Turn.ACTIVE_STATUSES
        await reply_to(rest, question, answer="pg")
        events = await turn_events(rest, question["conversation"])
    async with mcp_session(server.url, people.bob.token) as later:
        found = await _settled(later, task_id, "completed")
        assert found.statusMessage is None
        result = await later.experimental.get_task_result(task_id, types.CallToolResult)
    assert result.structuredContent["status"] == "answered"
    assert result.structuredContent["answer"] == "pg"
    assert result.structuredContent["answered_by"] == "alice"
    notice = of_type(events, "turn.notice")[-1]["data"]
    assert notice["kind"] == "session_ended" and "asked as tasks stay open" in notice["text"]
    # The notice came when the session ended, before the answer; the turn ended after it.
    resolved = of_type(events, "selection.resolved")[0]
    assert of_type(events, "turn.notice")[-1]["seq"] < resolved["seq"]
    assert events[-1]["type"] == "turn.completed"


async def test_a_session_ended_later_cuts_its_plain_call_and_keeps_its_task(server, people):
    headers = {"Accept": ACCEPT, "Authorization": f"Bearer {people.bob.token}"}
    async with (
        httpx.AsyncClient(base_url=server.url, headers=headers, timeout=30) as http,
        server.async_client(people.alice) as rest,
    ):
        session = await open_raw_session(http)
        as_task = tool_call(2, "ask", CHOICE, task={"ttl": 600_000})
        created = rpc_result(await http.post("/mcp/", json=as_task, headers=session))["task"]
        plain = tool_call(3, "ask", {"kind": "text", "prompt": "Plain?"})
        waiting = asyncio.create_task(http.post("/mcp/", json=plain, headers=session))
        found = await _until(lambda: _pending_at_least(rest, 2))
        plain = next(q for q in found if q["prompt"] == "Plain?")
        asked = next(q for q in found if q["prompt"] == "Which database?")
        assert (await http.delete("/mcp/", headers=session)).status_code == 200
        with contextlib.suppress(httpx.HTTPError):
            await asyncio.wait_for(waiting, 30)
        # The call waiting without a task was cut short with its session: its question is
        # cancelled; the task's stays open, and the turn with it.
        await _until(lambda: _settled_question(plain["id"]))
        assert (await Selection.objects.aget(pk=plain["id"])).status == "cancelled"
        assert (await Selection.objects.aget(pk=asked["id"])).status == "pending"
        assert await _turn_status(asked["turn"]) in Turn.ACTIVE_STATUSES
        refused = await rest.post(f"/api/selections/{plain['id']}/reply/", json={"answer": "x"})
        assert refused.status_code == 409
        await reply_to(rest, asked, answer="sqlite")
        events = await turn_events(rest, asked["conversation"])
    assert events[-1]["type"] == "turn.completed"
    # The plain question was settled before its tool call ended.
    plain_resolved = next(
        e for e in of_type(events, "selection.resolved") if e["data"]["selection"] == plain["id"]
    )
    ask_ends = [e for e in of_type(events, "tool.completed") if e["data"]["name"] == "ask"]
    cancelled_end = next(
        e for e in ask_ends if e["data"].get("result", {}).get("status") == "cancelled"
    )
    assert plain_resolved["seq"] < cancelled_end["seq"]
    async with mcp_session(server.url, people.bob.token) as later:
        await _settled(later, created["taskId"], "completed")
        result = await later.experimental.get_task_result(created["taskId"], types.CallToolResult)
    assert result.structuredContent["answer"] == "sqlite"


async def test_stop_cancels_the_tasks_of_a_turn_whose_session_ended(server, people):
    async with mcp_session(server.url, people.bob.token) as mcp:
        created = await mcp.experimental.call_tool_as_task("ask", CHOICE, ttl=600_000)
    async with server.async_client(people.alice) as rest:
        question = await pending_question(rest)
        stopped = await rest.post(
            f"/api/conversations/{question['conversation']}/cancel/",
            json={"turn_id": question["turn"]},
        )
        assert stopped.status_code == 202, stopped.text
        events = await turn_events(rest, question["conversation"])
    assert events[-1]["type"] == "turn.cancelled"
    async with mcp_session(server.url, people.bob.token) as later:
        found = await _settled(later, created.task.taskId, "cancelled")
        assert "alice pressed Stop" in found.statusMessage
        result = await later.experimental.get_task_result(created.task.taskId, types.CallToolResult)
    assert result.structuredContent["status"] == "cancelled"
    assert "alice pressed Stop" in result.content[0].text
    assert (await Selection.objects.aget(pk=question["id"])).status == "cancelled"


async def test_a_question_cancelled_in_parley_cancels_its_task(server, people):
    async with mcp_session(server.url, people.bob.token) as mcp:
        created = await mcp.experimental.call_tool_as_task("ask", CHOICE, ttl=600_000)
        async with server.async_client(people.alice) as rest:
            question = await pending_question(rest)
        stored = await Selection.objects.aget(pk=question["id"])
        assert await sync_to_async(selection_cancel)(selection=stored)
        found = await _settled(mcp, created.task.taskId, "cancelled")
        assert found.statusMessage == "The question was cancelled in Parley."
        result = await mcp.experimental.get_task_result(created.task.taskId, types.CallToolResult)
    assert result.structuredContent["status"] == "cancelled"


async def test_a_task_expires_at_its_ttl_and_the_turn_ends_with_it(server, people):
    async with mcp_session(server.url, people.bob.token) as mcp:
        created = await mcp.experimental.call_tool_as_task("ask", CHOICE, ttl=1500)
        assert created.task.ttl == 1500
    async with server.async_client(people.alice) as rest:
        question = await pending_question(rest)
        events = await turn_events(rest, question["conversation"])
    assert events[-1]["type"] == "turn.completed"
    assert (await Selection.objects.aget(pk=question["id"])).status == "cancelled"
    async with mcp_session(server.url, people.bob.token) as later:
        with pytest.raises(McpError, match="No task"):
            await later.experimental.get_task(created.task.taskId)


async def test_a_task_asked_as_its_session_is_deleted_is_asked_or_never_was(server, people):
    """The DELETE racing the task's call: each task stored has its question, open to the team,
    whose answer it gets; none says completed for a question never asked."""
    headers = {"Accept": ACCEPT, "Authorization": f"Bearer {people.bob.token}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=30) as http:
        for attempt in range(6):
            session = await open_raw_session(http)
            asked = {"kind": "confirm", "prompt": f"Go {attempt}?"}
            call = tool_call(2, "ask", asked, task={"ttl": 600_000})
            asking = asyncio.create_task(http.post("/mcp/", json=call, headers=session))
            await asyncio.sleep(attempt * 0.01)
            await http.delete("/mcp/", headers=session)
            with contextlib.suppress(httpx.HTTPError):
                await asking
    async with server.async_client(people.alice) as rest:
        async with asyncio.timeout(30):
            while await Turn.objects.filter(status__in=Turn.ACTIVE_STATUSES).aexists():
                for question in (await rest.get("/api/selections/?status=pending")).json():
                    await reply_to(rest, question, answer=True)
                await asyncio.sleep(0.1)
    async with mcp_session(server.url, people.bob.token) as later:
        for task in [t async for t in ExternalTask.objects.all()]:
            found = await _settled(later, task.pk, "completed")
            result = await later.experimental.get_task_result(found.taskId, types.CallToolResult)
            assert result.structuredContent["answer"] is True, result


async def test_a_cancelled_call_gets_no_response_and_its_question_settles_first(server, people):
    headers = {"Accept": ACCEPT, "Authorization": f"Bearer {people.bob.token}"}
    async with (
        httpx.AsyncClient(base_url=server.url, headers=headers, timeout=30) as http,
        server.async_client(people.alice) as rest,
    ):
        session = await open_raw_session(http)
        call = tool_call(7, "ask", {"kind": "text", "prompt": "Cancel me?"})
        asking = asyncio.create_task(http.post("/mcp/", json=call, headers=session))
        question = await pending_question(rest)
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 7, "reason": "changed my mind"},
        }
        assert (await http.post("/mcp/", json=cancel, headers=session)).status_code == 202
        answered = await asyncio.wait_for(asking, 30)
        # The request's stream ended with no answer to it.
        assert answered.status_code == 200
        assert '"id":7' not in answered.text.replace(" ", ""), answered.text
        # The session goes on.
        post = tool_call(8, "post", {"text": "Moving on"})
        assert rpc_result(await http.post("/mcp/", json=post, headers=session))["structuredContent"]
        await http.delete("/mcp/", headers=session)
        events = await turn_events(rest, question["conversation"])
    resolved = of_type(events, "selection.resolved")[0]
    assert resolved["data"]["status"] == "cancelled"
    (ask_end,) = [e for e in of_type(events, "tool.completed") if e["data"]["name"] == "ask"]
    assert resolved["seq"] < ask_end["seq"]
    assert ask_end["data"]["result"]["status"] == "cancelled"


async def test_many_sessions_opened_at_once_each_first_posting(make_server, people):
    server = make_server(
        PARLEY_MAX_MCP_SESSIONS_PER_PERSON="100",
        PARLEY_TURN_RATE="1000/min",
        PARLEY_CONVERSATION_RATE="1000/min",
    )

    async def one(n: int):
        async with mcp_session(server.url, people.bob.token, name=f"agent-{n}") as mcp:
            return await mcp.call_tool("post", {"text": f"Hello {n}"})

    results = await asyncio.wait_for(asyncio.gather(*(one(n) for n in range(24))), 120)
    assert [r.structuredContent for r in results] == [{"status": "posted"}] * 24
    assert "resumed without its session" not in server.log_text()
    async with server.async_client(people.bob) as rest:
        turns = [t async for t in Turn.objects.select_related("conversation")]
        assert len(turns) == 24
        for turn in turns:
            events = await turn_events(rest, turn.conversation_id)
            assert of_type(events, "message.completed")[0]["data"]["text"].startswith("Hello ")
            assert events[-1]["type"] == "turn.completed"


async def test_a_fresh_server_answers_its_first_mcp_requests_arriving_together(make_server, people):
    server = make_server(PARLEY_MAX_MCP_SESSIONS_PER_PERSON="20")
    headers = {"Accept": ACCEPT, "Authorization": f"Bearer {people.bob.token}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as http:
        answers = await asyncio.gather(*(http.post("/mcp/", json=INITIALIZE) for _ in range(8)))
    assert [a.status_code for a in answers] == [200] * 8, [a.text for a in answers]
    assert len({a.headers["mcp-session-id"] for a in answers}) == 8
    assert "ImportError" not in server.log_text()
