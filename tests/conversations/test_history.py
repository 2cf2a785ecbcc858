"""A conversation's history a few whole turns at a time, the newest first (how a page loads a
long conversation), through a real Daphne."""

import json

import pytest

from tests.conftest import all_events, wait_for_turn_end
from tests.helpers import ask, create_conversation, start, wait_pending

pytestmark = pytest.mark.django_db(transaction=True)


def history(client, cid, **params) -> dict:
    response = client.get(f"/api/conversations/{cid}/history/", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def turns_of(events) -> list[str]:
    return list(dict.fromkeys(event["turn"] for event in events))


def test_history_pages_back_through_whole_turns_without_finished_deltas(server, people):
    with server.client(people.alice) as alice:
        cid = create_conversation(alice, title="Long")
        first = start(alice, cid, [{"say": "One, quite a long first answer."}])
        wait_for_turn_end(alice, cid)
        steered = start(alice, cid, [{"say": "Before the steer."}, {"await_steering": 20}])
        alice.post(
            f"/api/conversations/{cid}/steer/", json={"expected_turn_id": steered, "input": "go"}
        )
        wait_for_turn_end(alice, cid)
        third = start(alice, cid, [{"say": "Three."}])
        wait_for_turn_end(alice, cid)
        # The latest turn is still running: it is given whole, text deltas included.
        running = start(alice, cid, [{"say": "Asking now."}, ask(kind="text")])
        wait_pending(alice, cid)
        everything = all_events(alice, cid)

        latest = history(alice, cid, turns=3)
        assert turns_of(latest["events"]) == [steered, third, running]
        assert latest["first_turn"] == steered and latest["has_earlier"] is True
        assert latest["latest_seq"] == everything[-1]["seq"]
        deltas = {e["turn"] for e in latest["events"] if e["type"] == "message.delta"}
        # The finished turn's deltas are left out; the steered one keeps them (its message was
        # split where the steer came), as does the running one.
        assert deltas == {steered, running}

        earlier = history(alice, cid, turns=3, before_turn=latest["first_turn"])
        assert turns_of(earlier["events"]) == [first]
        assert earlier["has_earlier"] is False
        assert [e["type"] for e in earlier["events"]] == [
            "turn.started",
            "message.completed",
            "turn.completed",
        ]
        # Together, the pages hold every event but the finished turns' deltas, once, in order.
        kept = [
            e
            for e in everything
            if not (e["type"] == "message.delta" and e["turn"] in (first, third))
        ]
        assert earlier["events"] + latest["events"] == kept
        said = [e for e in earlier["events"] if e["type"] == "message.completed"]
        assert said[0]["data"]["text"] == "One, quite a long first answer."

        # A budget of events: fewer turns when they are long, but always one.
        one = history(alice, cid, events=1)
        assert (turns_of(one["events"]), one["has_earlier"]) == ([running], True)
        fits = len(latest["events"]) - len(turns_of(latest["events"])) + 1
        two = history(alice, cid, events=fits)
        assert turns_of(two["events"]) == [third, running]
        assert history(alice, cid, turns=1)["events"][0]["data"]["input"] == json.dumps(
            [{"say": "Asking now."}, ask(kind="text")]
        )


def test_history_refuses_bad_pages_and_strangers(server, people):
    with server.client(people.alice) as alice:
        cid = create_conversation(alice, title="Mine")
        other = create_conversation(alice, title="Other")
        turn = start(alice, other, [{"say": "Elsewhere."}])
        wait_for_turn_end(alice, other)
        for params, code in [
            ({"turns": 0}, "invalid_turns"),
            ({"turns": 101}, "invalid_turns"),
            ({"turns": "many"}, "invalid_turns"),
            ({"before_turn": turn}, "invalid_before_turn"),
            ({"events": 0}, "invalid_events"),
        ]:
            response = alice.get(f"/api/conversations/{cid}/history/", params=params)
            assert response.status_code == 400, params
            assert response.json()["error"]["code"] == code, response.text
        assert history(alice, cid) == {
            "events": [],
            "latest_seq": 0,
            "first_turn": None,
            "has_earlier": False,
        }
    with server.client(people.carol) as carol:
        assert history(carol, other)["first_turn"] == turn  # a viewer reads it too
    with server.client(people.dave) as dave:
        assert dave.get(f"/api/conversations/{cid}/history/").status_code == 404
