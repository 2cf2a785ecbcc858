"""The agent backed by a model resumes from its journal: its model replies are recorded, so a
resumed turn replays them instead of calling the model again (see test_openai_agent.py)."""

import json

from tests import llm_server as llm
from tests.conftest import all_events, kill, wait_until
from tests.helpers import (
    create_model_conversation,
    finished,
    last_tool_result,
    of_type,
    reply,
    start_model_turn,
    tool_messages,
    wait_pending,
)


def test_a_turn_parked_on_the_models_question_resumes_after_a_restart_without_asking_again(
    start_parley, model, people
):
    model.script(
        llm.tool_calls(("read_file", {"path": "README.md"})),
        # A question refused before it is asked (no such person), told to the model.
        llm.tool_calls(("ask_text", {"prompt": "Who?", "addressee": "ghost"})),
        llm.tool_calls(
            (
                "ask_choice",
                {
                    "prompt": "Which?",
                    "options": [{"label": "One", "value": "1"}, {"label": "Two", "value": "2"}],
                },
            ),
            content="I need to know. ",
        ),
        llm.text("You chose two."),
    )
    first = start_parley()
    with first.client(people.bob) as client:
        cid = create_model_conversation(client)
        start_model_turn(client, cid, "Pick one")
        question = wait_pending(client, cid)
    kill(first)
    second = start_parley(PARLEY_TURN_LEASE_SECONDS="3")
    with second.client(people.bob) as client:
        assert reply(client, question["id"], answer="2").status_code == 200
        events = finished(client, cid, timeout=60)
    assert events[-1]["type"] == "turn.completed"
    assert of_type(events, "turn.resumed")
    # The replies before the question were replayed from the journal (the file's content and
    # the refused question with them), not asked of the model again.
    assert len(model.requests) == 4
    assert "cannot answer questions" in last_tool_result(model.requests[2])["error"]
    assert last_tool_result(model.requests[3])["answer"] == "2"
    assert json.loads(tool_messages(model.requests[3])[0]["content"])["path"] == "README.md"
    texts = [e["data"]["text"] for e in of_type(events, "message.completed")]
    assert texts == ["I need to know. ", "You chose two."]
    assert "".join(d["data"]["text"] for d in of_type(events, "message.delta")) == (
        "I need to know. You chose two."
    )


def test_a_reply_cut_by_a_crash_keeps_what_it_streamed_and_the_model_is_asked_again(
    start_parley, model, people
):
    model.script(llm.held("The first half"), llm.text("A whole new answer."))
    first = start_parley()
    with first.client(people.alice) as client:
        cid = create_model_conversation(client)
        start_model_turn(client, cid)
        wait_until(
            lambda: (
                "".join(
                    e["data"]["text"] for e in of_type(all_events(client, cid), "message.delta")
                )
                == "The first half"
            ),
            what="the first half stored",
        )
    kill(first)
    second = start_parley(PARLEY_TURN_LEASE_SECONDS="3")
    with second.client(people.alice) as client:
        events = finished(client, cid, timeout=60)
    assert events[-1]["type"] == "turn.completed"
    assert of_type(events, "turn.resumed")
    texts = [e["data"]["text"] for e in of_type(events, "message.completed")]
    assert texts == ["The first half", "A whole new answer."]
    assert "".join(d["data"]["text"] for d in of_type(events, "message.delta")) == (
        "The first halfA whole new answer."
    )
    assert len(model.requests) == 2
    assert model.requests[1]["messages"] == model.requests[0]["messages"]
