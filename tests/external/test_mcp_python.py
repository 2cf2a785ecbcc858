"""Python MCP clients Parley did not write, each in its own virtualenv, against a real Daphne:
README's examples as they are (mcp 2.x, and 1.x's tasks), the official SDK's current major,
and fastmcp's client. What each printed, and what Parley stored."""

import ast
import sys
from pathlib import Path

import pytest
from django.conf import settings

from selection.models import Selection
from tests.helpers import ClientProgram, of_type, pending_question, reply_to, turn_events

ROOT = Path(settings.BASE_DIR)
CLIENTS_PYTHON = str(ROOT / ".venv-clients" / "bin" / "python")  # mcp 2.x, fastmcp
PYTHON = sys.executable  # Parley's own virtualenv: mcp 1.x


@pytest.fixture
def mcp_server(make_server):
    return make_server(PARLEY_MCP_PROGRESS_SECONDS="0.2")


def readme_block(marker: str) -> str:
    """The Python of README's block between ``<!-- marker: … -->`` and ``<!-- /marker -->``."""
    text = (ROOT / "README.md").read_text()
    block = text.split(f"<!-- {marker}:", 1)[1].split(f"<!-- /{marker} -->", 1)[0]
    return block.split("```python\n", 1)[1].split("```", 1)[0]


def run(python, script, server, person):
    env = {"PARLEY_URL": server.url, "PARLEY_TOKEN": person.token}
    return ClientProgram.run(python, str(script), env=env)


async def answered_by_alice(question: dict, answer) -> Selection:
    stored = await Selection.objects.select_related("answered_by").aget(pk=question["id"])
    assert stored.status == "answered" and stored.answered_by.username == "alice"
    assert stored.answer == answer
    return stored


async def test_the_readme_example_runs_as_written_with_mcp_2(mcp_server, people, tmp_path):
    script = tmp_path / "ask.py"
    script.write_text(readme_block("mcp-example"))
    async with (
        run(CLIENTS_PYTHON, script, mcp_server, people.bob) as example,
        mcp_server.async_client(people.alice) as rest,
    ):
        question = await pending_question(rest)
        assert question["kind"] == "confirm" and question["prompt"] == "Deploy now?"
        await reply_to(rest, question, answer=True)
        printed, stderr = await example.finish()
        events = await turn_events(rest, question["conversation"])
    assert [ast.literal_eval(line) for line in printed] == [
        {"status": "answered", "answer": True, "answered_by": "alice", "question": question["id"]}
    ], stderr
    await answered_by_alice(question, True)
    assert of_type(events, "turn.started")[0]["data"]["agent"] == "external"
    assert of_type(events, "tool.completed")[0]["data"]["result"]["answer"] is True


async def test_the_readme_task_example_runs_as_written_with_mcp_1(mcp_server, people, tmp_path):
    script = tmp_path / "ask_later.py"
    script.write_text(readme_block("mcp-task-example"))
    async with (
        run(PYTHON, script, mcp_server, people.bob) as example,
        mcp_server.async_client(people.alice) as rest,
    ):
        asked = await example.line()
        assert asked.startswith("asked: ")
        # Its session has ended: the question is still there to answer.
        question = await pending_question(rest)
        assert question["prompt"] == "What do we call the release?"
        await reply_to(rest, question, answer="Orion")
        printed, stderr = await example.finish()
        events = await turn_events(rest, question["conversation"])
    said = {"status": "answered", "answer": "Orion", "answered_by": "alice"}
    assert [ast.literal_eval(line) for line in printed] == [{**said, "question": question["id"]}], (
        stderr
    )
    await answered_by_alice(question, "Orion")
    assert [e["data"]["status"] for e in of_type(events, "selection.resolved")] == ["answered"]


async def test_the_official_sdk_s_current_major(mcp_server, people):
    script = ROOT / "tests" / "clients" / "mcp2_client.py"
    async with (
        run(CLIENTS_PYTHON, script, mcp_server, people.bob) as client,
        mcp_server.async_client(people.alice) as rest,
    ):
        initialized = await client.event("initialized")
        # mcp 2.x speaks the 2025-11-25 revision to a server that offers no later one.
        assert initialized == {
            "event": "initialized",
            "protocol_version": "2025-11-25",
            "server": "parley",
        }
        tools = (await client.event("tools"))["tools"]
        assert set(tools) == {"ask", "post", "list_conversations", "pending"}
        assert tools["ask"] == {"required": ["kind", "prompt"], "task_support": "optional"}
        assert (await client.event("posted"))["result"] == {"status": "posted"}
        waiting = await client.event("waiting")
        question = await pending_question(rest)
        assert [row["id"] for row in waiting["pending"]] == [question["id"]]
        await reply_to(rest, question, answer="eu")
        answered = await client.event("answered")
        assert answered["result"] == {
            "status": "answered",
            "answer": "eu",
            "answered_by": "alice",
            "question": question["id"],
        }
        assert 'alice answered: "eu"' in answered["text"]
        assert (await client.event("pending"))["pending"] == []
        await client.finish()
        events = await turn_events(rest, question["conversation"])
    await answered_by_alice(question, "eu")
    said = [e["data"]["text"] for e in of_type(events, "message.completed")]
    assert said == ["Hello from mcp 2."]
    assert [e["data"]["name"] for e in of_type(events, "tool.started")] == [
        "ask",
        "pending",
        "pending",
    ]
    assert events[-1]["type"] == "turn.completed"


async def test_fastmcp_s_client(mcp_server, people):
    script = ROOT / "tests" / "clients" / "fastmcp_client.py"
    async with (
        run(CLIENTS_PYTHON, script, mcp_server, people.bob) as client,
        mcp_server.async_client(people.alice) as rest,
    ):
        tools = (await client.event("tools"))["tools"]
        assert tools == ["ask", "list_conversations", "pending", "post"]
        assert (await client.event("posted"))["result"] == {"status": "posted"}
        assert "kind" in (await client.event("refused"))["error"]
        question = await pending_question(rest)
        assert question["prompt"] == "Who reviews this?"
        await reply_to(rest, question, answer="Carol")
        answered = await client.event("answered")
        await client.finish()
        events = await turn_events(rest, question["conversation"])
    assert answered["result"] == {
        "status": "answered",
        "answer": "Carol",
        "answered_by": "alice",
        "question": question["id"],
    }
    assert answered["data"]["answer"] == "Carol"
    await answered_by_alice(question, "Carol")
    assert [e["data"]["text"] for e in of_type(events, "message.completed")] == [
        "Hello from fastmcp."
    ]
    assert of_type(events, "turn.started")[0]["data"]["input"] == (
        "fastmcp is working here through MCP."
    )
    # The malformed call stored nothing: one question, the one answered.
    assert await Selection.objects.acount() == 1
