"""The builtin agent, run as real turns through the socket in this process."""

import os

import pytest

from tests.conversations.test_consumer import communicator, events_until_terminal


async def run(conversation, person, text):
    comm = communicator(conversation.pk, person)
    await comm.connect()
    ready = await comm.receive_json_from()
    await comm.send_json_to({"type": "turn.start", "ref": "t", "input": text})
    events = await events_until_terminal(comm)
    await comm.disconnect()
    events = [e for e in events if e["seq"] > ready["latest_seq"]]
    reply = "".join(e["data"]["text"] for e in events if e["type"] == "message.completed")
    tools = [e["data"] for e in events if e["type"] == "tool.completed"]
    return events, reply, tools


pytestmark = pytest.mark.django_db(transaction=True)


async def test_help_lists_the_abilities(people, conversation):
    events, reply, tools = await run(conversation, people.bob, "help")
    assert tools == [] and events[-1]["type"] == "turn.completed"
    for ability in ("list", "find", "summarize"):
        assert f"**{ability}**" in reply


async def test_list_reports_a_folder_as_a_tool_call(people, conversation):
    events, reply, tools = await run(conversation, people.bob, "list notes")
    started = next(e for e in events if e["type"] == "tool.started")
    assert started["data"] == {"id": "call_1", "name": "list", "arguments": {"folder": "notes"}}
    assert [e["path"] for e in tools[0]["result"]["entries"]] == [
        "notes/ideas.md",
        "notes/meeting-2026-11-02.md",
    ]
    assert "`notes` holds 2 entries" in reply and "`notes/ideas.md`" in reply


@pytest.mark.parametrize(
    "request_text, says",
    [
        ("list ../..", "may not contain '..'"),
        ("list README.md", "is a file, not a folder"),
        ("list nowhere", "There is no `nowhere`"),
        ("summarize /etc/passwd", "must be relative"),
        ("summarize escape/passwd", "leads outside"),
        ("summarize missing.md", "There is no `missing.md`"),
        ("find zebra-unicorn", "Nothing contains “zebra-unicorn”"),
    ],
)
async def test_the_agent_explains_what_it_cannot_do(
    people, conversation, files_root, request_text, says
):
    os.symlink("/etc", files_root / "escape")
    events, reply, _ = await run(conversation, people.bob, request_text)
    assert says in reply
    assert events[-1]["type"] == "turn.completed"
    assert "root:" not in reply  # nothing of /etc/passwd leaked


async def test_find_reports_files_and_lines(people, conversation):
    _, reply, tools = await run(conversation, people.bob, "find Budget")
    found = tools[0]["result"]
    assert found["files"] == [
        "data/budget.csv",
        "notes/meeting-2026-11-02.md",
        "reports/q3-summary.md",
        "reports/q4-plan.md",
    ]
    assert {"path": "reports/q4-plan.md", "line": 8, "text": "## Budget"} in found["matches"]
    assert "“Budget” is in 4 file(s)" in reply


async def test_summarize_gives_lines_words_headings_and_first_lines(people, conversation):
    _, reply, tools = await run(conversation, people.bob, 'summarize "notes/meeting-2026-11-02.md"')
    summary = tools[0]["result"]
    assert summary["lines"] == 15 and summary["words"] == 41
    assert summary["headings"] == [
        "Weekly sync, 2 November",
        "Attendees",
        "Decisions",
        "Follow-ups",
    ]
    assert summary["first_lines"][0] == "# Weekly sync, 2 November"
    assert "**notes/meeting-2026-11-02.md**: 15 lines, 41 words." in reply
