"""Questions asked mid-turn, answered from REST and the socket, through a real Daphne."""

import asyncio
import json
import time

import pytest

from tests.conftest import all_events, events_until_terminal, receive_json, wait_for_turn_end
from tests.helpers import KINDS, ask, create_conversation, outcomes, reply, start, wait_pending

TERMINAL = ("turn.completed", "turn.failed", "turn.cancelled")


@pytest.mark.parametrize("question, refused, answer, value", KINDS, ids=lambda k: str(k)[:30])
def test_each_kind_refuses_a_bad_answer_then_resumes_with_a_good_one(
    server, people, question, refused, answer, value
):
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        turn = start(client, cid, [question])
        pending = wait_pending(client, cid)
        assert pending["kind"] == question["ask"]["kind"] and pending["status"] == "pending"
        bad_answer, says = refused
        bad = reply(client, pending["id"], answer=bad_answer)
        assert bad.status_code == 400
        assert bad.json()["error"]["code"] == "invalid_answer"
        assert says in bad.json()["error"]["message"]
        still = client.get(f"/api/selections/{pending['id']}/").json()
        assert still["status"] == "pending" and still["answer"] is None
        good = reply(client, pending["id"], answer=answer)
        assert good.status_code == 200, good.text
        assert (
            good.json()["status"] == "answered" and good.json()["answered_by"]["username"] == "bob"
        )
        wait_for_turn_end(client, cid)
        events = all_events(client, cid)
    assert outcomes(events) == [{"status": "answered", "value": value, "by": "bob"}]
    types = [e["type"] for e in events]
    assert types.count("selection.requested") == types.count("selection.resolved") == 1
    assert types.index("selection.requested") < types.index("selection.resolved")
    assert types[-1] == "turn.completed" and all(e["turn"] == turn for e in events)
    resolved = next(e for e in events if e["type"] == "selection.resolved")["data"]
    assert resolved == {
        "selection": pending["id"],
        "status": "answered",
        "answer": value,
        "answered_by": {"id": people.bob.user.pk, "username": "bob", "name": "Bob"},
        "answered_via": "api",
    }


async def test_of_simultaneous_replies_exactly_one_wins(server, people):
    async with server.async_client(people.alice) as alice, server.async_client(people.bob) as bob:
        cid = create_conversation(server.client(people.alice))
        await asyncio.to_thread(start, server.client(people.alice), cid, [ask(kind="text")])
        pending = await asyncio.to_thread(wait_pending, server.client(people.alice), cid)
        url = f"/api/selections/{pending['id']}/reply/"
        attempts = [
            (alice if n % 2 else bob).post(url, json={"answer": f"answer {n}"}) for n in range(10)
        ]
        responses = await asyncio.gather(*attempts)
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] + [409] * 9
    winner = next(r.json() for r in responses if r.status_code == 200)
    for loser in (r.json()["error"] for r in responses if r.status_code == 409):
        assert loser["code"] == "already_resolved"
        assert loser["answer"] == winner["answer"]
        assert loser["answered_by"] == winner["answered_by"]
    with server.client(people.alice) as client:
        wait_for_turn_end(client, cid)
        events = all_events(client, cid)
    assert [e["type"] for e in events].count("selection.resolved") == 1
    assert outcomes(events)[0]["value"] == winner["answer"]


def test_replies_to_unknown_resolved_and_expired_questions(server, people):
    with server.client(people.bob) as client:
        unknown = reply(client, "s_0000000000000000", answer="x")
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
        cid = create_conversation(client)
        start(client, cid, [ask(kind="text"), ask(kind="text", timeout=0.5)])
        first = wait_pending(client, cid)
        assert reply(client, first["id"], answer="one").status_code == 200
        again = reply(client, first["id"], answer="two")
        assert again.status_code == 409
        assert again.json()["error"] == {
            "code": "already_resolved",
            "message": "This question was already answered.",
            "status": "answered",
            "answer": "one",
            "answered_by": {"id": people.bob.user.pk, "username": "bob", "name": "Bob"},
            "answered_via": "api",
        }
        second = wait_pending(client, cid)
        time.sleep(0.7)
        late = reply(client, second["id"], answer="too late")
        assert late.status_code == 410 and late.json()["error"]["code"] == "selection_expired"
        wait_for_turn_end(client, cid)
        events = all_events(client, cid)
    assert [o["status"] for o in outcomes(events)] == ["answered", "expired"]
    assert events[-1]["type"] == "turn.completed"


