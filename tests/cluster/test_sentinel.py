"""Redis through Sentinel: two Daphne processes, A and B, ask three sentinels for the Redis
primary. The primary is killed (SIGKILL) while a turn on B streams to sockets on A; the
sentinels promote the replica, and everything that uses Redis follows it: live frames and
wake-ups cross between the processes again, what they missed meanwhile is read from the
database, /readyz is ready again and a person's limits are counted again."""

import asyncio

import pytest

from tests.conftest import (
    all_events,
    events_until_terminal,
    receive_json,
    wait_for_turn_end,
    wait_until,
)
from tests.helpers import (
    ask,
    assert_contiguous,
    assert_one_terminal_last,
    astart_turn,
    create_conversation,
    outcomes,
    reply,
    start,
    wait_pending,
)

pytestmark = pytest.mark.cluster

# The feeds' and the turns' own database polls are an hour: only the channel layer can bring
# B's events to A live, and A's wake-ups to B's turns.
SLOW_POLLS = {"PARLEY_FEED_POLL_SECONDS": "3600", "PARLEY_SELECTION_POLL_SECONDS": "3600"}
# channels_redis' receiver logs each failed read while no primary answers.
COMPLAINING = ("channels_redis.pubsub",)


async def test_the_redis_primary_killed_mid_stream(
    make_node, people, flood_conversation, sentinels
):
    env = {**sentinels.parley_env(), **SLOW_POLLS, "PARLEY_MAX_TAILS_PER_PERSON": "1"}
    a = make_node(allow_errors_from=COMPLAINING, **env)
    b = make_node(allow_errors_from=COMPLAINING, **env)
    cid = flood_conversation.pk
    killed = None
    async with (
        a.connect(cid, people.bob) as first,
        a.async_client(people.bob) as client_a,
        b.async_client(people.alice) as client_b,
    ):
        assert (await receive_json(first))["type"] == "ws.ready"
        started = await astart_turn(client_b, cid, "4000 events every 4")
        watching = asyncio.create_task(events_until_terminal(first, timeout=180))

        async def latest() -> int:
            return (await client_a.get(f"/api/conversations/{cid}/in-flight/")).json()["latest_seq"]

        while (joined_at := await latest()) < 300:  # noqa: ASYNC110 (polling another process)
            await asyncio.sleep(0.05)
        async with a.connect(cid, people.bob, from_seq=joined_at) as second:
            assert (await receive_json(second))["type"] == "ws.ready"
            joining = asyncio.create_task(events_until_terminal(second, timeout=180))
            killed = await asyncio.to_thread(sentinels.kill_primary)
            promoted = await asyncio.to_thread(sentinels.wait_for_failover, 60)
            assert promoted.port != killed.port
            # The turn is still streaming: what follows reaches A over the new primary.
            assert await latest() < 4002
            watched, joined = await watching, await joining

        stored = all_events(b.client(people.alice), cid)
        assert stored[-1]["seq"] == 4002 and stored[-1]["type"] == "turn.completed"
        assert stored[-1]["turn"] == started["turn"]
        by_seq = {e["seq"]: (e["type"], e["data"]) for e in stored}
        for from_seq, events in ((0, watched), (joined_at, joined)):
            assert_contiguous(events, from_seq + 1, 4002)
            assert all(by_seq[e["seq"]] == (e["type"], e["data"]) for e in events)

        # A turn started after the failover is watched live on A (the feed's poll is an hour).
        second_turn = await astart_turn(client_b, cid, "200 events every 4")
        live = await events_until_terminal(first, second_turn["turn"], timeout=60)
        assert_contiguous(live, 4003, 4204)
        assert live == all_events(a.client(people.bob), cid)[4002:]

    # A question asked on B, answered through A: the wake-up crosses over the new primary and
    # the turn resumes once.
    client_a, client_b = a.client(people.bob), b.client(people.alice)
    asked = create_conversation(client_b)
    turn = start(client_b, asked, [ask(kind="text"), {"say": "done"}])
    pending = wait_pending(client_a, asked, timeout=60)
    assert reply(client_a, pending["id"], answer="after the failover").status_code == 200
    wait_for_turn_end(client_a, asked, timeout=60)
    events = all_events(client_a, asked)
    assert [o["value"] for o in outcomes(events)] == ["after the failover"]
    assert_one_terminal_last(events)
    assert events[-1]["type"] == "turn.completed" and events[-1]["turn"] == turn
    assert [e["type"] for e in events].count("selection.resolved") == 1

    # Both ready again: /readyz pings the primary the sentinels name now.
    for server in (a, b):
        wait_until(lambda s=server: s.client().get("/readyz").status_code == 200, timeout=60)
        assert server.client().get("/readyz").json()["checks"]["channel_layer"] == "ok"

    # A person's tails are counted over both processes again, on the new primary.
    async with b.async_client(people.alice) as on_b, a.async_client(people.alice) as on_a:
        async with on_b.stream("GET", f"/api/conversations/{cid}/tail/") as tail:
            assert tail.status_code == 200
            refused = await on_a.get(f"/api/conversations/{cid}/tail/")
            assert refused.status_code == 429, refused.text
    client_a.close()
    client_b.close()
