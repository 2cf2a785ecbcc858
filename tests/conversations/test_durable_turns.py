"""Turns that outlive their process, on one real Daphne that is stopped and started again: a
parked question survives the restart, a killed turn resumes where it stopped, a journal that no
longer matches its agent fails cleanly, and long waits leave the process's memory."""

import json
import os
import random
from collections import Counter

import pytest
from django.utils import timezone

from conversations.models import TurnStep
from selection.models import Selection
from tests.conftest import all_events, kill, wait_for_turn_end, wait_until
from tests.helpers import (
    ONE_OF_EACH_KIND,
    ask,
    create_conversation,
    outcomes,
    reply,
    start,
    streamed_text,
    wait_pending,
)

TERMINAL = ("turn.completed", "turn.failed", "turn.cancelled")


def assert_whole(events: list[dict]) -> None:
    """Numbered 1..n with no gap, one terminal event, last; no tool call reported twice."""
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    types = [e["type"] for e in events]
    assert sum(t in TERMINAL for t in types) == 1 and types[-1] in TERMINAL, types
    for kind in ("tool.started", "tool.completed"):
        ids = Counter(e["data"]["id"] for e in events if e["type"] == kind)
        assert all(n == 1 for n in ids.values()), ids


# Each kind across a SIGTERM restart (the turn handed back), and one across a crash (SIGKILL).
RESTARTS = [(*kind, "sigterm") for kind in ONE_OF_EACH_KIND] + [(*ONE_OF_EACH_KIND[3], "sigkill")]


@pytest.mark.parametrize(
    "question, refused, answer, value, how", RESTARTS, ids=lambda k: str(k)[:24]
)
def test_a_question_pending_across_a_restart_is_answered_and_the_turn_goes_on(
    make_server, people, question, refused, answer, value, how
):
    first = make_server()
    with first.client(people.bob) as client:
        cid = create_conversation(client)
        turn = start(client, cid, [{"say": "Before the question. "}, question, {"say": "After."}])
        pending = wait_pending(client, cid)
    if how == "sigterm":
        first.stop()
    else:
        kill(first)
    second = make_server()
    with second.client(people.bob) as client:
        # Still pending, and still refusing a bad answer, from the process that never saw it.
        state = client.get(f"/api/conversations/{cid}/in-flight/").json()
        assert [q["id"] for q in state["pending_selections"]] == [pending["id"]]
        assert reply(client, pending["id"], answer=refused[0]).status_code == 400
        answered = reply(client, pending["id"], answer=answer)
        assert answered.status_code == 200, answered.text
        wait_for_turn_end(client, cid, timeout=60)
        events = all_events(client, cid)
    assert_whole(events)
    assert events[-1]["type"] == "turn.completed" and events[-1]["turn"] == turn
    ((status, got, by),) = [(o["status"], o["value"], o["by"]) for o in outcomes(events)]
    assert (status, got, by) == ("answered", value, "bob")
    assert streamed_text(events).count("Before the question. ") == 1
    assert [e["type"] for e in events].count("selection.requested") == 1
    (resumed,) = [e for e in events if e["type"] == "turn.resumed"]
    assert resumed["data"]["reason"] == "question_settled"
    assert resumed["seq"] > next(e["seq"] for e in events if e["type"] == "selection.resolved")


def test_a_turn_killed_mid_stream_resumes_without_repeating_its_text(
    make_server, people, flood_conversation
):
    first = make_server()
    client = first.client(people.alice)
    cid = flood_conversation.pk
    response = client.post(f"/api/conversations/{cid}/turns/", json={"input": "400 text every 5"})
    assert response.status_code == 202, response.text
    wait_until(
        lambda: len(all_events(client, cid)) > 20, what="the stream to get going", timeout=60
    )
    kill(first)
    second = make_server()
    client = second.client(people.alice)
    wait_for_turn_end(client, cid, timeout=90)
    events = all_events(client, cid)
    assert_whole(events)
    assert events[-1]["type"] == "turn.completed"
    words = " ".join(f"w{n}" for n in range(1, 401)) + " "
    assert streamed_text(events) == words
    (completed,) = [e for e in events if e["type"] == "message.completed"]
    assert completed["data"]["text"] == words
    (resumed,) = [e for e in events if e["type"] == "turn.resumed"]
    assert resumed["data"]["reason"] == "restart"


