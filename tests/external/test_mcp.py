"""Outside agents ask the team through Parley's MCP endpoint: the official mcp client over real
HTTP against a real Daphne, the team answering over REST and the socket."""

import asyncio
import json

import httpx
import pytest
from mcp import types
from mcp.shared.exceptions import McpError

from conversations.models import Conversation, Turn
from conversations.questions import MAX_PROMPT_CHARS, OPTION, PROMPT
from external.models import ExternalTask
from selection.models import Selection
from tests.conftest import receive_json
from tests.helpers import CHOICE, of_type, pending_question, reply_to, turn_events
from tests.mcp_client import ACCEPT, INITIALIZE, mcp_session, open_raw_session


@pytest.fixture
def mcp_server(make_server):
    return make_server(PARLEY_MCP_PROGRESS_SECONDS="0.2")


async def test_an_outside_agent_asks_and_the_team_answers_over_rest(mcp_server, people):
    progress = []
    heard = asyncio.Event()

    async def on_progress(done, total, message):
        progress.append((done, message))
        heard.set()

    async with (
        mcp_session(mcp_server.url, people.bob.token, name="claude-code") as mcp,
        mcp_server.async_client(people.alice) as rest,
    ):
        tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
        assert set(tools) == {"ask", "post", "list_conversations", "pending"}
        assert tools["ask"].execution.taskSupport == "optional"
        posted = await mcp.call_tool("post", {"text": "Setting up the **database**."})
        assert not posted.isError and posted.structuredContent["status"] == "posted"
        asking = asyncio.create_task(mcp.call_tool("ask", CHOICE, progress_callback=on_progress))
        question = await pending_question(rest)
        assert question["prompt"] == "Which database?" and question["kind"] == "choice"
        # A long wait sends progress, so that the client (and a proxy) does not give up.
        await asyncio.wait_for(heard.wait(), 30)
        pending = await mcp.call_tool("pending", {})
        assert [row["id"] for row in pending.structuredContent["pending"]] == [question["id"]]
        await reply_to(rest, question, answer="pg")
        result = await asyncio.wait_for(asking, 30)
        assert result.structuredContent == {
            "status": "answered",
            "answer": "pg",
            "answered_by": "alice",
            "question": question["id"],
        }
        assert 'alice answered: "pg"' in result.content[0].text
        assert progress and "Waiting for the team" in progress[0][1]
        assert (await mcp.call_tool("pending", {})).structuredContent["pending"] == []
        cid = question["conversation"]
    # The session ended (the client's DELETE): so did its turn.
    async with mcp_server.async_client(people.alice) as rest:
        events = await turn_events(rest, cid)
    conversation = await Conversation.objects.aget(pk=cid)
    assert conversation.title == "claude-code" and conversation.agent == "builtin"
    started = of_type(events, "turn.started")[0]["data"]
    assert started["agent"] == "external" and started["started_by"]["username"] == "bob"
    assert started["input"] == "claude-code is working here through MCP."
    assert of_type(events, "message.completed")[0]["data"]["text"] == (
        "Setting up the **database**."
    )
    tool_started = of_type(events, "tool.started")
    assert [e["data"]["name"] for e in tool_started] == ["ask", "pending", "pending"]
    assert tool_started[0]["data"]["arguments"]["prompt"] == "Which database?"
    completed = [e["data"] for e in of_type(events, "tool.completed")]
    assert [e["name"] for e in completed] == ["pending", "ask", "pending"]
    assert completed[1]["result"] == {"status": "answered", "answer": "pg"}
    assert of_type(events, "selection.resolved")[0]["data"]["answered_by"]["username"] == "alice"
    assert events[-1]["type"] == "turn.completed"


KINDS = [
    ({"kind": "path", "prompt": "Which note?", "mode": "file", "root": "notes"}, "ideas.md"),
    ({"kind": "text", "prompt": "A name?"}, "Orion"),
    ({"kind": "confirm", "prompt": "Go ahead?"}, True),
    (
        {
            "kind": "form",
            "prompt": "Details?",
            "schema": {
                "type": "object",
                "properties": {"title": {"type": "string"}, "count": {"type": "integer"}},
                "required": ["title"],
            },
        },
        {"title": "Launch", "count": 3},
    ),
    (
        {**CHOICE, "multiple": True, "min_choices": 1, "max_choices": 2},
        ["sqlite", "pg"],
    ),
]


