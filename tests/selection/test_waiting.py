"""What waits for each person: the REST list in its order, the person's own socket (/ws/me/)
with its count and notices, and reminders and escalation run by upkeep, through a real Daphne."""

import asyncio
import json

import pytest
import websockets

from tests.conftest import all_events, receive_json, wait_for_turn_end, wait_until
from tests.helpers import ask, create_conversation, start, wait_pending

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server(make_server):
    # Upkeep every second, reminders at a fifth of a question's time and escalation at half;
    # a parked turn leaves memory at once, so that upkeep alone can remind and escalate.
    return make_server(
        PARLEY_TURN_LEASE_SECONDS="3",
        PARLEY_REMIND_AFTER="0.2",
        PARLEY_ESCALATE_AFTER="0.5",
        PARLEY_RELEASE_PARKED_AFTER_SECONDS="0.2",
    )


def me_socket(server, person):
    return websockets.connect(
        f"ws://127.0.0.1:{server.port}/ws/me/",
        additional_headers=person.headers if person else {},
        open_timeout=10,
    )


async def next_frame(ws, frame_type: str, timeout: float = 20, **match) -> dict:
    """The next frame of this type (and these values), skipping others."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        remaining = deadline - asyncio.get_running_loop().time()
        frame = await receive_json(ws, max(remaining, 0.01))
        if frame["type"] == frame_type and all(frame.get(k) == v for k, v in match.items()):
            return frame


async def frames_until(ws, *wanted, timeout: float = 20) -> list[dict]:
    """The first frame matching each of ``wanted`` (predicates), whatever their order."""
    found: list = [None] * len(wanted)
    async with asyncio.timeout(timeout):
        while None in found:
            frame = await receive_json(ws, timeout)
            for index, matches in enumerate(wanted):
                if found[index] is None and matches(frame):
                    found[index] = frame
    return found


def ask_in_new_conversation(client, title: str, **question) -> dict:
    cid = create_conversation(client, title=title)
    start(client, cid, [ask(**question)])
    return wait_pending(client, cid)


def test_questions_addressed_to_me_come_first_then_the_oldest(server, people):
    with server.client(people.alice) as alice, server.client(people.bob) as bob:
        oldest = ask_in_new_conversation(alice, "Open to all", kind="text")
        for_alice = ask_in_new_conversation(alice, "For Alice", kind="text", addressee="alice")
        for_bob = ask_in_new_conversation(alice, "For Bob", kind="confirm", addressee="bob")

        listed = bob.get("/api/selections/", params={"status": "pending"}).json()
        assert [s["id"] for s in listed] == [for_bob["id"], oldest["id"]]
        mine = bob.get("/api/selections/", params={"status": "pending", "addressee": "me"})
        assert [s["id"] for s in mine.json()] == [for_bob["id"]]
        # An owner may answer every question: hers first, then the oldest.
        listed = alice.get("/api/selections/", params={"status": "pending"}).json()
        assert [s["id"] for s in listed] == [for_alice["id"], oldest["id"], for_bob["id"]]

        refused = bob.get("/api/selections/", params={"addressee": "bob"})
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == "invalid"

        waiting = bob.get("/api/waiting/").json()
        assert (waiting["count"], waiting["for_me"]) == (2, 1)
        first = waiting["results"][0]
        assert first["id"] == for_bob["id"]
        assert first["conversation_title"] == "For Bob"
        assert first["workspace"] == {"slug": "team", "name": "The Team"}
        assert first["started_by"]["username"] == "alice"
        assert first["role"] == "member"
        # A viewer answers nothing; someone outside the workspace sees nothing of it.
    with server.client(people.carol) as carol, server.client(people.dave) as dave:
        assert carol.get("/api/waiting/").json() == {"count": 0, "for_me": 0, "results": []}
        assert dave.get("/api/waiting/").json()["count"] == 0


async def test_my_socket_counts_what_waits_for_me_and_tells_me_of_it(server, people):
    async with (
        me_socket(server, people.bob) as bob_ws,
        me_socket(server, people.alice) as alice_ws,
        me_socket(server, people.carol) as carol_ws,
        server.async_client(people.alice) as alice,
        server.async_client(people.bob) as bob,
    ):
        for ws in (bob_ws, alice_ws, carol_ws):
            assert await next_frame(ws, "waiting") == {"type": "waiting", "count": 0, "for_me": 0}
        created = await alice.post(
            "/api/conversations/",
            json={"workspace": "team", "title": "Deploy", "agent": "scripted"},
        )
        cid = created.json()["id"]
        steps = [ask(kind="confirm", prompt="May I deploy?", addressee="bob")]
        started = await alice.post(
            f"/api/conversations/{cid}/turns/", json={"input": json.dumps(steps)}
        )
        turn = started.json()["turn"]

        # The notice and the new count, in whichever order they come.
        seen = await frames_until(
            bob_ws,
            lambda f: f["type"] == "notice",
            lambda f: f["type"] == "waiting" and f["count"] == 1,
        )
        notice, counted = seen
        assert counted == {"type": "waiting", "count": 1, "for_me": 1}
        assert notice["kind"] == "asked"
        assert notice["addressed"] is True
        assert notice["prompt"] == "May I deploy?"
        assert (notice["conversation"], notice["conversation_title"]) == (cid, "Deploy")
        # Alice owns the workspace: the question counts for her too, but it is not hers.
        assert (await next_frame(alice_ws, "waiting", count=1))["for_me"] == 0

        answered = await bob.post(
            f"/api/selections/{notice['selection']}/reply/", json={"answer": True}
        )
        assert answered.status_code == 200
        assert (await next_frame(bob_ws, "waiting", count=0))["for_me"] == 0
        # The turn Alice started ended: she hears of it, wherever she is.
        ended, _ = await frames_until(
            alice_ws,
            lambda f: f["type"] == "notice" and f["kind"] == "turn_ended",
            lambda f: f["type"] == "waiting" and f["count"] == 0,
        )
        assert (ended["turn"], ended["status"], ended["conversation_title"]) == (
            turn,
            "completed",
            "Deploy",
        )
        # Carol (a viewer) was never told of a question she cannot answer.
        frames = []
        while len([f for f in frames if f["type"] == "waiting"]) < 2:
            frames.append(await receive_json(carol_ws, 20))
        # Her lists hear that the conversation changed (activity frames name only it).
        counts = [f for f in frames if f["type"] != "activity"]
        assert all(f == {"type": "waiting", "count": 0, "for_me": 0} for f in counts), frames
        assert {f["conversation"] for f in frames if f["type"] == "activity"} <= {cid}


async def test_my_socket_wants_a_signed_in_person(server, people):
    async with me_socket(server, None) as ws:
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await receive_json(ws)
        assert closed.value.rcvd.code == 4401


async def test_upkeep_reminds_the_addressee_then_escalates_to_the_owners(server, people):
    async with (
        me_socket(server, people.bob) as bob_ws,
        me_socket(server, people.alice) as alice_ws,
        server.async_client(people.bob) as bob,
    ):
        for ws in (bob_ws, alice_ws):
            await next_frame(ws, "waiting")
        created = await bob.post(
            "/api/conversations/",
            json={"workspace": "team", "title": "Budget", "agent": "scripted"},
        )
        cid = created.json()["id"]
        steps = [
            ask(kind="text", prompt="Which budget?", addressee="bob", timeout=8, escalate=True)
        ]
        await bob.post(f"/api/conversations/{cid}/turns/", json={"input": json.dumps(steps)})
        asked = await next_frame(bob_ws, "notice", kind="asked")
        reminded = await next_frame(bob_ws, "notice", kind="reminded")
        assert (reminded["selection"], reminded["prompt"]) == (asked["selection"], "Which budget?")
        escalated = await next_frame(alice_ws, "notice", kind="escalated")
        assert escalated["selection"] == asked["selection"]
        # Alice, an owner, answers what Bob left waiting.
        async with server.async_client(people.alice) as alice:
            answered = await alice.post(
                f"/api/selections/{asked['selection']}/reply/", json={"answer": "Q3"}
            )
            assert answered.status_code == 200, answered.text
            stored = answered.json()
            assert stored["reminded_at"] is not None and stored["escalated_at"] is not None
    with server.client(people.bob) as client:
        wait_for_turn_end(client, cid)
        events = all_events(client, cid)
    kinds = [e["type"] for e in events]
    assert kinds.index("selection.reminded") < kinds.index("selection.escalated")
    assert kinds.index("selection.escalated") < kinds.index("selection.resolved")
    reminder = next(e for e in events if e["type"] == "selection.reminded")
    escalation = next(e for e in events if e["type"] == "selection.escalated")
    assert reminder["data"] == {
        "selection": asked["selection"],
        "to": [{"id": people.bob.user.pk, "username": "bob", "name": "Bob"}],
    }
    assert [p["username"] for p in escalation["data"]["to"]] == ["alice"]
    # The turn had left memory while it waited: the answer brought it back.
    assert "turn.resumed" in kinds
    said = [e["data"]["text"] for e in events if e["type"] == "message.completed"]
    assert json.loads(said[-1])["value"] == "Q3"


def test_a_question_for_nobody_reminds_every_member_and_escalates_only_when_asked(
    server, people, admin_client
):
    with server.client(people.alice) as alice:
        question = ask_in_new_conversation(alice, "Lunch", kind="text", timeout=6)
        wait_until(
            lambda: any(
                e["type"] == "selection.reminded"
                for e in all_events(alice, question["conversation"])
            ),
            what="the reminder",
        )
        wait_for_turn_end(alice, question["conversation"])
        events = all_events(alice, question["conversation"])
    reminder = next(e for e in events if e["type"] == "selection.reminded")
    # The members and owners, not the viewer; once.
    assert [p["username"] for p in reminder["data"]["to"]] == ["alice", "bob"]
    assert [e["type"] for e in events].count("selection.reminded") == 1
    assert "selection.escalated" not in [e["type"] for e in events]
    expired = next(e for e in events if e["type"] == "selection.resolved")
    assert expired["data"]["status"] == "expired"
    # The admin shows it was reminded, not escalated.
    page = admin_client.get("/admin/selection/selection/", {"reminded_at__isempty": "0"})
    assert question["id"] in page.text
    assert ">reminded<" in page.text
    escalated = admin_client.get("/admin/selection/selection/", {"escalated_at__isempty": "0"})
    assert question["id"] not in escalated.text