def test_who_may_see_and_answer_questions(server, people):
    with server.client(people.alice) as alice:
        cid = create_conversation(alice)
        start(alice, cid, [ask(kind="path", mode="any", addressee="alice")])
        question = wait_pending(alice, cid)
    sid = question["id"]
    assert question["addressee"]["username"] == "alice"
    paths = {
        "read": ("get", f"/api/selections/{sid}/", None),
        "reply": ("post", f"/api/selections/{sid}/reply/", {"answer": "README.md"}),
        "browse": ("get", f"/api/selections/{sid}/browse/", None),
        "list": ("get", f"/api/selections/?conversation={cid}", None),
    }
    expected = {
        # stranger: nothing to see; viewer: may not answer; bob: a member it is not addressed to
        "dave": {"read": 404, "reply": 404, "browse": 404, "list": 404},
        "carol": {"read": 403, "reply": 403, "browse": 403, "list": 403},
        "bob": {"read": 200, "reply": 403, "browse": 403, "list": 200},
    }
    for who, statuses in expected.items():
        with server.client(getattr(people, who)) as client:
            for what, (method, url, body) in paths.items():
                response = getattr(client, method)(url, **({"json": body} if body else {}))
                assert response.status_code == statuses[what], (who, what, response.text)
                if what == "list" and response.status_code == 200:
                    assert response.json() == []  # bob may not answer it, so it is not his
            assert client.get("/api/selections/?status=pending").json() == []
    with server.client(people.alice) as alice:
        assert [s["id"] for s in alice.get("/api/selections/?status=pending").json()] == [sid]
        assert reply(alice, sid, answer="README.md").status_code == 200
        wait_for_turn_end(alice, cid)


def test_an_owner_may_answer_a_question_addressed_to_a_member(server, people):
    with server.client(people.bob) as bob, server.client(people.alice) as alice:
        cid = create_conversation(bob)
        start(bob, cid, [ask(kind="confirm", addressee="bob")])
        sid = wait_pending(bob, cid)["id"]
        assert [s["id"] for s in bob.get("/api/selections/?status=pending").json()] == [sid]
        assert reply(alice, sid, answer=True).status_code == 200
        wait_for_turn_end(bob, cid)
        assert outcomes(all_events(bob, cid)) == [
            {"status": "answered", "value": True, "by": "alice"}
        ]


def test_browse_lists_inside_the_root_only_while_pending(server, people, files_root):
    (files_root / "notes" / "drafts").mkdir()

    def size(name):
        return (files_root / "notes" / name).stat().st_size

    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [ask(kind="path", mode="file", root="notes"), ask(kind="text")])
        sid = wait_pending(client, cid)["id"]
        url = f"/api/selections/{sid}/browse/"
        listing = client.get(url).json()
        assert listing == {
            "selection": sid,
            "mode": "file",
            "path": "",
            "parent": None,
            "entries": [
                {
                    "name": "drafts",
                    "path": "drafts",
                    "kind": "folder",
                    "size": None,
                    "selectable": False,
                },
                {
                    "name": "ideas.md",
                    "path": "ideas.md",
                    "kind": "file",
                    "size": size("ideas.md"),
                    "selectable": True,
                },
                {
                    "name": "meeting-2026-11-02.md",
                    "path": "meeting-2026-11-02.md",
                    "kind": "file",
                    "size": size("meeting-2026-11-02.md"),
                    "selectable": True,
                },
            ],
        }
        inner = client.get(url, params={"path": "drafts"}).json()
        assert inner["path"] == "drafts" and inner["parent"] == "" and inner["entries"] == []
        for path, status, code in [
            ("..", 400, "invalid_path"),
            ("/etc", 400, "invalid_path"),
            ("ideas.md", 400, "invalid_path"),
            ("nowhere", 404, "not_found"),
        ]:
            response = client.get(url, params={"path": path})
            assert (response.status_code, response.json()["error"]["code"]) == (status, code), path
        assert reply(client, sid, answer="ideas.md").status_code == 200
        assert client.get(url).status_code == 409
        text_question = wait_pending(client, cid)["id"]
        refused = client.get(f"/api/selections/{text_question}/browse/")
        assert refused.json()["error"]["code"] == "not_a_path_question"
        reply(client, text_question, action="dismiss")
        wait_for_turn_end(client, cid)


