"""Schemathesis over the OpenAPI schema a live Parley serves: every operation, as a real person,
against real conversations, turns and questions, with data that fits the schema and data that
does not. No answer may be a server error, and every answer must be what the schema says."""

from collections import Counter
from dataclasses import dataclass, field
from itertools import count

import pytest
import requests
import schemathesis
from hypothesis import given
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation.meta import CoveragePhaseData, CoverageScenario
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.conftest import wait_for_turn_end
from tests.fuzz.conftest import SCALE, budget
from tests.helpers import ask, create_conversation, start, wait_pending

# Cases per operation and generation mode (times PARLEY_FUZZ_SCALE under `make fuzz`).
EXAMPLES = 30
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    # Data that does not fit the schema (a string for a boolean, a number out of range, a
    # body that is no object...) must be refused with a 4xx.
    negative_data_rejection,
]
TAIL = "GET /api/conversations/{conversation_id}/tail/"
WEBHOOKS = "POST /api/workspaces/{slug}/webhooks/"
INVITE = "POST /api/workspaces/{slug}/invitations/"
MEMBER = "/api/workspaces/{slug}/members/{username}/"
TRANSFER = "POST /api/workspaces/{slug}/transfer/"
# Where the fuzzer's webhook endpoints point: nothing listens there (tests allow loopback).
NOWHERE = "http://127.0.0.1:9/fuzzed"
# The order operations are fuzzed in: conversations are made first (the rest may aim at
# them), questions are answered and turns stopped late, conversations deleted last.
ORDER = [
    "POST /api/conversations/",
    WEBHOOKS,
    "POST /api/conversations/{conversation_id}/turns/",
    "POST /api/conversations/{conversation_id}/steer/",
    "GET /api/selections/{selection_id}/browse/",
    "POST /api/selections/{selection_id}/reply/",
    "POST /api/conversations/{conversation_id}/cancel/",
    "PATCH /api/conversations/{conversation_id}/",
    "DELETE /api/webhooks/{endpoint_id}/",
    "DELETE /api/invitations/{invitation_id}/",
    "DELETE /api/me/tokens/{token_id}/",
    f"PATCH {MEMBER}",
    f"DELETE {MEMBER}",
    "DELETE /api/conversations/{conversation_id}/",
    # Last: once Alice has handed the workspace over she is no longer its owner.
    TRANSFER,
]


@dataclass
class World:
    """What there is to aim at: ids the server gave, growing as the fuzzer makes more."""

    conversations: list[str]
    selections: list[str]
    # The turn running in a conversation, for steer and cancel to name.
    turns: dict[str, str]
    # A conversation with no active turn, for the tail alone (its stream then ends).
    tailed: str
    # Webhook endpoints of the team's workspace (to where nothing listens).
    endpoints: list[str] = field(default_factory=list)
    # Invitations to the team's workspace, and a token of Alice's the fuzzer does not sign in
    # with (revoking it leaves the fuzzer's own).
    invitations: list[str] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    seen: dict[str, Counter] = field(default_factory=dict)

    def note(self, case, response) -> None:
        """Keep what a response made: a conversation, a turn."""
        label = case.operation.label
        self.seen.setdefault(label, Counter())[response.status_code] += 1
        if label == "POST /api/conversations/" and response.status_code == 201:
            self.conversations.append(response.json()["id"])
        elif label == ORDER[1] and response.status_code == 202:
            self.turns[response.json()["conversation"]] = response.json()["turn"]
        elif label == WEBHOOKS and response.status_code == 201:
            self.endpoints.append(response.json()["id"])
        elif label == INVITE and response.status_code == 201:
            self.invitations.append(response.json()["id"])