def test_a_turn_killed_in_a_tool_runs_that_tool_again_and_no_finished_one(
    make_server, people, files_root
):
    first = make_server()
    client = first.client(people.bob)
    cid = create_conversation(client)
    steps = [
        {"tool": "quick"},
        {"say": "Between the tools. "},
        {"tool": "slow", "hold": True},
        {"say": "Done."},
    ]
    start(client, cid, steps)
    runs = files_root / "tool-runs.log"
    # Killed once the slow tool runs and its start is stored (and so what came before it).
    wait_until(
        lambda: (
            runs.exists()
            and "slow" in runs.read_text()
            and any(e["data"].get("name") == "slow" for e in all_events(client, cid))
        ),
        60,
        "the slow tool",
    )
    kill(first)
    second = make_server()
    client = second.client(people.bob)
    wait_for_turn_end(client, cid, timeout=60)
    events = all_events(client, cid)
    assert_whole(events)
    assert events[-1]["type"] == "turn.completed"
    # The finished tool ran once; the one cut short ran again, under a new call id.
    assert runs.read_text().split() == ["quick", "slow", "slow"]
    tools = [(e["type"], e["data"]["name"], e["data"]["id"]) for e in events if "tool" in e["type"]]
    assert tools == [
        ("tool.started", "quick", "call_1"),
        ("tool.completed", "quick", "call_1"),
        ("tool.started", "slow", "call_2"),
        ("tool.completed", "slow", "call_2"),
        ("tool.started", "slow", "call_3"),
        ("tool.completed", "slow", "call_3"),
    ]
    interrupted = next(
        e for e in events if e["type"] == "tool.completed" and e["data"]["id"] == "call_2"
    )
    assert "Interrupted" in interrupted["data"]["error"]
    assert streamed_text(events).count("Between the tools. ") == 1
    assert '{"runs": 2}' in streamed_text(events)


def test_the_time_and_chance_a_turn_was_given_are_given_again_when_it_resumes(make_server, people):
    """ctx.now() and ctx.random() are recorded: a turn resumed after a restart replays what it
    said with them (matched against what is stored, so a new value would fail the turn), then
    goes on drawing where the recording left off."""
    script = [
        {"now": True},
        {"random": 3},
        # Read inside a step: the clock's and a generator of its own, the step's outcome recorded.
        {"now": True, "in_step": True},
        {"random": 2, "in_step": True},
        ask(kind="text"),
        {"now": True},
        {"random": 2},
    ]
    first = make_server()
    with first.client(people.bob) as client:
        cid = create_conversation(client)
        turn = start(client, cid, script)
        pending = wait_pending(client, cid)
    first.stop()
    second = make_server()
    with second.client(people.bob) as client:
        assert reply(client, pending["id"], answer="go on").status_code == 200
        wait_for_turn_end(client, cid, timeout=60)
        events = all_events(client, cid)
    assert_whole(events)
    assert events[-1]["type"] == "turn.completed"
    assert [e["type"] for e in events].count("turn.resumed") == 1
    said = [
        json.loads(e["data"]["text"])
        for e in events
        if e["type"] == "message.completed" and e["data"]["text"].startswith('{"')
    ]
    before_now, before_random, in_step_now, in_step_random, _answer, after_now, after_random = said
    assert streamed_text(events).count(json.dumps(before_random)) == 1
    # Times from the clock of each run, in order; draws that go on from the recorded seed.
    assert before_now["now"] <= in_step_now["now"] <= after_now["now"] <= timezone.now().isoformat()
    drawn = before_random["random"] + after_random["random"]
    assert len(set(drawn)) == 5 and all(0 <= x < 1 for x in drawn)
    steps = list(
        TurnStep.objects.filter(turn_id=turn, kind__in=["clock", "seed"]).values_list(
            "kind", "outcome"
        )
    )
    assert [kind for kind, _ in steps] == ["clock", "seed", "clock"]
    recorded = TurnStep.objects.filter(turn_id=turn, kind="step").values_list("outcome", flat=True)
    assert [o["value"] for o in recorded] == [in_step_now, in_step_random]
    assert steps[0][1] == {"value": before_now["now"]}
    seeded = random.Random(steps[1][1]["value"])
    assert [seeded.random() for _ in range(5)] == drawn
    assert not set(in_step_random["random"]) & set(drawn)


