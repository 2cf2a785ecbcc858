"""The agent backed by a model over the OpenAI protocol, through a real Daphne talking to a
local server that speaks that protocol (tests/llm_server.py) with the official SDK as client:
streaming, tools, questions, steering, Stop, retries, errors and history."""

import asyncio
import json
import socket
from datetime import datetime

import pytest

from conversations.questions import OPTION
from tests import llm_server as llm
from tests.conftest import LLM_KEY as KEY
from tests.conftest import all_events, receive_json, wait_until
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

# About the agent and the protocol, not the database: run once, in the SQLite pass (the tests
# of its resuming, in test_openai_agent_resume.py, run on both).
pytestmark = pytest.mark.once


def test_a_plain_answer_streams_as_it_arrives_and_counts_its_tokens(start_parley, model, people):
    model.script(llm.text("Hello, team. Here is the answer.", usage=(42, 7)))
    server = start_parley()
    with server.client(people.alice) as client:
        cid = create_model_conversation(client)
        start_model_turn(client, cid, "Say hello")
        events = finished(client, cid)
        page = client.get(f"/conversations/{cid}/").text
    deltas = of_type(events, "message.delta")
    assert "".join(d["data"]["text"] for d in deltas) == "Hello, team. Here is the answer."
    assert of_type(events, "message.completed")[0]["data"]["text"] == (
        "Hello, team. Here is the answer."
    )
    assert events[-1]["type"] == "turn.completed"
    assert events[-1]["data"]["usage"] == {
        "prompt_tokens": 42,
        "completion_tokens": 7,
        "total_tokens": 49,
    }
    (request,) = model.requests
    assert request["model"] == "gpt-test" and request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    assert request["messages"][-1]["content"] == "Say hello"
    assert "alice" in request["messages"][0]["content"]
    assert {t["function"]["name"] for t in request["tools"]} >= {
        "list_files",
        "read_file",
        "search_files",
        "write_file",
        "rename_file",
        "ask_choice",
        "ask_path",
        "ask_text",
        "ask_confirm",
        "ask_form",
    }
    assert model.headers[0]["authorization"] == f"Bearer {KEY}"
    # The key goes to the model server and nowhere else.
    assert KEY not in json.dumps(events) and KEY not in page and KEY not in server.log_text()


@pytest.mark.parametrize("index_zero", [False, True], ids=["openai", "every call at index 0"])
def test_tool_calls_split_over_chunks_run_and_their_results_go_back_to_the_model(
    start_parley, model, people, index_zero
):
    model.script(
        llm.tool_calls(
            ("read_file", {"path": "README.md"}),
            ("list_files", {"path": "notes"}),
            content="Let me look.",
            index_zero=index_zero,
        ),
        llm.text("The README welcomes the team."),
    )
    server = start_parley()
    with server.client(people.alice) as client:
        cid = create_model_conversation(client)
        start_model_turn(client, cid, "What does the README say?")
        events = finished(client, cid)
    started = of_type(events, "tool.started")
    completed = of_type(events, "tool.completed")
    assert [(e["data"]["name"], e["data"]["arguments"]) for e in started] == [
        ("read_file", {"path": "README.md"}),
        ("list_files", {"path": "notes"}),
    ]
    readme = (people.workspace.files_root / "README.md").read_text()
    assert completed[0]["data"]["result"]["content"] == readme
    assert "ideas.md" in {entry["name"] for entry in completed[1]["data"]["result"]["entries"]}
    texts = [e["data"]["text"] for e in of_type(events, "message.completed")]
    assert texts == ["Let me look.", "The README welcomes the team."]
    assert events[-1]["type"] == "turn.completed"
    _, second = model.wait_requests(2)
    assistant = second["messages"][-3]
    assert assistant["role"] == "assistant" and assistant["content"] == "Let me look."
    calls = assistant["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["read_file", "list_files"]
    results = tool_messages(second)
    assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls]
    assert json.loads(results[0]["content"])["content"] == readme