async def test_every_kind_asked_and_answered_over_rest(mcp_server, people, files_root):
    (files_root / "notes" / "ideas.md").write_text("# Ideas\n")
    async with (
        mcp_session(mcp_server.url, people.bob.token) as mcp,
        mcp_server.async_client(people.bob) as rest,
    ):
        for question, answer in KINDS:
            asking = asyncio.create_task(mcp.call_tool("ask", question))
            asked = await pending_question(rest)
            assert asked["kind"] == question["kind"]
            await reply_to(rest, asked, answer=answer)
            result = await asyncio.wait_for(asking, 30)
            assert result.structuredContent["status"] == "answered", result
            assert result.structuredContent["answer"] == answer


async def test_an_answer_over_the_socket_and_steering_from_the_composer(mcp_server, people):
    async with (
        mcp_session(mcp_server.url, people.bob.token) as mcp,
        mcp_server.async_client(people.alice) as rest,
    ):
        asking = asyncio.create_task(mcp.call_tool("ask", {"kind": "text", "prompt": "Why?"}))
        question = await pending_question(rest)
        cid, turn = question["conversation"], question["turn"]
        async with mcp_server.connect(cid, people.alice) as ws:
            await receive_json(ws)
            # What people send while the outside agent works is steering, handed to it with
            # its next tool result.
            await ws.send(
                json.dumps(
                    {
                        "type": "turn.steer",
                        "ref": "s",
                        "expected_turn_id": turn,
                        "input": "Be brief",
                    }
                )
            )
            await ws.send(
                json.dumps(
                    {
                        "type": "selection.reply",
                        "ref": "r",
                        "selection_id": question["id"],
                        "answer": "Because.",
                    }
                )
            )
            acks = {}
            while len(acks) < 2:
                frame = await receive_json(ws)
                if frame.get("type") == "ws.ack":
                    acks[frame["ref"]] = frame
        result = await asyncio.wait_for(asking, 30)
    assert acks["r"]["status"] == "answered"
    assert result.structuredContent["answer"] == "Because."
    assert result.structuredContent["steering"] == ["Be brief"]
    assert "The team added, while you worked: Be brief" in result.content[0].text


@pytest.mark.parametrize(("action", "status"), [("dismiss", "dismissed"), ("decline", "declined")])
async def test_a_question_dismissed_or_declined(mcp_server, people, action, status):
    async with (
        mcp_session(mcp_server.url, people.bob.token) as mcp,
        mcp_server.async_client(people.alice) as rest,
    ):
        asking = asyncio.create_task(mcp.call_tool("ask", {"kind": "confirm", "prompt": "Ship?"}))
        await reply_to(rest, await pending_question(rest), action=action)
        result = await asyncio.wait_for(asking, 30)
    assert result.structuredContent["status"] == status
    assert result.structuredContent["answer"] is None


async def test_a_question_nobody_answers_is_escalated_then_expires(mcp_server, people):
    async with mcp_session(mcp_server.url, people.bob.token) as mcp:
        question = {"kind": "text", "prompt": "Anyone?", "timeout": 1, "escalate": True}
        result = await mcp.call_tool("ask", question)
    assert result.structuredContent["status"] == "expired"
    assert "expired" in result.content[0].text
    # Upkeep reminded the members, then called on the owners, before it expired.
    stored = await Selection.objects.aget(pk=result.structuredContent["question"])
    assert stored.reminded_at < stored.escalated_at <= stored.answered_at


