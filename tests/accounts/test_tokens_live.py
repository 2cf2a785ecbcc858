"""A revoked token stops working on every edge at once: what was opened with it (a
conversation's socket, the person's own socket, a tail, an MCP session) ends the moment it is
revoked, by its owner over REST or by an admin's action, while what was opened otherwise goes
on; an expired one ends at the next upkeep at worst."""

import asyncio
import json
from datetime import timedelta

import httpx
import websockets
from django.db import connection
from django.utils import timezone

from accounts.models import ApiToken, AuditEntry
from accounts.tokens import token_create
from tests.conftest import Person, receive_json, wait_until
from tests.helpers import (
    CEILING,
    closed_with,
    parked_conversation,
    pending_question,
    post_form,
    ready,
    run_admin_action,
    sse_events,
    tail_lines,
)
from tests.mcp_client import mcp_session

TOKENS = "/admin/accounts/apitoken/"


async def _another_token(person: Person, name: str) -> tuple[Person, str]:
    """The same person with another token of theirs, and its id."""

    def make():
        try:
            token, key = token_create(user=person.user, name=name)
            return Person(user=person.user, token=key), token.pk
        finally:
            connection.close()

    return await asyncio.to_thread(make)


async def _tail_open(server, person, cid) -> tuple[asyncio.Task, list[str]]:
    lines: list[str] = []
    task = asyncio.create_task(tail_lines(server, person, cid, lines))
    await asyncio.to_thread(wait_until, lambda: ": connected" in lines, CEILING, "the tail")
    return task, lines


async def test_revoking_a_token_ends_its_sockets_and_tails_at_once_and_nothing_else(server, people):
    cid, _ = await asyncio.to_thread(parked_conversation, server, people)
    script, script_id = await _another_token(people.bob, "script")
    me_url = f"ws://127.0.0.1:{server.port}/ws/me/"
    async with (
        server.connect(cid, script) as scripted,
        server.connect(cid, people.bob) as other,
        websockets.connect(me_url, additional_headers=script.headers) as me,
    ):
        await ready(scripted)
        await ready(other)
        assert (await receive_json(me, timeout=CEILING))["type"] == "waiting"
        tail, lines = await _tail_open(server, script, cid)
        other_tail, _ = await _tail_open(server, people.bob, cid)

        # Bob revokes it with his other token.
        async with server.async_client(people.bob) as rest:
            revoked = await rest.delete(f"/api/me/tokens/{script_id}/")
            assert revoked.status_code == 204, revoked.text

        assert await closed_with(scripted) == 4401
        assert await closed_with(me) == 4401
        async with asyncio.timeout(CEILING):
            await tail
        *_, (name, data) = sse_events(lines)
        assert name == "error" and data["error"]["code"] == "token_revoked"

        # What bob opened with his other token goes on.
        await other.send(json.dumps({"type": "resume", "ref": "still", "from_seq": 0}))
        frame = await receive_json(other, timeout=CEILING)
        while frame["type"] != "ws.ack":
            frame = await receive_json(other, timeout=CEILING)
        assert frame["ref"] == "still" and not other_tail.done()
        other_tail.cancel()
    # And the revoked one opens nothing any more.
    async with server.connect(cid, script) as again:
        assert await closed_with(again) == 4401
    metrics = (await asyncio.to_thread(httpx.get, f"{server.url}/metrics")).text
    assert 'parley_access_revoked_total{kind="token_ended"}' in metrics


async def test_an_admin_revokes_a_token_and_its_mcp_session_ends_at_once(server, people, admin):
    agent, agent_id = await _another_token(people.bob, "outside agent")
    async with (
        mcp_session(server.url, agent.token) as mcp,
        server.async_client(people.alice) as rest,
    ):
        posted = await mcp.call_tool("post", {"text": "Looking at the billing code."})
        assert not posted.isError, posted
        asking = asyncio.create_task(mcp.call_tool("ask", {"kind": "text", "prompt": "Who?"}))
        await pending_question(rest)

        done = await asyncio.to_thread(run_admin_action, admin, TOKENS, "revoke", [agent_id])
        assert done.status_code == 302, done.text

        result = await asyncio.wait_for(asking, CEILING)
        assert result.isError and "revoked or expired" in result.content[0].text
    # Every later request with it is refused before any MCP message is read.
    async with httpx.AsyncClient(base_url=server.url, headers=agent.headers) as client:
        refused = await client.post("/mcp/", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert refused.status_code == 401

    def audited():
        try:
            token = ApiToken.objects.get(pk=agent_id)
            entry = AuditEntry.objects.get(action="token_revoked", detail__token=agent_id)
            return token.revoked_at, entry.actor.username, entry.detail
        finally:
            connection.close()

    revoked_at, actor, detail = await asyncio.to_thread(audited)
    assert revoked_at is not None and actor == "alice"
    assert detail == {"token": agent_id, "name": "outside agent"}


async def test_an_expired_token_loses_its_socket_and_tail_at_the_next_upkeep(
    server, people, conversation
):
    cid, _ = await asyncio.to_thread(parked_conversation, server, people)
    short, short_id = await _another_token(people.carol, "short-lived")
    async with server.connect(cid, short) as ws:
        await ready(ws)
        tail, lines = await _tail_open(server, short, cid)

        def expire():
            # An update, as time passing would be: no signal, only the upkeep notices.
            try:
                return ApiToken.objects.filter(pk=short_id).update(
                    expires_at=timezone.now() - timedelta(seconds=1)
                )
            finally:
                connection.close()

        assert await asyncio.to_thread(expire) == 1
        assert await closed_with(ws) == 4401
        async with asyncio.timeout(CEILING):
            await tail
        *_, (name, data) = sse_events(lines)
        assert name == "error" and data["error"]["code"] == "token_revoked"


def test_revoking_in_the_admin_is_an_action_only(server, people, admin):
    token = ApiToken.objects.get(user=people.carol.user)
    page = admin.get(f"{TOKENS}{token.pk}/change/")
    assert page.status_code == 200 and people.carol.token not in page.text
    assert 'name="revoked_at"' not in page.text  # read-only: revoking is the action
    done = post_form(admin, TOKENS, {"action": "revoke", "_selected_action": [token.pk]})
    assert done.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
