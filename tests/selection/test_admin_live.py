"""The admin answers, expires and cancels questions, and stops turns, through the same services
as REST and the socket (driven through a real Daphne, as an admin's browser would)."""

import asyncio
import json

import pytest
from django.contrib.admin.utils import quote

from tests.conftest import all_events, receive_json, wait_for_turn_end
from tests.helpers import (
    answer_in_admin,
    ask,
    create_conversation,
    message_after,
    outcomes,
    reply,
    run_admin_action,
    shown,
    start,
    wait_pending,
)


def normalized(events):
    """Events without what differs between runs (ids, times, seq offsets)."""
    keep = []
    for event in events:
        data = json.loads(
            json.dumps(event["data"])
            .replace(event["conversation"], "C")
            .replace(event["turn"], "T")
        )
        if event["type"] in ("selection.requested",):
            data = {k: v for k, v in data.items() if k not in ("id", "created_at", "expires_at")}
        if event["type"] == "selection.resolved":
            data.pop("selection")
        keep.append((event["type"], data))
    return keep


def test_the_same_answer_from_rest_the_socket_and_the_admin_gives_the_same_events(
    server, people, admin
):
    question = [ask(kind="path", mode="file", root="reports"), {"say": "thanks"}]
    histories = {}
    with server.client(people.alice) as client:
        for how in ("rest", "socket", "admin"):
            cid = create_conversation(client, title=how)
            start(client, cid, question)
            sid = wait_pending(client, cid)["id"]
            if how == "rest":
                assert reply(client, sid, answer="q3-summary.md").status_code == 200
            elif how == "socket":

                async def answer_on_socket(cid=cid, sid=sid):
                    async with server.connect(cid, people.alice) as ws:
                        await receive_json(ws)
                        await ws.send(
                            json.dumps(
                                {
                                    "type": "selection.reply",
                                    "ref": "a",
                                    "selection_id": sid,
                                    "answer": "q3-summary.md",
                                }
                            )
                        )
                        while (frame := await receive_json(ws)).get("type") != "ws.ack":
                            assert frame.get("type") != "ws.error", frame
                        return frame

                assert asyncio.run(answer_on_socket())["status"] == "answered"
            else:
                done = answer_in_admin(admin, sid, path="q3-summary.md")
                assert message_after(admin, done) == "Question “Well?” answered: q3-summary.md."
            wait_for_turn_end(client, cid)
            histories[how] = normalized(all_events(client, cid))
    # The same events, but for where each answer was given.
    vias = {}
    for how, history in histories.items():
        vias[how] = dict(history)["selection.resolved"].pop("answered_via")
    assert vias == {"rest": "api", "socket": "socket", "admin": "admin"}
    assert histories["rest"] == histories["socket"] == histories["admin"]
    resolved = dict(histories["rest"])["selection.resolved"]
    assert resolved["answer"] == "q3-summary.md" and resolved["answered_by"]["username"] == "alice"


def test_the_admin_refuses_a_bad_answer_and_leaves_the_question_pending(server, people, admin):
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [ask(kind="path", mode="file", root="reports"), {"say": "after"}])
        sid = wait_pending(client, cid)["id"]
        page = answer_in_admin(admin, sid, path="../README.md")
        assert page.status_code == 200
        assert "answer: The path may not contain '..'." in shown(page)
        assert client.get(f"/api/selections/{sid}/").json()["status"] == "pending"
        assert "selection.resolved" not in [e["type"] for e in all_events(client, cid)]
        assert answer_in_admin(admin, sid, path="q4-plan.md").status_code == 302
        wait_for_turn_end(client, cid)
        events = all_events(client, cid)
    assert outcomes(events) == [{"status": "answered", "value": "q4-plan.md", "by": "alice"}]
    assert events[-1]["type"] == "turn.completed"


@pytest.mark.parametrize(
    "action, status, by",
    [
        ("expire_selected", "expired", None),
        ("dismiss_selected", "dismissed", "alice"),
        # Django's bulk delete: removing a pending question cancels it.
        ("delete_selected", "cancelled", "alice"),
    ],
)
def test_admin_actions_expire_dismiss_or_cancel_questions_and_the_turn_goes_on(
    server, people, admin, action, status, by
):
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [ask(kind="text"), {"say": "after"}])
        sid = wait_pending(client, cid)["id"]
        done = run_admin_action(admin, "/admin/selection/selection/", action, [sid])
        assert message_after(admin, done) == f"Question “Well?” {status}."
        wait_for_turn_end(client, cid)
        events = all_events(client, cid)
        assert client.get(f"/api/selections/{sid}/").json()["status"] == status
    assert outcomes(events) == [{"status": status, "value": None, "by": by}]
    said = [e["data"]["text"] for e in events if e["type"] == "message.completed"]
    assert said[-1] == "after" and events[-1]["type"] == "turn.completed"


def test_the_admin_stops_a_parked_turn(server, people, admin):
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        turn = start(client, cid, [ask(kind="text")])
        sid = wait_pending(client, cid)["id"]
        done = run_admin_action(admin, "/admin/conversations/turn/", "stop_selected", [turn])
        assert done.status_code == 302
        wait_for_turn_end(client, cid)
        events = all_events(client, cid)
        assert client.get(f"/api/selections/{sid}/").json()["status"] == "cancelled"
    assert [e["type"] for e in events][-2:] == ["selection.resolved", "turn.cancelled"]
    assert events[-1]["data"]["by"]["username"] == "alice"


def test_admin_pages_show_questions_with_filters(server, people, admin):
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [ask(kind="choice", options=["x", "y"])])
        sid = wait_pending(client, cid)["id"]
        listing = admin.get("/admin/selection/selection/?status__exact=pending&kind__exact=choice")
        assert listing.status_code == 200 and sid in listing.text
        assert "Select question to change" in listing.text
        assert sid not in admin.get("/admin/selection/selection/?status__exact=answered").text
        detail = admin.get(f"/admin/selection/selection/{quote(sid)}/change/")
        assert "Answer this question" in detail.text and "Change question" in detail.text
        reply(client, sid, answer="y")
        wait_for_turn_end(client, cid)
