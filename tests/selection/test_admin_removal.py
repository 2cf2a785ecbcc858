"""Questions are their turn's record: removing a pending one in the admin cancels it (its turn is
told, and goes on), a settled one cannot be removed, and one whose row disappears anyway
(deleted by SQL) is taken as cancelled by its turn rather than failing it."""

import asyncio
import logging
from contextlib import closing

import pytest
from django.contrib.admin.utils import quote

from conversations.runtime.parking import parking
from selection.models import Selection
from tests.conftest import all_events, wait_for_turn_end
from tests.helpers import (
    admin_of,
    ask,
    create_conversation,
    message_after,
    outcomes,
    post_form,
    reply,
    run_admin_action,
    shown,
    start,
    wait_pending,
)

QUESTIONS = "/admin/selection/selection/"


@pytest.fixture
def admin(server, people):
    with closing(admin_of(server, people)) as client:
        yield client


def test_deleting_a_pending_question_cancels_it_and_its_turn_goes_on(server, people, admin):
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [ask(kind="text", prompt="Which database?"), {"say": "after"}])
        sid = wait_pending(client, cid)["id"]
        delete = f"{QUESTIONS}{quote(sid)}/delete/"
        page = admin.get(delete)
        assert page.status_code == 200 and "Cancel the question “Which database?”?" in shown(page)
        done = post_form(admin, delete, {"post": "yes"})
        assert (
            message_after(admin, done) == "Question “Which database?” cancelled; its turn goes on."
        )
        wait_for_turn_end(client, cid)
        events = all_events(client, cid)
        stored = client.get(f"/api/selections/{sid}/").json()
    assert stored["status"] == "cancelled" and stored["answered_by"]["username"] == "alice"
    assert outcomes(events) == [{"status": "cancelled", "value": None, "by": "alice"}]
    assert events[-1]["type"] == "turn.completed"
    # Settled, it is the record: no Delete on its page, and its delete page is refused.
    assert admin.get(delete).status_code == 403
    change = admin.get(f"{QUESTIONS}{quote(sid)}/change/")
    assert change.status_code == 200 and "/delete/" not in change.text


def test_deleting_selected_questions_cancels_the_pending_and_keeps_the_settled(
    server, people, admin
):
    with server.client(people.bob) as client:
        settled_in, pending_in = create_conversation(client), create_conversation(client)
        start(client, settled_in, [ask(kind="text", prompt="Name?")])
        settled = wait_pending(client, settled_in)["id"]
        assert reply(client, settled, answer="Bob").status_code == 200
        wait_for_turn_end(client, settled_in)
        start(client, pending_in, [ask(kind="text", prompt="Colour?"), {"say": "after"}])
        pending = wait_pending(client, pending_in)["id"]
        done = run_admin_action(admin, QUESTIONS, "delete_selected", [settled, pending])
        assert message_after(admin, done) == (
            "Question “Colour?” cancelled. 1 question already settled: left as it was."
        )
        wait_for_turn_end(client, pending_in)
        events = all_events(client, pending_in)
    assert outcomes(events) == [{"status": "cancelled", "value": None, "by": "alice"}]
    assert events[-1]["type"] == "turn.completed"
    statuses = dict(Selection.objects.values_list("pk", "status"))
    assert statuses == {settled: "answered", pending: "cancelled"}  # both kept


def test_a_question_deleted_by_sql_is_taken_as_cancelled_and_the_turn_goes_on(make_server, people):
    server = make_server(PARLEY_SELECTION_POLL_SECONDS="0.2")
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [ask(kind="text"), {"say": "after"}])
        sid = wait_pending(client, cid)["id"]
        assert Selection.objects.filter(pk=sid).delete()[0] == 1
        wait_for_turn_end(client, cid)
        events = all_events(client, cid)
    assert outcomes(events) == [{"status": "cancelled", "value": None, "by": None}]
    said = [e["data"]["text"] for e in events if e["type"] == "message.completed"]
    assert said[-1] == "after" and events[-1]["type"] == "turn.completed"
    assert f"WARNING selection.selectors: Question {sid} no longer exists" in server.log_text()


@pytest.mark.django_db(transaction=True)
async def test_a_resumed_turn_whose_question_is_gone_takes_it_as_cancelled(caplog):
    # What a resumed turn does for a question it had asked before (see TurnContext.ask).
    with caplog.at_level(logging.WARNING, logger="selection.selectors"):
        outcome = await asyncio.wait_for(
            parking.wait_again("s_gone", turn_id="t_gone", releasable=False), timeout=10
        )
    assert outcome == {
        "selection": "s_gone",
        "status": "cancelled",
        "answer": None,
        "answered_by": None,
    }
    assert caplog.records[-1].getMessage() == (
        "Question s_gone no longer exists; its turn takes it as cancelled"
    )
