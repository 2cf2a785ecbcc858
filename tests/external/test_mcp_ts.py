"""The TypeScript MCP SDK's client (tests/clients/mcp-ts.mjs, run by Node) against a real
Daphne: what it printed, and what Parley stored."""

import asyncio
import shutil

import pytest
from django.conf import settings

from conversations.models import Conversation
from selection.models import Selection
from tests.helpers import ClientProgram, of_type, pending_question, reply_to, turn_events

SCRIPT = str(settings.BASE_DIR / "tests" / "clients" / "mcp-ts.mjs")


@pytest.fixture
def mcp_server(make_server):
    return make_server(PARLEY_MCP_PROGRESS_SECONDS="0.2")


def mcp_ts(server, person, scenario):
    node = shutil.which("node")
    assert node, "Node.js is needed (make clients)"
    env = {"PARLEY_URL": server.url, "PARLEY_TOKEN": person.token}
    return ClientProgram.run(node, SCRIPT, scenario, env=env)


async def test_tools_an_answer_from_rest_and_progress_while_it_waits(mcp_server, people):
    async with (
        mcp_ts(mcp_server, people.bob, "basics") as client,
        mcp_server.async_client(people.alice) as rest,
    ):
        initialized = await client.event("initialized")
        assert initialized["server"]["name"] == "parley"
        tools = (await client.event("tools"))["tools"]
        assert set(tools) == {"ask", "post", "list_conversations", "pending"}
        assert tools["ask"]["required"] == ["kind", "prompt"]
        assert {"options", "addressee", "timeout", "conversation"} <= set(
            tools["ask"]["properties"]
        )
        assert tools["ask"]["taskSupport"] == "optional"
        assert tools["post"]["required"] == ["text"]
        assert (await client.event("posted"))["result"] == {"status": "posted"}
        # It waits, hearing progress, until the team answers over REST.
        progress = await client.event("progress")
        assert "Waiting for the team" in progress["message"]
        question = await pending_question(rest)
        assert question["prompt"] == "A release name?"
        await reply_to(rest, question, answer="Orion")
        answered = await client.event("answered")
        assert answered["result"] == {
            "status": "answered",
            "answer": "Orion",
            "answered_by": "alice",
            "question": question["id"],
        }
        assert 'alice answered: "Orion"' in answered["text"]
        assert answered["progress"] >= 1
        assert (await client.event("pending"))["result"] == {"pending": []}
        rest_of_it, stderr = await client.finish()
        assert rest_of_it == ['{"event":"errors","errors":[]}'], stderr
        events = await turn_events(rest, question["conversation"])
    stored = await Selection.objects.select_related("answered_by").aget(pk=question["id"])
    assert stored.status == "answered" and stored.answered_by.username == "alice"
    assert (await Conversation.objects.aget(pk=question["conversation"])).title == "mcp-ts"
    started = of_type(events, "turn.started")[0]["data"]
    assert started["agent"] == "external" and started["started_by"]["username"] == "bob"
    said = of_type(events, "message.completed")
    assert [e["data"]["text"] for e in said] == ["Hello from TypeScript."]
    assert [e["data"]["name"] for e in of_type(events, "tool.completed")] == ["ask", "pending"]
    assert of_type(events, "selection.resolved")[0]["data"]["answered_by"]["username"] == "alice"
    assert events[-1]["type"] == "turn.completed"


async def test_a_task_is_collected_from_a_second_session_after_the_first_ended(mcp_server, people):
    async with (
        mcp_ts(mcp_server, people.bob, "task") as client,
        mcp_server.async_client(people.alice) as rest,
    ):
        task = (await client.event("task"))["task"]
        assert task["status"] == "working" and task["ttl"] == 600_000
        await client.event("ended")  # its DELETE answered
        # The question outlives the session that asked it, and is still open for an answer.
        assert (await client.event("status"))["status"] == "working"
        question = await pending_question(rest)
        assert question["prompt"] == "Ship it?"
        await reply_to(rest, question, answer=True)
        collected = await client.event("collected")
        assert collected["status"] == "completed"
        assert collected["result"]["status"] == "answered"
        assert collected["result"]["answer"] is True
        assert collected["result"]["answered_by"] == "alice"
        rest_of_it, stderr = await client.finish()
        assert rest_of_it == ['{"event":"errors","errors":[]}'], stderr
        events = await turn_events(rest, question["conversation"])
    stored = await Selection.objects.select_related("answered_by").aget(pk=question["id"])
    assert stored.status == "answered" and stored.answered_by.username == "alice"
    resolved = of_type(events, "selection.resolved")
    assert [e["data"]["status"] for e in resolved] == ["answered"]


async def test_a_waiting_call_aborted_cancels_its_question_and_gets_no_response(mcp_server, people):
    async with (
        mcp_ts(mcp_server, people.bob, "cancel") as client,
        mcp_server.async_client(people.alice) as rest,
    ):
        await client.event("asking")
        question = await pending_question(rest)
        await client.tell("abort")  # an AbortSignal: the SDK sends notifications/cancelled
        assert "The agent gave up" in (await client.event("aborted"))["error"]
        async with asyncio.timeout(30):
            while True:
                status = (await Selection.objects.aget(pk=question["id"])).status
                if status != "pending":
                    break
                await asyncio.sleep(0.05)
        assert status == "cancelled"
        await client.tell("cancelled")
        assert (await client.event("pending"))["result"] == {"pending": []}
        # A cancelled request gets no response: the SDK would report one for an unknown id.
        rest_of_it, stderr = await client.finish()
        assert rest_of_it == ['{"event":"errors","errors":[]}'], stderr
        assert "unknown message ID" not in stderr
        events = await turn_events(rest, question["conversation"])
    kinds = [e["type"] for e in events]
    # The question's end is told before the tool call's.
    assert kinds.index("selection.resolved") < kinds.index("tool.completed")
    assert of_type(events, "selection.resolved")[0]["data"]["status"] == "cancelled"