async def test_stop_in_parley_cancels_the_pending_call_and_every_later_one(mcp_server, people):
    async with (
        mcp_session(mcp_server.url, people.bob.token) as mcp,
        mcp_server.async_client(people.alice) as rest,
    ):
        asking = asyncio.create_task(mcp.call_tool("ask", CHOICE))
        question = await pending_question(rest)
        stopped = await rest.post(
            f"/api/conversations/{question['conversation']}/cancel/",
            json={"turn_id": question["turn"]},
        )
        assert stopped.status_code == 202, stopped.text
        result = await asyncio.wait_for(asking, 30)
        assert result.structuredContent["status"] == "cancelled"
        assert result.structuredContent["stopped"] is True
        assert "alice pressed Stop" in result.content[0].text
        for name, arguments in [("post", {"text": "Still here"}), ("ask", CHOICE)]:
            later = await mcp.call_tool(name, arguments)
            assert later.structuredContent["stopped"] is True, name
        events = await turn_events(rest, question["conversation"])
    assert events[-1]["type"] == "turn.cancelled"
    assert (await Selection.objects.aget(pk=question["id"])).status == "cancelled"
    assert not of_type(events, "message.completed")


async def test_two_outside_agents_in_two_conversations_at_once(mcp_server, people):
    async with (
        mcp_session(mcp_server.url, people.bob.token, name="first") as one,
        mcp_session(mcp_server.url, people.alice.token, name="second") as two,
        mcp_server.async_client(people.alice) as rest,
    ):
        asking = [
            asyncio.create_task(one.call_tool("ask", {"kind": "text", "prompt": "One?"})),
            asyncio.create_task(two.call_tool("ask", {"kind": "text", "prompt": "Two?"})),
        ]
        async with asyncio.timeout(30):
            while True:
                found = (await rest.get("/api/selections/?status=pending")).json()
                if len(found) == 2:
                    break
                await asyncio.sleep(0.05)
        assert len({question["conversation"] for question in found}) == 2
        for question in found:
            await reply_to(rest, question, answer=f"for {question['prompt']}")
        results = await asyncio.wait_for(asyncio.gather(*asking), 30)
    assert [r.structuredContent["answer"] for r in results] == ["for One?", "for Two?"]


async def test_a_named_conversation_and_the_one_the_session_works_in(mcp_server, people):
    async with mcp_server.async_client(people.bob) as rest:
        created = await rest.post(
            "/api/conversations/", json={"workspace": "team", "title": "Release"}
        )
        cid = created.json()["id"]
        async with mcp_session(mcp_server.url, people.bob.token) as mcp:
            listed = await mcp.call_tool("list_conversations", {})
            assert [row["id"] for row in listed.structuredContent["conversations"]] == [cid]
            posted = await mcp.call_tool("post", {"text": "Hello", "conversation": cid})
            assert not posted.isError
            other = await mcp.call_tool("post", {"text": "Elsewhere", "conversation": "c_other"})
            assert other.isError and f"works in conversation {cid}" in other.content[0].text
            listed = await mcp.call_tool("list_conversations", {"workspace": "team"})
            assert listed.structuredContent["conversations"][0]["running"] is True
        events = await turn_events(rest, cid)
    assert of_type(events, "message.completed")[0]["data"]["text"] == "Hello"


async def test_bad_tokens_get_401_before_any_mcp_message(mcp_server, people):
    initialize = INITIALIZE
    headers = {"Accept": ACCEPT}
    async with httpx.AsyncClient(base_url=mcp_server.url, headers=headers) as http:
        for authorization in (None, "Bearer nope", "Basic Ym9iOmJvYi1wdw==", "Token"):
            sent = {"Authorization": authorization} if authorization else {}
            response = await http.post("/mcp/", json=initialize, headers=sent)
            assert response.status_code == 401, authorization
            assert response.json()["error"]["code"] == "not_authenticated"
            assert response.headers["www-authenticate"].startswith("Bearer")
        # Garbage that is not even JSON is refused the same way, before it is read.
        response = await http.post("/mcp/", content=b"\xff{", headers={"Authorization": "x"})
        assert response.status_code == 401
        # "Token <key>", as Parley's REST API takes it, is accepted too.
        ok = await http.post(
            "/mcp/", json=initialize, headers={"Authorization": f"Token {people.bob.token}"}
        )
        assert ok.status_code == 200, ok.text
    # A session answers only the person who opened it.
    session_id = ok.headers["mcp-session-id"]
    async with httpx.AsyncClient(base_url=mcp_server.url, headers=headers) as http:
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        stolen = await http.post(
            "/mcp/",
            json=listing,
            headers={
                "Authorization": f"Bearer {people.alice.token}",
                "mcp-session-id": session_id,
                "mcp-protocol-version": "2025-11-25",
            },
        )
        assert stolen.status_code == 404
    async with mcp_session(mcp_server.url, people.bob.token, scheme="Token") as mcp:
        assert len((await mcp.list_tools()).tools) == 4