ASKS = [
    # (tool, its arguments, the answer people give, what the model is told it got)
    (
        "ask_choice",
        {
            "prompt": "Which colour?",
            "options": [
                {"label": "Red", "value": "red"},
                {"label": "Green", "value": "green", "description": "like grass"},
            ],
        },
        "green",
        "green",
    ),
    (
        "ask_path",
        {"prompt": "Which note?", "mode": "file", "root": "notes"},
        "ideas.md",
        "ideas.md",
    ),
    ("ask_text", {"prompt": "Your name?"}, "Bob", "Bob"),
    ("ask_confirm", {"prompt": "Go ahead?"}, True, True),
    (
        "ask_form",
        {
            "prompt": "The release",
            "schema": {
                "type": "object",
                "properties": {"title": {"type": "string"}, "count": {"type": "integer"}},
                "required": ["title"],
            },
        },
        {"title": "Spring", "count": 3},
        {"title": "Spring", "count": 3},
    ),
]


@pytest.mark.parametrize("channel", ["rest", "socket"])
def test_each_ask_tool_is_a_question_whose_answer_goes_back_to_the_model(
    start_parley, model, people, channel
):
    model.script(
        *(llm.tool_calls((tool, arguments)) for tool, arguments, _, _ in ASKS),
        llm.text("Thank you."),
    )
    server = start_parley()

    async def answer_on_the_socket(cid, question_id, answer):
        async with server.connect(cid, people.bob) as ws:
            frame = {"type": "selection.reply", "ref": "r", "selection_id": question_id}
            await ws.send(json.dumps({**frame, "answer": answer}))
            while (ack := await receive_json(ws))["type"] != "ws.ack":
                pass
            assert ack["status"] == "answered", ack

    with server.client(people.bob) as client:
        cid = create_model_conversation(client)
        start_model_turn(client, cid, "Ask us things")
        asked = []
        for number, (tool, arguments, answer, _) in enumerate(ASKS, start=1):
            question = wait_until(
                lambda n=number: (p := wait_pending(client, cid)) and p["ordinal"] == n and p,
                what=f"question {number}",
            )
            assert question["kind"] == tool.removeprefix("ask_")
            assert question["prompt"] == arguments["prompt"]
            asked.append(question)
            if channel == "rest":
                assert reply(client, question["id"], answer=answer).status_code == 200
            else:
                asyncio.run(answer_on_the_socket(cid, question["id"], answer))
        events = finished(client, cid)
    assert asked[0]["options"][1]["description"] == "like grass"
    assert asked[1]["root"] == "notes"
    assert events[-1]["type"] == "turn.completed"
    requests = model.wait_requests(len(ASKS) + 1)
    for request, (_, _, _, told) in zip(requests[1:], ASKS, strict=True):
        assert last_tool_result(request) == {
            "status": "answered",
            "answer": told,
            "answered_by": "bob",
        }


def test_a_dismissed_and_an_expired_question_reach_the_model(start_parley, model, people):
    model.script(
        llm.tool_calls(("ask_text", {"prompt": "Anything to add?"})),
        llm.tool_calls(("ask_confirm", {"prompt": "Quick, yes or no?", "timeout": 1})),
        llm.text("Nobody answered; I will go on without."),
    )
    server = start_parley(PARLEY_TURN_LEASE_SECONDS="3")
    with server.client(people.bob) as client:
        cid = create_model_conversation(client)
        start_model_turn(client, cid)
        question = wait_pending(client, cid)
        assert reply(client, question["id"], action="dismiss").status_code == 200
        events = finished(client, cid)
    assert events[-1]["type"] == "turn.completed"
    _, second, third = model.wait_requests(3)
    assert last_tool_result(second)["status"] == "dismissed"
    assert last_tool_result(third)["status"] == "expired"
    assert "expired" in last_tool_result(third)["note"]


def test_the_model_is_told_the_date_and_its_options_need_no_value(start_parley, model, people):
    # ask_choice's schema comes from the question kinds' definition: an option's value is its
    # label when the model leaves it out.
    options = [{"label": "Red"}, {"label": "Green", "description": "like grass"}]
    model.script(
        llm.tool_calls(("ask_choice", {"prompt": "Which colour?", "options": options})),
        llm.text("Green it is."),
    )
    server = start_parley()
    with server.client(people.bob) as client:
        cid = create_model_conversation(client)
        start_model_turn(client, cid)
        question = wait_pending(client, cid)
        assert [o["value"] for o in question["options"]] == ["Red", "Green"]
        assert reply(client, question["id"], answer="Green").status_code == 200
        events = finished(client, cid)
    assert events[-1]["type"] == "turn.completed"
    first, second = model.wait_requests(2)
    assert last_tool_result(second)["answer"] == "Green"
    (ask_choice,) = [t for t in first["tools"] if t["function"]["name"] == "ask_choice"]
    assert ask_choice["function"]["parameters"]["properties"]["options"]["items"] == OPTION
    # The date, from ctx.now(): the day of the turn (its start's, or its end's past midnight).
    days = {datetime.fromisoformat(e["ts"].replace("Z", "+00:00")) for e in (events[0], events[-1])}
    told = first["messages"][0]["content"]
    assert any(f"Today is {day:%A %d %B %Y} (UTC)." in told for day in days), told


