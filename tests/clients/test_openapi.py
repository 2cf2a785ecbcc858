"""The OpenAPI schema a live Daphne serves, as tools Parley did not write read it: described for
clients, valid to openapi-spec-validator and to Redocly's linter, and good enough for
openapi-python-client to generate a client that starts a turn, answers its question, and reads
the events and the tail."""

import copy
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from openapi_spec_validator import validate
from openapi_spec_validator.validation.exceptions import OpenAPIValidationError

from selection.models import Selection
from tests.conftest import ROOT

CLIENTS = ROOT / "tests" / "clients"
REDOCLY = CLIENTS / "node_modules" / ".bin" / "redocly"
CLIENT_PYTHON = ROOT / ".venv-clients" / "bin" / "python"
GENERATOR = ROOT / ".venv-clients" / "bin" / "openapi-python-client"
TAIL = "/api/conversations/{conversation_id}/tail/"
# Words of Parley's insides that no client needs to read.
INTERNALS = re.compile(r"thread|run_db|sync_to_async|dbthreads|docstring|serializer|\bDRF\b", re.I)
# Redocly asks for no telemetry and no update check: the tests reach nothing but loopback.
QUIET = {**os.environ, "REDOCLY_TELEMETRY": "off", "REDOCLY_SUPPRESS_UPDATE_NOTICE": "true"}


def live_schema(server) -> dict:
    response = server.client().get("/api/schema/", params={"format": "json"})
    assert response.status_code == 200, response.text
    return response.json()


def operations(schema: dict):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            yield f"{method.upper()} {path}", operation


def redocly(schema: dict, folder: Path) -> tuple[int, list[dict]]:
    """Redocly's lint (the recommended rules, as tests/clients/redocly.yaml changes them):
    its exit code and its problems."""
    path = folder / "schema.json"
    path.write_text(json.dumps(schema))
    result = subprocess.run(
        [REDOCLY, "lint", path, "--config", CLIENTS / "redocly.yaml", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=QUIET,
        cwd=folder,
    )
    report = json.loads(result.stdout[result.stdout.index("{") :])
    return result.returncode, report["problems"]


def test_every_operation_is_described_for_clients(server):
    schema = live_schema(server)
    described = dict(operations(schema))
    # 32, 8 of members, invitations and the audit log, 3 of tokens, 2 of what people have seen
    # (their conversations and marking one seen), 1 of search
    assert len(described) == 46
    for label, operation in described.items():
        assert operation.get("summary") and operation.get("description"), label
        said = f"{operation['summary']} {operation['description']}"
        assert not INTERNALS.search(said), (label, said)
    # The tail is text (a stream of Server-Sent Events), not one JSON object; 204 when a
    # reconnect comes after the end; the Last-Event-ID it honours is declared.
    tail = schema["paths"][TAIL]["get"]
    assert tail["responses"]["200"]["content"] == {
        "text/event-stream": {"schema": {"type": "string"}}
    }
    assert "Event" in tail["responses"]["200"]["description"]
    assert "content" not in tail["responses"]["204"]
    headers = {p["name"] for p in tail["parameters"] if p["in"] == "header"}
    assert "Last-Event-ID" in headers
    assert "TailEvent" not in schema["components"]["schemas"]


def test_the_schema_passes_openapi_spec_validator_and_redocly(server, tmp_path):
    schema = live_schema(server)
    validate(schema)
    code, problems = redocly(schema, tmp_path)
    assert (code, problems) == (0, [])
    # Both would say so: a response with no description, an operation with no summary, a
    # `nullable` with no `type` beside it.
    broken = copy.deepcopy(schema)
    del broken["paths"][TAIL]["get"]["responses"]["204"]["description"]
    with pytest.raises(OpenAPIValidationError):
        validate(broken)
    broken = copy.deepcopy(schema)
    del broken["paths"][TAIL]["get"]["summary"]
    broken["components"]["schemas"]["Event"]["properties"]["data"] = {"nullable": True}
    code, problems = redocly(broken, tmp_path)
    assert code != 0
    assert {"operation-summary", "nullable-type-sibling"} <= {p["ruleId"] for p in problems}


@pytest.mark.timeout(240)
def test_a_generated_client_answers_a_question_and_reads_events_and_the_tail(
    server, people, tmp_path
):
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(live_schema(server)))
    config = tmp_path / "config.json"
    # No post-hooks: they would run ruff, which the clients' environment does not have.
    config.write_text(json.dumps({"package_name_override": "parley_client", "post_hooks": []}))
    generated = tmp_path / "client"
    made = subprocess.run(
        [GENERATOR, "generate", "--path", schema, "--output-path", generated, "--config", config],
        capture_output=True,
        text=True,
        timeout=180,
    )
    # It warns of any part of the schema it could not make code for: there must be none.
    assert made.returncode == 0 and "Warning" not in made.stdout + made.stderr, made
    tokens = (people.alice.token, people.bob.token)  # alice starts the turn, bob answers
    run = subprocess.run(
        [CLIENT_PYTHON, CLIENTS / "openapi_client.py", server.url, *tokens],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(generated)},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    steps = {line["step"]: line for line in map(json.loads, run.stdout.splitlines())}

    started, asked, answered = steps["started"], steps["asked"], steps["answered"]
    assert asked["kind"] == "choice" and asked["status"] == "awaiting_input"
    assert answered == {
        "step": "answered",
        "selection": asked["selection"],
        "status": "answered",
        "answer": "green",
        "answered_by": "bob",
        "answered_via": "api",
    }
    events = steps["events"]
    assert events["seqs"] == list(range(1, events["latest_seq"] + 1))
    assert events["seqs"][0] == started["seq"] and not events["has_more"]
    assert events["types"][0] == "turn.started" and events["types"][-1] == "turn.completed"
    assert "selection.requested" in events["types"] and "selection.resolved" in events["types"]
    # What the scripted agent was told: bob's answer.
    outcome = json.loads(events["said"][0])
    assert outcome == {"status": "answered", "value": "green", "by": "bob"}

    tail = steps["tail"]
    assert tail["status"] == 200 and tail["parsed_is_text"]
    assert tail["content_type"].startswith("text/event-stream")
    # Each event's id; `done` has one too (the last seq), for an EventSource to come back with.
    ids = [int(i) for i in re.findall(r"^id: (\d+)\ndata: ", tail["text"], re.M)]
    assert ids == events["seqs"]
    latest = events["latest_seq"]
    assert re.search(
        rf'id: {latest}\nevent: done\ndata: \{{"latest_seq": ?{latest}\}}', tail["text"]
    )

    # And Parley agrees: bob answered it, through the API, and REST says so too.
    selection = Selection.objects.get(pk=asked["selection"])
    assert selection.status == Selection.Status.ANSWERED and selection.answer == "green"
    assert selection.answered_by == people.bob.user and selection.answered_via == "api"
    with server.client(people.alice) as rest:
        read = rest.get(f"/api/selections/{asked['selection']}/").json()
        assert read["status"] == "answered" and read["answered_by"]["username"] == "bob"
        assert rest.get(f"/api/conversations/{started['conversation']}/").json()["title"] == (
            "Generated"
        )
