"""Access follows membership live: a person removed from a workspace (in the admin), lowered to
a lesser role, or whose account is deactivated (even by SQL, which no signal sees) has their open
sockets closed and their tails ended, while everyone else goes on."""

import asyncio
import json

import httpx
import pytest
import websockets

from conversations import revocation
from tests.conftest import receive_json, wait_until
from tests.helpers import (
    CEILING,
    MEMBERSHIPS,
    closed_with,
    deactivate,
    membership_of,
    message_after,
    parked_conversation,
    post_form,
    ready,
    reply,
    sse_events,
    tail_lines,
)

# The test's own database work, from its async tests: in a thread, whose connection is closed
# after (the test database cannot be dropped while one is open).


async def test_a_member_removed_in_the_admin_loses_their_socket_and_tail_at_once(
    server, people, admin
):
    cid, pending = await asyncio.to_thread(parked_conversation, server, people)
    bob_lines: list[str] = []
    async with (
        server.connect(cid, people.bob) as bob,
        server.connect(cid, people.alice) as alice,
    ):
        assert (await ready(bob))["role"] == "member"
        await ready(alice)
        bob_tail = asyncio.create_task(tail_lines(server, people.bob, cid, bob_lines))
        await asyncio.to_thread(
            wait_until, lambda: ": connected" in bob_lines, CEILING, "bob's tail to open"
        )
        membership = await membership_of(people.bob, people.workspace)
        delete = f"{MEMBERSHIPS}{membership}/delete/"
        done = await asyncio.to_thread(post_form, admin, delete, {"post": "yes"})
        assert "was deleted successfully" in await asyncio.to_thread(message_after, admin, done)

        assert await closed_with(bob) == 4403
        async with asyncio.timeout(CEILING):
            await bob_tail
        *_, (name, data) = sse_events(bob_lines)
        assert name == "error" and data["error"]["code"] == "access_removed"
        # Everyone else goes on: alice's socket still answers, and sees the turn go on.
        await alice.send(json.dumps({"type": "resume", "ref": "r", "from_seq": 0}))
        with server.client(people.alice) as client:
            assert reply(client, pending["id"], answer="fine").status_code == 200
        seen = []
        async with asyncio.timeout(CEILING):
            while not any(f.get("type") == "turn.completed" for f in seen):
                seen.append(await receive_json(alice, timeout=CEILING))
        assert {"type": "ws.ack", "ref": "r"}.items() <= next(
            f for f in seen if f.get("type") == "ws.ack"
        ).items()
    # Nothing is replayed to bob any more, by REST or by socket.
    with server.client(people.bob) as client:
        assert client.get(f"/api/conversations/{cid}/events/").status_code == 404
    async with server.connect(cid, people.bob, from_seq=0) as bob:
        assert await closed_with(bob) == 4403
    metrics = (await asyncio.to_thread(httpx.get, f"{server.url}/metrics")).text
    assert 'parley_access_revoked_total{kind="removed"} 2.0' in metrics


async def test_a_role_lowered_in_the_admin_closes_with_4409_and_the_socket_comes_back_as_viewer(
    server, people, admin
):
    cid, pending = await asyncio.to_thread(parked_conversation, server, people)
    bob_lines: list[str] = []
    async with server.connect(cid, people.bob) as bob:
        assert (await ready(bob))["role"] == "member"
        bob_tail = asyncio.create_task(tail_lines(server, people.bob, cid, bob_lines))
        await asyncio.to_thread(
            wait_until, lambda: ": connected" in bob_lines, CEILING, "bob's tail to open"
        )
        membership = await membership_of(people.bob, people.workspace)
        change = f"{MEMBERSHIPS}{membership}/change/"
        form = {
            "user": people.bob.user.pk,
            "workspace": people.workspace.pk,
            "role": "viewer",
            "source": "admin",
        }
        done = await asyncio.to_thread(post_form, admin, change, form)
        assert done.status_code == 302, done.text
        assert await closed_with(bob) == 4409
    async with server.connect(cid, people.bob, from_seq=0) as bob:
        assert (await ready(bob))["role"] == "viewer"
        await bob.send(json.dumps({"type": "turn.start", "ref": "s", "input": "hello"}))
        frame = await receive_json(bob, timeout=CEILING)
        while frame["type"] != "ws.error":
            frame = await receive_json(bob, timeout=CEILING)
        assert frame["code"] == "forbidden"
    # A viewer still reads: the tail goes on to the turn's end.
    with server.client(people.alice) as client:
        assert reply(client, pending["id"], answer="fine").status_code == 200
    async with asyncio.timeout(CEILING):
        await bob_tail
    *_, (name, _) = sse_events(bob_lines)
    assert name == "done"
    assert any(data.get("type") == "turn.completed" for event, data in sse_events(bob_lines))


async def test_an_account_deactivated_by_sql_loses_every_socket_at_the_next_upkeep(
    server, people, conversation
):
    async with (
        server.connect(conversation.pk, people.bob) as bob,
        websockets.connect(
            f"ws://127.0.0.1:{server.port}/ws/me/", additional_headers=people.bob.headers
        ) as me,
        server.connect(conversation.pk, people.carol) as carol,
    ):
        await ready(bob)
        await ready(carol)
        assert (await receive_json(me, timeout=CEILING))["type"] == "waiting"
        assert await deactivate(people.bob) == 1
        assert await closed_with(bob) == 4403
        # The person's own socket is told to reconnect, and then is refused.
        assert await closed_with(me) == 4409
        await carol.send(json.dumps({"type": "resume", "ref": "still", "from_seq": 0}))
        frame = await receive_json(carol, timeout=CEILING)
        while frame["type"] != "ws.ack":
            frame = await receive_json(carol, timeout=CEILING)
        assert frame["ref"] == "still"
    async with websockets.connect(
        f"ws://127.0.0.1:{server.port}/ws/me/", additional_headers=people.bob.headers
    ) as me:
        assert await closed_with(me) == 4401


@pytest.mark.django_db(transaction=True)
async def test_access_taken_while_a_check_reads_the_database_is_kept(people):
    # A socket or an MCP session opened while another process's change is being checked here
    # is not in what the check read: it must not be taken for one whose access was lost.
    revoked = []
    first = revocation.hold(
        user_id=people.alice.user.pk,
        workspace_id=people.workspace.pk,
        role="owner",
        revoke=revoked.append,
    )
    checking = asyncio.ensure_future(revocation.check())
    await asyncio.sleep(0)  # the check has taken what is held and waits for the database
    second = revocation.hold(
        user_id=people.bob.user.pk,
        workspace_id=people.workspace.pk,
        role="member",
        revoke=revoked.append,
    )
    try:
        assert await asyncio.wait_for(checking, CEILING) == 0
        assert revoked == []
    finally:
        revocation.let_go(first)
        revocation.let_go(second)