def test_steering_mid_stream_reaches_the_model_at_its_next_step(start_parley, model, people):
    first = llm.gated("I am reading", " the files now.")
    model.script(first, llm.text("Noted: in French from now on."))
    server = start_parley()
    with server.client(people.alice) as client:
        cid = create_model_conversation(client)
        turn = start_model_turn(client, cid, "Summarise the notes")
        assert first.started.wait(15)
        wait_until(lambda: of_type(all_events(client, cid), "message.delta"), what="some text")
        steered = client.post(
            f"/api/conversations/{cid}/steer/",
            json={"expected_turn_id": turn, "input": "Answer in French"},
        )
        assert steered.status_code == 202, steered.text
        first.release()
        events = finished(client, cid)
    assert events[-1]["type"] == "turn.completed"
    _, second = model.wait_requests(2)
    assert second["messages"][-2] == {
        "role": "assistant",
        "content": "I am reading the files now.",
    }
    assert second["messages"][-1] == {"role": "user", "content": "Answer in French"}


def test_stop_mid_stream_closes_the_model_connection(start_parley, model, people):
    held = llm.held("Thinking about it")
    model.script(held)
    server = start_parley()
    with server.client(people.alice) as client:
        cid = create_model_conversation(client)
        turn = start_model_turn(client, cid)
        assert held.started.wait(15)
        wait_until(lambda: of_type(all_events(client, cid), "message.delta"), what="some text")
        stopped = client.post(f"/api/conversations/{cid}/cancel/", json={"turn_id": turn})
        assert stopped.status_code in (200, 202), stopped.text
        assert held.closed_by_client.wait(15), "the model's stream was left open"
        events = finished(client, cid)
    assert events[-1]["type"] == "turn.cancelled"


def test_a_busy_model_server_is_tried_again_with_a_notice(start_parley, model, people):
    model.script(
        llm.rate_limited(),
        llm.error(503, "The server is overloaded", type="server_error"),
        llm.text("Here after all."),
    )
    server = start_parley()
    with server.client(people.alice) as client:
        cid = create_model_conversation(client)
        start_model_turn(client, cid)
        events = finished(client, cid)
    notices = of_type(events, "turn.notice")
    assert [n["data"]["kind"] for n in notices] == ["retry", "retry"]
    assert "429" in notices[0]["data"]["text"] and "1 s" in notices[0]["data"]["text"]
    assert "503" in notices[1]["data"]["text"]
    assert of_type(events, "message.completed")[0]["data"]["text"] == "Here after all."
    assert events[-1]["type"] == "turn.completed"
    assert len(model.requests) == 3


def test_a_model_server_that_stays_busy_fails_the_turn_after_its_retries(
    start_parley, model, people
):
    model.script(*(llm.error(500, "Internal error") for _ in range(3)))
    server = start_parley(PARLEY_LLM_MAX_RETRIES="2")
    with server.client(people.alice) as client:
        cid = create_model_conversation(client)
        start_model_turn(client, cid)
        events = finished(client, cid)
    assert len(of_type(events, "turn.notice")) == 2
    assert events[-1]["type"] == "turn.failed"
    assert events[-1]["data"]["error"] == "The model server failed (500) after 3 attempts."