async def test_a_viewer_may_not_ask_and_a_stranger_finds_no_conversation(mcp_server, people):
    async with mcp_server.async_client(people.alice) as rest:
        created = await rest.post("/api/conversations/", json={"workspace": "team", "title": "X"})
        cid = created.json()["id"]
    async with mcp_session(mcp_server.url, people.carol.token) as mcp:
        refused = await mcp.call_tool("ask", {"kind": "text", "prompt": "May I?"})
        assert refused.isError and "may not act in any workspace" in refused.content[0].text
        named = await mcp.call_tool(
            "ask", {"kind": "text", "prompt": "May I?", "conversation": cid}
        )
        assert named.isError and "Viewers may watch but not ask the team" in named.content[0].text
        # A viewer still sees the conversations.
        listed = await mcp.call_tool("list_conversations", {})
        assert [row["id"] for row in listed.structuredContent["conversations"]] == [cid]
    async with mcp_session(mcp_server.url, people.dave.token) as mcp:
        stranger = await mcp.call_tool("post", {"text": "Hi", "conversation": cid})
        assert stranger.isError and "Conversation was not found" in stranger.content[0].text
        assert (await mcp.call_tool("list_conversations", {})).structuredContent == {
            "conversations": []
        }
    assert await Turn.objects.acount() == 0
    assert await Conversation.objects.acount() == 1


async def test_an_option_without_a_value_is_answered_with_its_label(mcp_server, people):
    # As the tool's schema (derived from the question kinds' definition) tells an outside agent.
    async with (
        mcp_session(mcp_server.url, people.bob.token) as mcp,
        mcp_server.async_client(people.alice) as rest,
    ):
        (ask,) = [tool for tool in (await mcp.list_tools()).tools if tool.name == "ask"]
        assert ask.inputSchema["properties"]["options"]["items"] == OPTION
        assert ask.inputSchema["properties"]["prompt"] == PROMPT.json_schema()
        options = [{"label": "Monday"}, {"label": "Friday", "description": "Risky"}]
        asking = asyncio.create_task(
            mcp.call_tool("ask", {"kind": "choice", "prompt": "Deploy when?", "options": options})
        )
        asked = await pending_question(rest)
        assert asked["options"] == [
            {"label": "Monday", "value": "Monday"},
            {"label": "Friday", "value": "Friday", "description": "Risky"},
        ]
        await reply_to(rest, asked, answer="Friday")
        result = await asyncio.wait_for(asking, 30)
    assert result.structuredContent["answer"] == "Friday"
    assert 'alice answered: "Friday"' in result.content[0].text


async def test_malformed_arguments_are_a_clear_tool_error_and_nothing_is_stored(mcp_server, people):
    bad = [
        ({"kind": "poll", "prompt": "?"}, "kind"),
        ({"kind": "text"}, "'prompt' is a required property"),
        ({"kind": "choice", "prompt": "Which?"}, "options"),
        ({"kind": "choice", "prompt": "Which?", "options": [{"label": 3}]}, "label"),
        ({"kind": "path", "prompt": "Which?", "root": "../etc"}, ".."),
        ({"kind": "form", "prompt": "?", "schema": {"type": "array"}}, "schema"),
        ({"kind": "text", "prompt": "?", "addressee": "ghost"}, "cannot answer questions"),
        ({"kind": "text", "prompt": "?", "timeout": -1}, "timeout"),
        ({"kind": "text", "prompt": "?", "colour": "red"}, "colour"),
        ({"kind": "text", "prompt": "?" * (MAX_PROMPT_CHARS + 1)}, "is too long"),
    ]
    async with mcp_session(mcp_server.url, people.bob.token) as mcp:
        for arguments, says in bad:
            result = await mcp.call_tool("ask", arguments)
            assert result.isError, arguments
            assert says in result.content[0].text, (arguments, result.content[0].text)
        unknown = await mcp.call_tool("summon", {})
        assert unknown.isError and "Unknown tool" in unknown.content[0].text
    assert await Turn.objects.acount() == 0
    assert await Selection.objects.acount() == 0