def test_a_journal_that_no_longer_matches_its_agent_fails_the_turn_cleanly(make_server, people):
    first = make_server()
    with first.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [{"say": "One. "}, ask(kind="text"), {"say": "Two."}])
        pending = wait_pending(client, cid)
    first.stop()
    # The agent's code changed meanwhile: it now greets first.
    agents = json.loads(os.environ["PARLEY_AGENTS"])
    second = make_server(
        PARLEY_AGENTS=json.dumps({**agents, "scripted": "tests.agents.ChangedScriptedAgent"})
    )
    with second.client(people.bob) as client:
        assert reply(client, pending["id"], answer="yes").status_code == 200
        wait_for_turn_end(client, cid, timeout=60)
        events = all_events(client, cid)
    assert_whole(events)
    failed = events[-1]
    assert failed["type"] == "turn.failed"
    assert "could not be resumed" in failed["data"]["error"]
    assert "no longer does what the turn had done" in failed["data"]["error"]
    # Nothing new was written in the past: after the answer, only the resume and the failure.
    answered_at = next(i for i, e in enumerate(events) if e["type"] == "selection.resolved")
    assert [e["type"] for e in events[answered_at + 1 :]] == ["turn.resumed", "turn.failed"]
    assert "Hello" not in streamed_text(events)


def test_long_waits_leave_memory_and_come_back_when_answered_or_expired(make_server, people):
    """With release after a moment, parked turns leave the process (its metrics show none in
    memory), and each comes back when its question is settled: answered, dismissed, expired
    (by upkeep, from the database), or ended by Stop."""
    server = make_server(PARLEY_RELEASE_PARKED_AFTER_SECONDS="0.2", PARLEY_TURN_LEASE_SECONDS="3")
    client = server.client(people.bob)
    turns = []
    for n in range(12):
        cid = create_conversation(client, title=f"Waiting {n}")
        start(client, cid, [{"say": f"Question {n}. "}, ask(kind="text", timeout=600)])
        turns.append((cid, wait_pending(client, cid)))

    def in_memory() -> tuple[float, float, float]:
        text = client.get("/metrics").text
        return tuple(
            float(line.split()[-1])
            for name in (
                "parley_turns_running ",
                "parley_questions_parked ",
                "parley_turns_released_total ",
            )
            for line in text.splitlines()
            if line.startswith(name)
        )

    # Each released at least once (on a loaded machine a lease of 3 s may lapse before a renewal,
    # and a turn taken over parks and is released again).
    def all_released() -> bool:
        running, parked, released = in_memory()
        return running == parked == 0.0 and released >= 12.0

    wait_until(all_released, 120, "every parked turn to be released")
    # The first question's time runs out while its turn is away (set here rather than asked
    # short, which a loaded machine could let run out before the turn is released).
    expiring, *rest = turns
    assert Selection.objects.filter(pk=expiring[1]["id"]).update(expires_at=timezone.now()) == 1
    for index, (cid, pending) in enumerate(rest):
        if index == 0:
            response = reply(client, pending["id"], action="dismiss")
        elif index == 1:
            response = client.post(
                f"/api/conversations/{cid}/cancel/",
                json={"turn_id": client.get(f"/api/conversations/{cid}/in-flight/").json()["turn"]},
            )
        else:
            response = reply(client, pending["id"], answer=f"answer {index}")
        assert response.status_code in (200, 202), response.text
    for n, (cid, _) in enumerate(turns):
        wait_for_turn_end(client, cid, timeout=60)
        events = all_events(client, cid)
        assert_whole(events)
        statuses = [o["status"] for o in outcomes(events)]
        if n == 0:
            assert statuses == ["expired"] and events[-1]["type"] == "turn.completed"
        elif n == 1:
            assert statuses == ["dismissed"]
        elif n == 2:
            assert events[-1]["type"] == "turn.cancelled"
            assert "turn.resumed" not in [e["type"] for e in events]
            continue
        else:
            assert outcomes(events)[0]["value"] == f"answer {n - 1}"
        assert streamed_text(events).count(f"Question {n}. ") == 1
        assert [e["data"]["reason"] for e in events if e["type"] == "turn.resumed"] == [
            "question_settled"
        ]