def _world(server, people) -> World:
    """A conversation with a finished turn, three whose turns wait on a question (a text and
    a path to browse and answer; a choice left for Stop to end), and one kept for the tail."""
    with server.client(people.alice) as client:
        done = create_conversation(client, agent="builtin", title="Done")
        start(client, done, "help")
        wait_for_turn_end(client, done)
        waiting, questions, turns = [], [], {}
        for kind in (
            ask(kind="text"),
            ask(kind="path", mode="any"),
            ask(kind="choice", options=["a", "b"]),
        ):
            cid = create_conversation(client, title=f"Asks a {kind['ask']['kind']}")
            turns[cid] = start(client, cid, [kind, {"say": "thanks"}])
            questions.append(wait_pending(client, cid)["id"])
            waiting.append(cid)
        tailed = create_conversation(client, agent="builtin", title="Tailed")
        start(client, tailed, "help")
        wait_for_turn_end(client, tailed)
        made = client.post("/api/workspaces/team/webhooks/", json={"url": NOWHERE})
        assert made.status_code == 201, made.text
        invited = client.post("/api/workspaces/team/invitations/", json={"email": "e@example.com"})
        assert invited.status_code == 201, invited.text
        token = client.post("/api/me/tokens/", json={"name": "for the fuzzer to revoke"})
        assert token.status_code == 201, token.text
    return World(
        conversations=[done, *waiting],
        selections=questions[:2],
        turns=turns,
        tailed=tailed,
        endpoints=[made.json()["id"]],
        invitations=[invited.json()["id"]],
        tokens=[token.json()["id"]],
    )


def _pools(operation, world: World) -> dict[str, list[str]]:
    """The ids to aim at: those made first, and the latest the fuzzer made."""
    if operation.label == TAIL:
        return {"conversation_id": [world.tailed]}
    made, endpoints = world.conversations, world.endpoints
    return {
        "conversation_id": made[:4] + made[4:][-4:],
        "selection_id": world.selections,
        "slug": ["team"],
        "endpoint_id": endpoints[:1] + endpoints[1:][-3:],
        "invitation_id": world.invitations[:1] + world.invitations[1:][-3:],
        "token_id": world.tokens,
        # Bob's role is changed; Carol, the viewer, is removed (Alice, the one owner, is kept).
        "username": ["carol"] if operation.label == f"DELETE {MEMBER}" else ["bob"],
    }


def _aimed(operation, mode, world: World):
    """Cases for the operation, most of them aimed at real objects (in positive mode a body
    names them too: the team's workspace, the turn running there), the rest at generated
    ids, which are no one's."""
    names = {p.name for p in operation.path_parameters}
    pools = _pools(operation, world)
    aimed = [
        operation.as_strategy(mode, path_parameters={name: target}).map(_named_in_body(world))
        for name in names
        for target in pools[name]
    ]
    if not names:
        aimed = [operation.as_strategy(mode).map(_named_in_body(world))]
    return st.one_of(*aimed, operation.as_strategy(mode))


_invited = count()


def _named_in_body(world: World):
    def name(case):
        body = case.body
        if case.meta.generation.mode.is_negative or not isinstance(body, dict):
            return case
        label = case.operation.label
        turn = world.turns.get(case.path_parameters.get("conversation_id"))
        if label == "POST /api/conversations/":
            body["workspace"] = "team"
        elif label == WEBHOOKS or label == "PATCH /api/webhooks/{endpoint_id}/":
            if "url" in body or label == WEBHOOKS:
                body["url"] = NOWHERE
        elif label.endswith("/steer/") and turn:
            body["expected_turn_id"] = turn
        elif label.endswith("/cancel/") and turn:
            body["turn_id"] = turn
        elif label == TRANSFER:
            body["username"] = "bob"
        elif label == INVITE:
            body["email"] = f"invited-{next(_invited)}@example.com"
        return case

    return name


def _checks_for(case) -> list:
    """Every check, but that an unknown header or query parameter is refused: HTTP servers
    ignore what they do not read, and so does Parley."""
    data = case.meta.phase.data
    if (
        isinstance(data, CoveragePhaseData)
        and data.scenario == CoverageScenario.OBJECT_UNEXPECTED_PROPERTIES
        and data.parameter_location != ParameterLocation.BODY
    ):
        return [check for check in CHECKS if check is not negative_data_rejection]
    return CHECKS


def _negatable(operation) -> bool:
    """Whether the operation has something to send wrong: a query parameter, a header of its
    own or a body (a path id is any text, so there is none that fits no schema)."""
    # (Credentials are any text: the token, an answer link's signature.)
    own_headers = [p for p in operation.headers if p.name not in ("Authorization", "X-Parley-Link")]
    return bool(operation.query or own_headers or operation.body)


