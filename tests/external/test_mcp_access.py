"""Access follows people over MCP as everywhere else: a person removed from the workspace,
lowered to viewer or deactivated loses what their open MCP session may do at once (the call
waiting ends with an error, nothing is written, no answer or steering reaches them), and a call
Parley refuses writes nothing."""

import asyncio

import pytest
from mcp.shared.exceptions import McpError

from conversations.models import Conversation, Turn
from external.models import ExternalTask
from selection.models import Selection
from tests.helpers import (
    CEILING,
    MEMBERSHIPS,
    deactivate,
    membership_of,
    of_type,
    post_form,
    reply_to,
    turn_events,
)
from tests.mcp_client import mcp_session


async def _waiting_questions(rest, count: int) -> list[dict]:
    async with asyncio.timeout(CEILING):
        while True:
            found = (await rest.get("/api/selections/", params={"status": "pending"})).json()
            if len(found) >= count:
                return found
            await asyncio.sleep(0.05)


async def test_a_member_removed_loses_their_mcp_session_at_once(server, people, admin):
    async with (
        mcp_session(server.url, people.bob.token) as mcp,
        server.async_client(people.alice) as rest,
    ):
        posted = await mcp.call_tool("post", {"text": "Looking at the billing code."})
        assert not posted.isError, posted
        task = await mcp.experimental.call_tool_as_task("ask", {"kind": "text", "prompt": "Why?"})
        asking = asyncio.create_task(mcp.call_tool("ask", {"kind": "text", "prompt": "Who?"}))
        questions = await _waiting_questions(rest, 2)
        cid, turn = questions[0]["conversation"], questions[0]["turn"]
        # Alice steers: what she says is for the members of the workspace.
        steered = await rest.post(
            f"/api/conversations/{cid}/steer/",
            json={"expected_turn_id": turn, "input": "The password is swordfish"},
        )
        assert steered.status_code == 202, steered.text

        membership = await membership_of(people.bob, people.workspace)
        done = await asyncio.to_thread(
            post_form, admin, f"{MEMBERSHIPS}{membership}/delete/", {"post": "yes"}
        )
        assert done.status_code == 302, done.text

        # The call waiting ends with a clear error, and carries neither answer nor steering.
        result = await asyncio.wait_for(asking, CEILING)
        assert result.isError, result
        text = result.content[0].text
        assert "no longer have access" in text and "swordfish" not in str(result)
        # The questions went with the session's turn: nobody can answer them into bob's hands.
        events_before = len(await turn_events(rest, cid))
        for question in questions:
            reply = await rest.post(
                f"/api/selections/{question['id']}/reply/", json={"answer": "x"}
            )
            assert reply.status_code == 409, reply.text
            assert (await Selection.objects.aget(pk=question["id"])).status == "cancelled"
        with pytest.raises(McpError, match="No task"):
            await mcp.experimental.get_task(task.task.taskId)
        # Every later call in the conversation is refused, and writes nothing.
        for name, arguments in [
            ("post", {"text": "Still here"}),
            ("ask", {"kind": "confirm", "prompt": "Go?"}),
            ("pending", {}),
        ]:
            refused = await mcp.call_tool(name, arguments)
            assert refused.isError and "no longer have access" in refused.content[0].text
        # What bob may still see, he may: no conversation of the team.
        listed = await mcp.call_tool("list_conversations", {})
        assert listed.structuredContent == {"conversations": []}
        events = await turn_events(rest, cid)
    assert len(events) == events_before
    assert [e["data"]["text"] for e in of_type(events, "message.completed")] == [
        "Looking at the billing code."
    ]
    notice = of_type(events, "turn.notice")[-1]["data"]
    assert notice["kind"] == "session_ended" and "bob may no longer act" in notice["text"]
    assert events[-1]["type"] == "turn.completed"
    assert await Turn.objects.acount() == 1
    assert await ExternalTask.objects.acount() == 1


async def test_a_member_lowered_to_viewer_may_no_longer_act_through_mcp(server, people, admin):
    async with (
        mcp_session(server.url, people.bob.token) as bob,
        mcp_session(server.url, people.alice.token, name="alice's agent") as alice,
        server.async_client(people.alice) as rest,
    ):
        asking = asyncio.create_task(bob.call_tool("ask", {"kind": "text", "prompt": "Who?"}))
        (question,) = await _waiting_questions(rest, 1)
        # Alice, an owner lowered to member, may still act: her session goes on.
        alices = asyncio.create_task(alice.call_tool("ask", {"kind": "text", "prompt": "Hers?"}))
        await _waiting_questions(rest, 2)
        for person, role in [(people.bob, "viewer"), (people.alice, "member")]:
            membership = await membership_of(person, people.workspace)
            form = {
                "user": person.user.pk,
                "workspace": people.workspace.pk,
                "role": role,
                "source": "admin",
            }
            done = await asyncio.to_thread(
                post_form, admin, f"{MEMBERSHIPS}{membership}/change/", form
            )
            assert done.status_code == 302, done.text
        result = await asyncio.wait_for(asking, CEILING)
        assert result.isError and "lowered to viewer" in result.content[0].text
        refused = await bob.call_tool("post", {"text": "Anyway"})
        assert refused.isError and "lowered to viewer" in refused.content[0].text
        # A viewer still sees the conversation.
        listed = await bob.call_tool("list_conversations", {})
        assert question["conversation"] in {
            row["id"] for row in listed.structuredContent["conversations"]
        }
        (hers,) = await _waiting_questions(rest, 1)
        assert hers["prompt"] == "Hers?"
        await reply_to(rest, hers, answer="yes")
        answered = await asyncio.wait_for(alices, CEILING)
        assert answered.structuredContent["answer"] == "yes"
    assert (await Selection.objects.aget(pk=question["id"])).status == "cancelled"


async def test_a_refused_first_call_creates_no_conversation(server, people):
    async with mcp_session(server.url, people.bob.token) as mcp:
        for arguments in [
            {"kind": "text", "prompt": "?", "addressee": "ghost"},
            {"kind": "path", "prompt": "Which?", "root": "nowhere"},
            {"kind": "text", "prompt": "?", "workspace": "other"},
        ]:
            refused = await mcp.call_tool("ask", arguments)
            assert refused.isError, arguments
        posted = await mcp.call_tool("post", {"text": "Hi", "workspace": "other"})
        assert posted.isError
    assert await Conversation.objects.acount() == 0
    assert await Turn.objects.acount() == 0


async def test_a_deactivated_account_loses_its_mcp_session(server, people):
    async with (
        mcp_session(server.url, people.bob.token) as mcp,
        server.async_client(people.alice) as rest,
    ):
        asking = asyncio.create_task(mcp.call_tool("ask", {"kind": "text", "prompt": "Who?"}))
        (question,) = await _waiting_questions(rest, 1)
        # By SQL: no model signal, so the server's upkeep is what notices.
        assert await deactivate(people.bob) == 1
        result = await asyncio.wait_for(asking, CEILING)
        assert result.isError and "no longer have access" in result.content[0].text
        events = await turn_events(rest, question["conversation"])
    assert events[-1]["type"] == "turn.completed"
    assert (await Selection.objects.aget(pk=question["id"])).status == "cancelled"