async def test_a_question_asked_as_a_task_is_fetched_later_and_can_be_cancelled(mcp_server, people):
    async with (
        mcp_session(mcp_server.url, people.bob.token) as mcp,
        mcp_server.async_client(people.alice) as rest,
    ):
        created = await mcp.experimental.call_tool_as_task("ask", CHOICE, ttl=600_000)
        task_id = created.task.taskId
        assert created.task.status == "working" and created.task.pollInterval == 1000
        # The ttl asked for, being under PARLEY_MCP_TASK_TTL_SECONDS, is the one kept.
        assert created.task.ttl == 600_000
        question = await pending_question(rest)
        assert (await mcp.experimental.get_task(task_id)).status == "working"
        await reply_to(rest, question, answer="sqlite")
        async with asyncio.timeout(30):
            while True:
                if (await mcp.experimental.get_task(task_id)).status == "completed":
                    break
                await asyncio.sleep(0.05)
        result = await mcp.experimental.get_task_result(task_id, types.CallToolResult)
        assert result.structuredContent["answer"] == "sqlite"
        listed = await mcp.experimental.list_tasks()
        assert [task.taskId for task in listed.tasks] == [task_id]

        # Given up by the outside agent: the task and its question are cancelled.
        second = await mcp.experimental.call_tool_as_task("ask", {"kind": "text", "prompt": "?"})
        other = await pending_question(rest)
        cancelled = await mcp.experimental.cancel_task(second.task.taskId)
        assert cancelled.status == "cancelled"
        settled = await mcp.experimental.get_task_result(second.task.taskId, types.CallToolResult)
        assert settled.structuredContent["status"] == "cancelled"
        assert (await Selection.objects.aget(pk=other["id"])).status == "cancelled"
    # Nobody else sees the task.
    async with mcp_session(mcp_server.url, people.alice.token) as mcp:
        with pytest.raises(McpError, match="No task"):
            await mcp.experimental.get_task(task_id)
        assert (await mcp.experimental.list_tasks()).tasks == []
    assert await ExternalTask.objects.acount() == 2


async def test_a_client_that_vanishes_without_ending_its_session_ends_its_turn(make_server, people):
    server = make_server(PARLEY_MCP_IDLE_TIMEOUT_SECONDS="1")
    headers = {"Accept": ACCEPT, "Authorization": f"Bearer {people.bob.token}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=30) as http:
        headers = await open_raw_session(http)
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "post", "arguments": {"text": "Back soon"}},
        }
        posted = await http.post("/mcp/", json=call, headers=headers)
        assert posted.status_code == 200 and '"posted"' in posted.text
        # No DELETE, no open stream: silent for PARLEY_MCP_IDLE_TIMEOUT_SECONDS, the session
        # ends, and its turn with it.
        async with server.async_client(people.bob) as rest:
            cid = (await rest.get("/api/conversations/")).json()["results"][0]["id"]
            events = await turn_events(rest, cid)
        assert events[-1]["type"] == "turn.completed"
        gone = await http.post("/mcp/", json={**call, "id": 3}, headers=headers)
        assert gone.status_code == 404


async def test_a_session_creates_its_conversation_in_the_workspace_named(mcp_server, people):
    async with mcp_session(mcp_server.url, people.dave.token, name="Cursor") as mcp:
        posted = await mcp.call_tool("post", {"text": "Hello", "workspace": "other"})
        assert not posted.isError, posted
        refused = await mcp.call_tool("post", {"text": "Hi", "workspace": "nowhere"})
        # The session is bound already: the workspace of a later call does not move it.
        assert not refused.isError
    conversation = await Conversation.objects.select_related("workspace").aget()
    assert (conversation.title, conversation.workspace.slug) == ("Cursor", "other")
    async with mcp_session(mcp_server.url, people.bob.token) as mcp:
        unknown = await mcp.call_tool("post", {"text": "Hi", "workspace": "nowhere"})
        assert unknown.isError and "Workspace 'nowhere' was not found" in unknown.content[0].text