def _fuzz(operation, world: World, call) -> None:
    """Schemathesis' coverage cases for the operation (each boundary, each wrong type, each
    required part left out, other methods and media types), aimed at its first real object;
    then cases Hypothesis generates, fitting the schema and not."""
    schema = operation.schema
    coverage = schema.iter_coverage_cases(
        operation,
        generation_modes=list(GenerationMode),
        generation_config=schema.config.generation_for(operation=operation),
    )
    aim = _named_in_body(world)
    for case in coverage:
        for name, pool in _pools(operation, world).items():
            if name in case.path_parameters:
                case.path_parameters[name] = pool[0]
        call(aim(case), "coverage")
    modes = [GenerationMode.POSITIVE] + [GenerationMode.NEGATIVE] * _negatable(operation)
    for mode in modes:
        _generated(operation, mode, world, call)


def _generated(operation, mode, world: World, call) -> None:
    @budget(EXAMPLES)
    @given(case=_aimed(operation, mode, world))
    def exercise(case):
        call(case, mode.value)

    try:
        exercise()
    except BaseException as error:
        error.add_note(f"while generating cases for {operation.label} ({mode.value})")
        raise


# One event of the tail, as Schemathesis reads a stream: `data` is the envelope (or the end's or
# an error's body) as JSON text.
TAIL_EVENT = {
    "type": "object",
    "required": ["data"],
    "properties": {
        "id": {"type": "string", "pattern": "^[0-9]+$"},
        "event": {"type": "string", "enum": ["message", "done", "error"]},
        "data": {"type": "string"},
        "retry": {"type": "integer", "minimum": 0},
    },
}


def _each_tail_event_checked(server) -> dict:
    """The live schema, with each event of the tail's stream described for Schemathesis.

    The schema declares the stream as text (`schema: {type: string}`), as generators read
    OpenAPI 3.0; Schemathesis reads a 3.0 stream's `schema` as each event's, unless OpenAPI
    3.2's `itemSchema` gives that, when `schema` is the stream's, read as a list of events.
    So here the stream's text is left out and each event is checked."""
    raw = requests.get(f"{server.url}/api/schema/", params={"format": "json"}, timeout=30).json()
    path = TAIL.split(" ", 1)[1]
    stream = raw["paths"][path]["get"]["responses"]["200"]["content"]["text/event-stream"]
    assert stream.pop("schema") == {"type": "string"}
    stream["itemSchema"] = TAIL_EVENT
    return raw


# About 1,500 requests (70-110 s on a loaded machine), SCALE times as many under `make fuzz`.
@pytest.mark.timeout(360 * SCALE)
def test_every_operation_answers_as_its_schema_says(make_server, people, mailbox):
    # Cases that send an answer link's header send made-up ones, each a failed sign-in: the
    # address's lock is set far off (the lock itself is tested in tests/core/test_lockout.py).
    server = make_server(PARLEY_LOGIN_ADDRESS_FAILURE_LIMIT="1000000", PARLEY_EMAIL_URL=mailbox.url)
    world = _world(server, people)
    schema = schemathesis.openapi.from_dict(_each_tail_event_checked(server))
    operations = [result.ok() for result in schema.get_all_operations()]
    labels = {operation.label for operation in operations}
    # 46: with a person's notification settings (GET, PUT), a question's deliveries and its answer
    # link's page, a workspace's channels (GET, PUT) and webhook endpoints (seven); a person's
    # API tokens (three), a workspace's invitations (three), members (three), ownership and audit;
    # a person's conversations and a conversation marked seen; search.
    assert len(labels) == 46 and TAIL in labels and set(ORDER) <= labels
    # The reads come right after conversations are made.
    operations.sort(key=lambda op: ORDER.index(op.label) if op.label in ORDER else 0.5)
    headers = {"Authorization": f"Token {people.alice.token}"}
    with requests.Session() as session:

        def call(case, phase: str) -> None:
            # Bounded: a tail ends (its conversation has no active turn); nothing else streams.
            response = case.call(base_url=server.url, headers=headers, session=session, timeout=30)
            world.note(case, response)
            try:
                case.validate_response(response, checks=_checks_for(case))
            except BaseException as error:
                error.add_note(f"while fuzzing {case.operation.label} ({phase})")
                raise

        for operation in operations:
            _fuzz(operation, world, call)
    # Every operation was reached for real, not only refused: each answered a 2xx at least once.
    unreached = {
        label: dict(seen)
        for label, seen in world.seen.items()
        if not any(200 <= s < 300 for s in seen)
    }
    assert not unreached and set(world.seen) == labels, (unreached, world.seen)