def test_folder_questions_list_only_folders(server, people):
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [ask(kind="path", mode="folder")])
        sid = wait_pending(client, cid)["id"]
        entries = client.get(f"/api/selections/{sid}/browse/").json()["entries"]
        assert [e["name"] for e in entries] == ["data", "docs", "notes", "reports"]
        assert all(e["selectable"] for e in entries)
        reply(client, sid, action="decline")
        wait_for_turn_end(client, cid)
        assert outcomes(all_events(client, cid))[0]["status"] == "declined"


@pytest.mark.parametrize("how", ["rest", "socket"])
async def test_stop_while_parked_cancels_the_question_and_the_turn(server, people, how):
    client = server.client(people.bob)
    cid = create_conversation(client)
    async with server.connect(cid, people.alice) as ws:
        await receive_json(ws)
        turn = await asyncio.to_thread(start, client, cid, [ask(kind="text"), {"say": "never"}])
        sid = (await asyncio.to_thread(wait_pending, client, cid))["id"]
        if how == "rest":
            stop = await asyncio.to_thread(
                client.post, f"/api/conversations/{cid}/cancel/", json={"turn_id": turn}
            )
            assert stop.status_code == 202 and stop.json()["turn"] == turn
        else:
            await ws.send(json.dumps({"type": "turn.cancel", "ref": "stop", "turn_id": turn}))
        events = await events_until_terminal(ws, turn)
    types = [e["type"] for e in events]
    assert types[-2:] == ["selection.resolved", "turn.cancelled"]
    assert events[-2]["data"]["status"] == "cancelled" and events[-2]["data"]["selection"] == sid
    stopper = "bob" if how == "rest" else "alice"
    assert events[-1]["data"]["by"]["username"] == stopper
    assert not any(e["type"].startswith("message.") for e in events)  # it never went on
    assert client.get(f"/api/selections/{sid}/").json()["status"] == "cancelled"
    assert client.get(f"/api/conversations/{cid}/in-flight/").json()["in_flight"] is False
    again = client.post(f"/api/conversations/{cid}/cancel/", json={"turn_id": turn})
    assert again.status_code == 409 and again.json()["error"]["code"] == "no_active_turn"
    client.close()


def test_dismissed_and_expired_questions_let_the_turn_go_on(make_server, people):
    server = make_server(PARLEY_SELECTION_TIMEOUT_SECONDS="0.5")
    with server.client(people.bob) as client:
        cid = create_conversation(client, agent="builtin")
        start(client, cid, "summarize")
        sid = wait_pending(client, cid)["id"]
        assert reply(client, sid, action="dismiss").json()["status"] == "dismissed"
        wait_for_turn_end(client, cid)
        start(client, cid, "summarize")
        wait_for_turn_end(client, cid)
        events = all_events(client, cid)
    replies = [e["data"]["text"] for e in events if e["type"] == "message.completed"]
    assert replies == [
        "You closed the question, so I'll leave it there.",
        "Nobody answered in time, so I stopped there.",
    ]
    resolved = [e["data"]["status"] for e in events if e["type"] == "selection.resolved"]
    assert resolved == ["dismissed", "expired"]
    assert [e["type"] for e in events if e["type"] in TERMINAL] == ["turn.completed"] * 2


def test_non_interactive_turns_never_park(server, people):
    with server.client(people.bob) as client:
        cid = create_conversation(client, agent="builtin")
        start(client, cid, "summarize", interactive=False)
        wait_for_turn_end(client, cid)
        events = all_events(client, cid)
        scripted = create_conversation(client)
        start(client, scripted, [ask(kind="text"), ask(kind="confirm")], interactive=False)
        wait_for_turn_end(client, scripted)
        assert [o["status"] for o in outcomes(all_events(client, scripted))] == ["unavailable"] * 2
        assert client.get("/api/selections/").json() == []
    assert events[0]["data"]["interactive"] is False
    assert "nobody can answer in this turn" in events[-2]["data"]["text"]
    assert not any(e["type"].startswith("selection.") for e in events)