@pytest.mark.parametrize(
    "env, reply_, says",
    [
        ({"PARLEY_LLM_API_KEY": "sk-wrong-key"}, None, "refused Parley's API key (401"),
        ({"PARLEY_LLM_MODEL": "gpt-nope"}, None, "no model named 'gpt-nope' (404)"),
        ({}, llm.malformed, "sent a reply Parley could not read"),
        ({"PARLEY_LLM_TIMEOUT_SECONDS": "1"}, llm.stalled, "did not answer within 1 seconds"),
    ],
    ids=["401", "unknown model", "malformed", "timeout"],
)
def test_a_model_server_error_fails_the_turn_with_a_message_people_understand(
    start_parley, model, people, env, reply_, says
):
    if reply_ is not None:
        model.script(reply_())
    server = start_parley(**env)
    with server.client(people.alice) as client:
        cid = create_model_conversation(client)
        start_model_turn(client, cid)
        events = finished(client, cid)
    assert events[-1]["type"] == "turn.failed"
    assert says in events[-1]["data"]["error"]
    assert "sk-wrong-key" not in json.dumps(events) and "sk-wrong-key" not in server.log_text()


def test_a_bad_tool_argument_goes_back_to_the_model_which_corrects_it(start_parley, model, people):
    model.script(
        llm.tool_calls(("read_file", {"paht": "README.md"})),
        llm.tool_calls(("read_file", '{"path": "README.md"')),
        llm.tool_calls(("read_file", {"path": "../outside.txt"})),
        llm.tool_calls(("read_file", {"path": ".git/config"})),
        llm.tool_calls(("read_file", {"path": "README.md"})),
        llm.text("Got it."),
    )
    server = start_parley()
    with server.client(people.alice) as client:
        cid = create_model_conversation(client)
        start_model_turn(client, cid)
        events = finished(client, cid)
    assert events[-1]["type"] == "turn.completed"
    completed = of_type(events, "tool.completed")
    assert [("error" in e["data"]) for e in completed] == [True, True, True, True, False]
    assert "'path' is a required property" in completed[0]["data"]["error"]
    assert "not JSON" in completed[1]["data"]["error"]
    assert "may not contain '..'" in completed[2]["data"]["error"]
    assert "Hidden files and folders" in completed[3]["data"]["error"]
    requests = model.wait_requests(6)
    assert "'path' is a required property" in last_tool_result(requests[1])["error"]
    assert "not JSON" in last_tool_result(requests[2])["error"]
    assert last_tool_result(requests[5])["path"] == "README.md"


def test_the_conversation_so_far_is_the_models_context(start_parley, model, people):
    model.script(
        llm.tool_calls(("ask_text", {"prompt": "Which release?"})),
        llm.text("Release Spring it is."),
        llm.text("We chose Spring earlier."),
    )
    server = start_parley()
    with server.client(people.bob) as client:
        cid = create_model_conversation(client)
        start_model_turn(client, cid, "Plan the release")
        question = wait_pending(client, cid)
        assert reply(client, question["id"], answer="Spring").status_code == 200
        finished(client, cid)
    with server.client(people.alice) as client:
        start_model_turn(client, cid, "What did we choose?")
        events = finished(client, cid)
    assert events[-1]["type"] == "turn.completed"
    third = model.wait_requests(3)[2]
    messages = third["messages"]
    assert messages[1] == {"role": "user", "content": "[bob] Plan the release"}
    asked = messages[2]
    assert asked["role"] == "assistant"
    assert asked["tool_calls"][0]["function"]["name"] == "ask_text"
    assert json.loads(asked["tool_calls"][0]["function"]["arguments"]) == {
        "prompt": "Which release?"
    }
    assert messages[3]["role"] == "tool"
    assert messages[3]["tool_call_id"] == asked["tool_calls"][0]["id"]
    assert json.loads(messages[3]["content"]) == {
        "status": "answered",
        "answer": "Spring",
        "answered_by": "bob",
    }
    assert messages[4] == {"role": "assistant", "content": "Release Spring it is."}
    assert messages[5] == {"role": "user", "content": "What did we choose?"}


def test_the_oldest_turns_are_left_out_beyond_the_history_budget(start_parley, model, people):
    model.script(*(llm.text(f"Reply {n}. " + "words " * 100) for n in range(4)))
    server = start_parley(PARLEY_LLM_HISTORY_TOKENS="400")
    with server.client(people.alice) as client:
        cid = create_model_conversation(client)
        for n in range(4):
            start_model_turn(client, cid, f"Question {n}")
            finished(client, cid)
    last = model.wait_requests(4)[3]["messages"]
    inputs = [m["content"] for m in last if m["role"] == "user"]
    # Each earlier turn is about 170 tokens: two fit in 400, the oldest does not.
    assert inputs == ["[alice] Question 1", "[alice] Question 2", "Question 3"]


