"""Who is here: sockets opened with presence=1 hear who has the conversation open, live."""

import asyncio
import json
from datetime import timedelta

from conversations import services
from conversations.models import Watcher
from tests.conftest import receive_json


async def next_presence(ws) -> list[tuple[str, str]]:
    while (frame := await receive_json(ws))["type"] != "presence":
        pass
    return [(person["username"], person["role"]) for person in frame["people"]]


async def watchers(cid: str, count: int) -> None:
    for _ in range(200):
        if await Watcher.objects.filter(conversation_id=cid).acount() == count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{cid} never had {count} watchers")


async def test_people_come_and_go_live(server, people, conversation):
    cid = conversation.pk
    async with server.connect(cid, people.carol) as quiet:
        await receive_json(quiet)  # ws.ready
        await watchers(cid, 1)
        async with server.connect(cid, people.alice, presence=True) as alice:
            await watchers(cid, 2)
            while await next_presence(alice) != [("carol", "viewer"), ("alice", "owner")]:
                pass  # until both are in the list, in the order they came
            await _bob_comes_and_goes(server, people, cid, alice)
        # The socket that did not ask heard no presence: its next frame is its own answer.
        await quiet.send(json.dumps({"type": "resume", "ref": "r", "from_seq": 0}))
        assert (await receive_json(quiet))["type"] == "ws.ack"
    await watchers(cid, 0)


async def _bob_comes_and_goes(server, people, cid, alice):
    async with server.connect(cid, people.bob, presence=True) as bob:
        everyone = [("carol", "viewer"), ("alice", "owner"), ("bob", "member")]
        assert await next_presence(bob) == everyone
        assert await next_presence(alice) == everyone
        # A second tab of someone already here changes nothing, but gets the list.
        async with server.connect(cid, people.bob, presence=True) as second_tab:
            assert await next_presence(second_tab) == everyone
    assert await next_presence(alice) == [("carol", "viewer"), ("alice", "owner")]


def test_watchers_of_a_process_that_stopped_are_forgotten(people, conversation):
    services.watcher_add(conversation_id=conversation.pk, user=people.bob.user, process="gone")
    mine = services.watcher_add(
        conversation_id=conversation.pk, user=people.alice.user, process="here"
    )
    Watcher.objects.filter(process="gone").update(seen_at=mine.seen_at - timedelta(hours=1))
    # Right after this process was itself cut off from the database, it forgets nobody.
    services.watchers_upkeep(process="here", reap_foreign=False, forget_others=False)
    assert Watcher.objects.count() == 2
    services.watchers_upkeep(process="here", reap_foreign=False)
    assert list(Watcher.objects.values_list("process", flat=True)) == ["here"]
    # At start-up with a process-local layer, no other process can be serving anyone.
    services.watcher_add(conversation_id=conversation.pk, user=people.bob.user, process="other")
    services.watchers_upkeep(process="here", reap_foreign=True)
    assert list(Watcher.objects.values_list("process", flat=True)) == ["here"]
