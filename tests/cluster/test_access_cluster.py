"""Access follows membership on every process: a person removed (or lowered) in the admin served
by process A loses the sockets and tails that process B serves them, within B's upkeep."""

import asyncio

from tests.conftest import receive_json
from tests.helpers import (
    MEMBERSHIPS,
    admin_client,
    closed_with,
    membership_of,
    message_after,
    parked_conversation,
    post_form,
    ready,
    sse_events,
    tail_lines,
)


async def test_a_member_removed_on_one_process_loses_what_another_serves(nodes, people):
    a, b = nodes
    admin = await admin_client(a, people)
    try:
        cid, _ = await asyncio.to_thread(parked_conversation, b, people)
        lines: list[str] = []
        async with b.connect(cid, people.bob) as bob, b.connect(cid, people.alice) as alice:
            await ready(bob)
            await ready(alice)
            tail = asyncio.create_task(tail_lines(b, people.bob, cid, lines))
            membership = await membership_of(people.bob, people.workspace)
            # Lowered first: B closes bob's socket with 4409, and his tail reads on.
            form = {
                "user": people.bob.user.pk,
                "workspace": people.workspace.pk,
                "role": "viewer",
                "source": "admin",
            }
            changed = await asyncio.to_thread(
                post_form, admin, f"{MEMBERSHIPS}{membership}/change/", form
            )
            assert changed.status_code == 302, changed.text
            assert await closed_with(bob) == 4409
            assert not tail.done()
            async with b.connect(cid, people.bob) as bob:
                assert (await ready(bob))["role"] == "viewer"
                # Then removed: B closes it with 4403 and ends the tail with an error.
                delete = f"{MEMBERSHIPS}{membership}/delete/"
                done = await asyncio.to_thread(post_form, admin, delete, {"post": "yes"})
                assert "was deleted successfully" in await asyncio.to_thread(
                    message_after, admin, done
                )
                assert await closed_with(bob) == 4403
            async with asyncio.timeout(60):
                await tail
            *_, (name, data) = sse_events(lines)
            assert name == "error" and data["error"]["code"] == "access_removed"
            # Alice, on the same process, is not touched.
            await alice.send('{"type": "resume", "ref": "r", "from_seq": 0}')
            frame = await ready_or_ack(alice)
            assert frame["ref"] == "r"
    finally:
        admin.close()


async def ready_or_ack(ws) -> dict:
    """The next ws.ack on the socket (events before it are skipped)."""
    frame = await receive_json(ws, timeout=60)
    while frame.get("type") != "ws.ack":
        frame = await receive_json(ws, timeout=60)
    return frame


async def test_a_token_revoked_on_one_process_ends_what_another_serves_with_it(nodes, people):
    from accounts.tokens import token_create
    from tests.conftest import Person

    a, b = nodes

    def another_token() -> tuple[Person, str]:
        from django.db import connection

        try:
            token, key = token_create(user=people.bob.user, name="script")
            return Person(user=people.bob.user, token=key), token.pk
        finally:
            connection.close()

    script, script_id = await asyncio.to_thread(another_token)
    cid, _ = await asyncio.to_thread(parked_conversation, b, people)
    lines: list[str] = []
    async with b.connect(cid, script) as ws, b.connect(cid, people.bob) as other:
        await ready(ws)
        await ready(other)
        tail = asyncio.create_task(tail_lines(b, script, cid, lines))
        async with a.async_client(people.bob) as rest:
            revoked = await rest.delete(f"/api/me/tokens/{script_id}/")
            assert revoked.status_code == 204, revoked.text
        assert await closed_with(ws) == 4401
        async with asyncio.timeout(60):
            await tail
        *_, (name, data) = sse_events(lines)
        assert name == "error" and data["error"]["code"] == "token_revoked"
        await other.send('{"type": "resume", "ref": "r", "from_seq": 0}')
        assert (await ready_or_ack(other))["ref"] == "r"