def test_a_write_asks_for_confirmation_first_unless_the_turn_says_not_to(
    start_parley, model, people
):
    notes = people.workspace.files_root / "notes"
    model.script(
        llm.tool_calls(("write_file", {"path": "notes/plan.md", "content": "# Plan\n"})),
        llm.text("Written."),
        llm.tool_calls(("rename_file", {"path": "notes/plan.md", "new_path": "plan.md"})),
        llm.text("Not renamed, then."),
        llm.tool_calls(("write_file", {"path": "notes/plan.md", "content": "# Plan 2\n"})),
        llm.text("Written without asking."),
    )
    server = start_parley()
    with server.client(people.bob) as client:
        cid = create_model_conversation(client)
        start_model_turn(client, cid, "Write the plan")
        question = wait_pending(client, cid)
        assert question["kind"] == "confirm"
        assert question["prompt"] == "Create `notes/plan.md` (7 characters)?"
        assert not (notes / "plan.md").exists()
        assert reply(client, question["id"], answer=True).status_code == 200
        assert finished(client, cid)[-1]["type"] == "turn.completed"
        assert (notes / "plan.md").read_text() == "# Plan\n"

        start_model_turn(client, cid, "Move it to the top")
        question = wait_pending(client, cid)
        assert question["prompt"] == "Rename `notes/plan.md` to `plan.md`?"
        assert reply(client, question["id"], answer=False).status_code == 200
        assert finished(client, cid)[-1]["type"] == "turn.completed"
        assert (notes / "plan.md").exists()

        turn = start_model_turn(client, cid, "Rewrite it", confirm_writes=False)
        events = [e for e in finished(client, cid) if e["turn"] == turn]
    assert (notes / "plan.md").read_text() == "# Plan 2\n"
    assert not of_type(events, "selection.requested")
    assert events[-1]["type"] == "turn.completed"
    requests = model.wait_requests(6)
    assert last_tool_result(requests[1])["path"] == "notes/plan.md"
    refused = last_tool_result(requests[3])
    assert refused["status"] == "not_confirmed" and "bob said no" in refused["note"]


def test_a_conversation_may_pick_another_model_the_server_offers(start_parley, model, people):
    model.script(llm.text("From the other model."))
    server = start_parley(PARLEY_LLM_MODELS="gpt-other")
    with server.client(people.alice) as client:
        refused = client.post(
            "/api/conversations/",
            json={"workspace": "team", "title": "x", "agent": "openai", "model": "gpt-9"},
        )
        assert refused.status_code == 400
        assert "offers gpt-test, gpt-other" in refused.json()["error"]["message"]
        cid = create_model_conversation(client, model="gpt-other")
        assert client.get(f"/api/conversations/{cid}/").json()["model"] == "gpt-other"
        start_model_turn(client, cid)
        assert finished(client, cid)[-1]["type"] == "turn.completed"
    assert model.requests[0]["model"] == "gpt-other"


def test_the_agent_exists_only_once_a_model_is_configured(make_server, people):
    server = make_server()
    with server.client(people.alice) as client:
        response = client.post(
            "/api/conversations/", json={"workspace": "team", "title": "x", "agent": "openai"}
        )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unknown_agent"


def test_a_turn_nobody_can_answer_tells_the_model_so_and_writes_nothing_unconfirmed(
    start_parley, model, people
):
    model.script(
        llm.tool_calls(("ask_text", {"prompt": "Which one?"})),
        llm.tool_calls(("write_file", {"path": "out.md", "content": "x"})),
        llm.text("I could not ask, so I wrote nothing."),
    )
    server = start_parley()
    with server.client(people.alice) as client:
        cid = create_model_conversation(client)
        start_model_turn(client, cid, interactive=False)
        events = finished(client, cid)
    assert events[-1]["type"] == "turn.completed"
    assert not of_type(events, "selection.requested")
    assert not (people.workspace.files_root / "out.md").exists()
    first, second, third = model.wait_requests(3)
    assert "Nobody can answer questions in this turn" in first["messages"][0]["content"]
    assert last_tool_result(second)["status"] == "unavailable"
    assert last_tool_result(third)["status"] == "not_confirmed"


