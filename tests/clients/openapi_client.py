"""Drive Parley through a client openapi-python-client generated from its live schema (run in
.venv-clients by tests/clients/test_openapi.py, the generated package on PYTHONPATH).

    openapi_client.py BASE_URL STARTER_TOKEN ANSWERER_TOKEN

The starter makes a conversation of the scripted agent and starts a turn that asks a choice;
the answerer answers it; then the conversation's events are read, and its tail as text. Prints
one JSON object a line: {"step": ..., ...}. Only the generated client speaks to Parley."""

import json
import sys
import time

from parley_client import AuthenticatedClient
from parley_client.api.conversations import (
    conversations_create,
    conversations_events_retrieve,
    conversations_in_flight_retrieve,
    conversations_tail_retrieve,
    conversations_turns_create,
)
from parley_client.api.selections import selections_reply_create
from parley_client.models import (
    ConversationCreateRequest,
    ConversationOutput,
    EventsPage,
    InFlightOutput,
    Selection,
    SelectionReplyRequest,
    TurnStarted,
    TurnStartRequest,
)

CEILING = 30  # seconds, for the turn to ask and to end
STEPS = [{"ask": {"kind": "choice", "prompt": "Which?", "options": ["red", "green"]}}]
STEPS.append({"say": "thanks"})


def say(step: str, **fields) -> None:
    print(json.dumps({"step": step, **fields}), flush=True)


def expect(value, kind):
    """The parsed answer, which must be ``kind`` (an Error or None says what went wrong)."""
    if not isinstance(value, kind):
        raise SystemExit(f"expected {kind.__name__}, got {value!r}")
    return value


def in_flight_until(client, cid: str, done) -> InFlightOutput:
    deadline = time.monotonic() + CEILING
    while time.monotonic() < deadline:
        state = expect(conversations_in_flight_retrieve.sync(cid, client=client), InFlightOutput)
        if done(state):
            return state
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting on {cid}")


def main(base_url: str, starter_token: str, answerer_token: str) -> None:
    starter = AuthenticatedClient(base_url=base_url, token=starter_token, prefix="Token")
    answerer = AuthenticatedClient(base_url=base_url, token=answerer_token, prefix="Token")
    made = conversations_create.sync(
        client=starter,
        body=ConversationCreateRequest(workspace="team", title="Generated", agent="scripted"),
    )
    cid = expect(made, ConversationOutput).id
    started = conversations_turns_create.sync(
        cid, client=starter, body=TurnStartRequest(input_=json.dumps(STEPS))
    )
    turn = expect(started, TurnStarted)
    say("started", conversation=cid, turn=turn.turn, seq=turn.seq)

    # The question is stored a moment before the turn says it awaits input: wait for both.
    state = in_flight_until(
        starter, cid, lambda s: s.pending_selections and s.status == "awaiting_input"
    )
    question = state.pending_selections[0].to_dict()
    say("asked", selection=question["id"], kind=question["kind"], status=state.status)

    answered = selections_reply_create.sync(
        question["id"], client=answerer, body=SelectionReplyRequest(answer="green")
    )
    answered = expect(answered, Selection)
    say(
        "answered",
        selection=answered.id,
        status=answered.status.value,
        answer=answered.answer,
        answered_by=answered.answered_by.to_dict()["username"],
        answered_via=answered.answered_via.value,
    )

    in_flight_until(starter, cid, lambda s: not s.in_flight)
    page = expect(conversations_events_retrieve.sync(cid, client=starter, limit=1000), EventsPage)
    say(
        "events",
        seqs=[event.seq for event in page.events],
        types=[event.type_ for event in page.events],
        latest_seq=page.latest_seq,
        has_more=page.has_more,
        said=[e.data["text"] for e in page.events if e.type_ == "message.completed"],
    )

    tail = conversations_tail_retrieve.sync_detailed(cid, client=starter, from_seq=0)
    say(
        "tail",
        status=tail.status_code.value,
        content_type=tail.headers["content-type"],
        parsed_is_text=isinstance(tail.parsed, str),
        text=tail.parsed,
    )


if __name__ == "__main__":
    main(*sys.argv[1:4])