def test_steering_needs_the_active_turn_and_reaches_the_agent(server, people):
    with server.client(people.bob) as client, server.client(people.carol) as carol:
        cid = create_conversation(client)
        url = f"/api/conversations/{cid}/steer/"
        none = client.post(url, json={"expected_turn_id": "t_x", "input": "hi"})
        assert none.status_code == 409 and none.json()["error"]["code"] == "no_active_turn"
        turn = start(client, cid, [ask(kind="confirm"), {"steering": True}])
        sid = wait_pending(client, cid)["id"]
        wrong = client.post(url, json={"expected_turn_id": "t_other", "input": "hi"})
        assert wrong.status_code == 409
        assert wrong.json()["error"] == {
            "code": "turn_mismatch",
            "message": f"The active turn is {turn}, not t_other.",
            "turn": turn,
        }
        missing = client.post(url, json={"input": "hi"})
        assert (
            missing.status_code == 400 and "expected_turn_id" in missing.json()["error"]["message"]
        )
        assert carol.post(url, json={"expected_turn_id": turn, "input": "hi"}).status_code == 403
        steered = client.post(
            url, json={"expected_turn_id": turn, "input": "also check the budget"}
        )
        assert steered.status_code == 202 and steered.json()["turn"] == turn
        assert reply(client, sid, answer=True).status_code == 200
        wait_for_turn_end(client, cid)
        events = all_events(client, cid)
    steer_events = [e for e in events if e["type"] == "turn.steered"]
    assert [e["data"] for e in steer_events] == [
        {
            "input": "also check the budget",
            "by": {"id": people.bob.user.pk, "username": "bob", "name": "Bob"},
        }
    ]
    assert steer_events[0]["seq"] == steered.json()["seq"] and steer_events[0]["turn"] == turn
    said = [e["data"]["text"] for e in events if e["type"] == "message.completed"]
    assert json.loads(said[-1]) == {"steering": ["also check the budget"]}
    assert sum(e["type"] == "turn.started" for e in events) == 1


async def test_steering_over_the_socket(server, people):
    client = server.client(people.bob)
    cid = create_conversation(client)
    async with server.connect(cid, people.bob) as ws:
        await receive_json(ws)
        turn = await asyncio.to_thread(start, client, cid, [ask(kind="text"), {"steering": True}])
        sid = (await asyncio.to_thread(wait_pending, client, cid))["id"]
        await ws.send(
            json.dumps({"type": "turn.steer", "ref": "s", "expected_turn_id": "t_no", "input": "x"})
        )
        await ws.send(
            json.dumps(
                {"type": "turn.steer", "ref": "s2", "expected_turn_id": turn, "input": "faster"}
            )
        )
        await ws.send(
            json.dumps({"type": "selection.reply", "ref": "r", "selection_id": sid, "answer": "ok"})
        )
        frames = []
        while not frames or frames[-1].get("type") != "turn.completed":
            frames.append(await receive_json(ws))
    replies = {f["ref"]: f for f in frames if f.get("type") in ("ws.ack", "ws.error")}
    assert replies["s"]["type"] == "ws.error" and replies["s"]["code"] == "turn_mismatch"
    assert replies["s2"]["type"] == "ws.ack" and replies["s2"]["turn"] == turn
    assert replies["r"] == {"type": "ws.ack", "ref": "r", "selection": sid, "status": "answered"}
    said = [f["data"]["text"] for f in frames if f.get("type") == "message.completed"]
    assert json.loads(said[-1]) == {"steering": ["faster"]}
    client.close()


def test_a_reply_with_no_socket_open_and_a_socket_joining_later_sees_the_whole_story(
    server, people
):
    with server.client(people.bob) as client:
        cid = create_conversation(client, agent="builtin")
        start(client, cid, "summarize")
        sid = wait_pending(client, cid)["id"]
        reply(client, sid, answer="docs/architecture.md")
        state = wait_for_turn_end(client, cid)

    async def join():
        async with server.connect(cid, people.carol) as ws:
            ready = await receive_json(ws)
            return ready, await events_until_terminal(ws)

    ready, events = asyncio.run(join())
    assert ready["latest_seq"] == state["latest_seq"] and ready["in_flight"] is False
    assert [e["seq"] for e in events] == list(range(1, state["latest_seq"] + 1))
    types = [e["type"] for e in events]
    assert types[:3] == ["turn.started", "selection.requested", "selection.resolved"]
    assert events[1]["data"]["id"] == sid and events[2]["data"]["answer"] == "docs/architecture.md"
    assert "**docs/architecture.md**: " in events[-2]["data"]["text"]
    assert types[-1] == "turn.completed"


def test_a_turn_may_ask_only_so_many_questions(make_server, people):
    server = make_server(PARLEY_MAX_QUESTIONS_PER_TURN="2")
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [ask(kind="text", timeout=0.1)] * 3)
        wait_for_turn_end(client, cid)
        events = all_events(client, cid)
    assert [o["status"] for o in outcomes(events)] == ["expired", "expired", "limit_reached"]
    assert [e["type"] for e in events].count("selection.requested") == 2