def test_the_per_turn_question_cap_holds_for_the_model(start_parley, model, people):
    model.script(
        llm.tool_calls(("ask_confirm", {"prompt": "First?"})),
        llm.tool_calls(("ask_confirm", {"prompt": "Second?"})),
        llm.text("Enough questions."),
    )
    server = start_parley(PARLEY_MAX_QUESTIONS_PER_TURN="1")
    with server.client(people.bob) as client:
        cid = create_model_conversation(client)
        start_model_turn(client, cid)
        question = wait_pending(client, cid)
        assert reply(client, question["id"], answer=True).status_code == 200
        events = finished(client, cid)
    assert len(of_type(events, "selection.requested")) == 1
    assert events[-1]["type"] == "turn.completed"
    third = model.wait_requests(3)[2]
    assert last_tool_result(third)["status"] == "limit_reached"


def test_the_model_searches_reads_on_from_an_offset_and_renames_within_the_files(
    start_parley, model, people
):
    files = people.workspace.files_root
    readme = (files / "README.md").read_text()
    expected = [
        {"path": f"notes/{p.name}", "line": n, "text": line.strip()[:200]}
        for p in sorted((files / "notes").iterdir())
        for n, line in enumerate(p.read_text().splitlines(), start=1)
        if "ideas" in line.lower()
    ]
    model.script(
        llm.tool_calls(
            ("search_files", {"text": "IDEAS", "path": "notes"}),
            ("read_file", {"path": "README.md"}),
            ("read_file", {"path": "README.md", "offset": 10}),
            ("list_files", {"path": ".git"}),
            ("rename_file", {"path": "notes/ideas.md", "new_path": "archive/ideas.md"}),
        ),
        llm.text("Done."),
    )
    server = start_parley(PARLEY_LLM_READ_MAX_BYTES="10")
    with server.client(people.alice) as client:
        cid = create_model_conversation(client)
        start_model_turn(client, cid, "Tidy the notes", confirm_writes=False)
        events = finished(client, cid)
    assert events[-1]["type"] == "turn.completed"
    found, first, second, hidden, renamed = [
        json.loads(m["content"]) for m in tool_messages(model.wait_requests(2)[1])
    ]
    assert expected and found == {"text": "IDEAS", "matches": expected, "more": False}
    assert (first["content"], first["truncated"]) == (readme[:10], True)
    assert (second["offset"], second["content"]) == (10, readme[10:20])
    assert hidden == {
        "error": "Hidden files and folders (names starting with a dot) are out of reach."
    }
    assert renamed == {"path": "notes/ideas.md", "new_path": "archive/ideas.md"}
    assert (files / "archive" / "ideas.md").exists() and not (files / "notes" / "ideas.md").exists()


def test_a_turn_stops_at_its_most_model_calls_with_a_notice(start_parley, model, people):
    model.script(*(llm.tool_calls(("list_files", {})) for _ in range(2)))
    server = start_parley(PARLEY_LLM_MAX_STEPS="2")
    with server.client(people.alice) as client:
        cid = create_model_conversation(client)
        start_model_turn(client, cid)
        events = finished(client, cid)
    assert events[-1]["type"] == "turn.completed"
    assert len(model.requests) == 2 and model.remaining() == 0
    (notice,) = of_type(events, "turn.notice")
    assert notice["data"]["kind"] == "limit" and "2 calls" in notice["data"]["text"]


def test_an_unreachable_model_server_is_tried_again_then_fails_the_turn(
    start_parley, model, people
):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
    server = start_parley(PARLEY_LLM_BASE_URL=nowhere, PARLEY_LLM_MAX_RETRIES="1")
    with server.client(people.alice) as client:
        cid = create_model_conversation(client)
        start_model_turn(client, cid)
        events = finished(client, cid)
    (notice,) = of_type(events, "turn.notice")
    assert notice["data"]["text"] == (
        "Parley could not reach the model server; trying again in 1 s (attempt 2 of 2)."
    )
    assert events[-1]["type"] == "turn.failed"
    assert events[-1]["data"]["error"] == f"Parley could not reach the model server ({nowhere})."