def test_a_malformed_question_fails_the_turn_with_the_reason(server, people):
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [ask(kind="choice", options=[])])
        wait_for_turn_end(client, cid)
        events = all_events(client, cid)
    assert events[-1]["type"] == "turn.failed"
    assert events[-1]["data"]["error"] == "A choice needs 1 to 100 options."


@pytest.mark.parametrize(
    "body, code",
    [
        ({}, "invalid"),
        ({"answer": "x", "action": "dismiss"}, "invalid"),
        ({"action": "shrug"}, "invalid"),
    ],
)
def test_a_reply_needs_an_answer_or_an_action(server, people, body, code):
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [ask(kind="text")])
        sid = wait_pending(client, cid)["id"]
        response = reply(client, sid, **body)
        assert response.status_code == 400 and response.json()["error"]["code"] == code
        assert client.get(f"/api/selections/{sid}/").json()["status"] == "pending"
        reply(client, sid, action="dismiss")
        wait_for_turn_end(client, cid)


def test_a_turn_waits_as_awaiting_input_and_runs_again_once_answered(server, people):
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        turn = start(client, cid, [ask(kind="confirm"), {"sleep": 1.5}, {"say": "done"}])
        sid = wait_pending(client, cid)["id"]
        parked = client.get(f"/api/conversations/{cid}/in-flight/").json()
        assert (parked["turn"], parked["status"]) == (turn, "awaiting_input")
        assert reply(client, sid, answer=True).status_code == 200
        resumed = client.get(f"/api/conversations/{cid}/in-flight/").json()
        assert (resumed["turn"], resumed["status"], resumed["pending_selections"]) == (
            turn,
            "running",
            [],
        )
        wait_for_turn_end(client, cid)


async def test_answers_sent_the_moment_a_question_appears_resume_the_turn_at_once(
    make_server, people
):
    # With the periodic re-read out of reach, only the wake-up can resume the turn: an answer
    # that beats the turn to its parking spot must still be heard.
    server = make_server(PARLEY_SELECTION_POLL_SECONDS="600")
    client = server.client(people.bob)
    cid = create_conversation(client)
    async with server.connect(cid, people.bob) as ws:
        await receive_json(ws)
        script = [ask(kind="text")] * 5
        turn = await asyncio.to_thread(start, client, cid, script)
        answered = 0
        while True:
            frame = await receive_json(ws, timeout=10)
            if frame.get("type") == "selection.requested":
                answered += 1
                await ws.send(
                    json.dumps(
                        {
                            "type": "selection.reply",
                            "selection_id": frame["data"]["id"],
                            "answer": f"answer {answered}",
                        }
                    )
                )
            if frame.get("type") in TERMINAL:
                break
    assert frame == {**frame, "type": "turn.completed", "turn": turn}
    said = outcomes(await asyncio.to_thread(all_events, client, cid))
    assert [o["value"] for o in said] == [f"answer {n}" for n in range(1, 6)]
    client.close()


def test_a_workspace_made_without_a_folder_gets_one_when_its_agent_first_runs(
    server, people, settings
):
    folder = settings.PARLEY_FILES_ROOT / people.other_workspace.slug
    assert not folder.exists()
    with server.client(people.dave) as client:
        response = client.post(
            "/api/conversations/", json={"workspace": "other", "title": "Fresh", "agent": "builtin"}
        )
        cid = response.json()["id"]
        start(client, cid, "summarize")
        question = wait_pending(client, cid)
        assert (question["kind"], question["root"]) == ("path", "")
        assert client.get(f"/api/selections/{question['id']}/browse/").json()["entries"] == []
        reply(client, question["id"], action="dismiss")
        wait_for_turn_end(client, cid)
    assert folder.is_dir()


def test_an_agent_reads_the_earlier_turns_as_its_history(server, people):
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [{"say": "First reply."}, {"say": "Second message."}])
        wait_for_turn_end(client, cid)
    with server.client(people.alice) as client:
        start(client, cid, [{"history": True}])
        wait_for_turn_end(client, cid)
        said = [
            e["data"]["text"] for e in all_events(client, cid) if e["type"] == "message.completed"
        ]
    assert json.loads(said[-1]) == {
        "history": [
            {
                "input": json.dumps([{"say": "First reply."}, {"say": "Second message."}]),
                "by": "bob",
                "reply": "First reply.\n\nSecond message.",
                "status": "completed",
            }
        ]
    }
