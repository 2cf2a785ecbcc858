"""The builtin agent, run as real turns through the socket in this process."""

import os
import time
from datetime import datetime

import pytest
from asgiref.sync import sync_to_async

from conversations import services
from conversations.models import TurnStep
from tests.helpers import communicator, communicator_events_until_terminal


async def run(conversation, person, text):
    comm = communicator(conversation.pk, person)
    await comm.connect(timeout=30)
    ready = await comm.receive_json_from(timeout=30)
    await comm.send_json_to({"type": "turn.start", "ref": "t", "input": text})
    events = await communicator_events_until_terminal(comm)
    await comm.disconnect(timeout=30)
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


async def converse(conversation, person, text, answers):
    """Run a turn, answering each question it asks with the next of ``answers`` (a dict of
    ``answer`` or ``action``), over the socket. Returns events, reply text and questions."""
    comm = communicator(conversation.pk, person)
    await comm.connect(timeout=30)
    ready = await comm.receive_json_from(timeout=30)
    await comm.send_json_to({"type": "turn.start", "ref": "t", "input": text})
    events, questions, answers = [], [], list(answers)
    while True:
        frame = await comm.receive_json_from(timeout=10)
        if frame.get("type") == "ws.error":
            raise AssertionError(frame)
        if "seq" not in frame or frame["seq"] <= ready["latest_seq"]:
            continue
        events.append(frame)
        if frame["type"] == "selection.requested":
            questions.append(frame["data"])
            await comm.send_json_to(
                {"type": "selection.reply", "selection_id": frame["data"]["id"], **answers.pop(0)}
            )
        if frame["type"] in ("turn.completed", "turn.failed", "turn.cancelled"):
            break
    await comm.disconnect(timeout=30)
    reply = "".join(e["data"]["text"] for e in events if e["type"] == "message.completed")
    return events, reply, questions


async def test_summarize_with_no_path_asks_with_a_file_picker(people, conversation):
    events, reply, questions = await converse(
        conversation, people.bob, "summarize", [{"answer": "notes/ideas.md"}]
    )
    assert [(q["kind"], q["mode"], q["root"]) for q in questions] == [("path", "file", "")]
    assert "**notes/ideas.md**: 5 lines" in reply
    assert events[-1]["type"] == "turn.completed"


async def test_an_ambiguous_path_asks_among_the_matching_files(people, conversation):
    _, reply, questions = await converse(
        conversation, people.bob, "summarize meeting notes?", [{"answer": "q3-summary.md"}]
    )
    assert reply.startswith("There is no `meeting notes?`")
    _, reply, questions = await converse(
        conversation, people.bob, "summarize reports/q", [{"answer": "q3-summary.md"}]
    )
    assert questions[0]["root"] == "reports"
    assert (
        questions[0]["prompt"] == "Several files match “reports/q”: which one should I summarize?"
    )
    assert "**reports/q3-summary.md**" in reply


async def test_a_request_it_does_not_understand_asks_which_ability_was_meant(people, conversation):
    _, reply, questions = await converse(
        conversation, people.bob, "make me a sandwich", [{"answer": "list"}]
    )
    assert questions[0]["kind"] == "choice" and not questions[0]["multiple"]
    assert [o["value"] for o in questions[0]["options"]][:4] == [
        "help",
        "list",
        "find",
        "summarize",
    ]
    assert all(o["description"] for o in questions[0]["options"])
    assert reply.startswith("I'm not sure what you mean by “make me a sandwich”.")
    assert "`.` holds 5 entries" in reply


async def test_find_without_text_asks_for_it(people, conversation):
    _, reply, questions = await converse(conversation, people.bob, "find", [{"answer": "Carol"}])
    assert questions[0]["kind"] == "text"
    assert "“Carol” is in 1 file(s)" in reply
    assert "`notes/meeting-2026-11-02.md` line 10: - Carol owns the onboarding guide." in reply


async def test_compare_asks_for_two_files(people, conversation):
    _, reply, questions = await converse(
        conversation,
        people.bob,
        "compare",
        [{"answer": "reports/q3-summary.md"}, {"answer": "reports/q4-plan.md"}],
    )
    assert [q["kind"] for q in questions] == ["path", "path"]
    assert "`reports/q3-summary.md` has 8 lines and `reports/q4-plan.md` has 10" in reply
    assert "```diff" in reply


async def test_rename_asks_for_a_name_then_confirms_then_renames(people, conversation, files_root):
    _, reply, questions = await converse(
        conversation,
        people.bob,
        "rename notes/ideas.md",
        [{"answer": "ideas-2026.md"}, {"answer": True}],
    )
    assert [q["kind"] for q in questions] == ["text", "confirm"]
    assert questions[1]["prompt"] == "Rename `notes/ideas.md` to `notes/ideas-2026.md`?"
    assert reply.endswith("Renamed `notes/ideas.md` to `notes/ideas-2026.md`.")
    assert (files_root / "notes/ideas-2026.md").is_file()
    assert not (files_root / "notes/ideas.md").exists()


@pytest.mark.parametrize(
    "answers, says",
    [
        ([{"answer": "kept.md"}, {"answer": False}], "Okay, I left it as it is."),
        ([{"answer": "kept.md"}, {"action": "decline"}], "Okay, I left it as it is."),
        ([{"answer": "kept.md"}, {"action": "dismiss"}], "You closed the question"),
        ([{"answer": "../escape.md"}, {"action": "dismiss"}], "You closed the question"),
        ([{"action": "dismiss"}], "You closed the question, so I'll leave it there."),
    ],
)
async def test_rename_changes_nothing_unless_confirmed(
    people, conversation, files_root, answers, says
):
    events, reply, _ = await converse(conversation, people.bob, "rename notes/ideas.md", answers)
    assert says in reply and events[-1]["type"] == "turn.completed"
    assert (files_root / "notes/ideas.md").is_file() and not (files_root / "notes/kept.md").exists()


async def test_a_name_that_will_not_do_is_asked_for_again_saying_why(
    people, conversation, files_root
):
    again = "What should `notes/ideas.md` be called instead?"
    events, reply, questions = await converse(
        conversation,
        people.bob,
        "rename notes/ideas.md",
        [
            {"answer": "../escape.md"},
            {"answer": "meeting-2026-11-02.md"},
            {"answer": "ideas-2026.md"},
            {"answer": True},
        ],
    )
    assert [(q["kind"], q["prompt"]) for q in questions] == [
        ("text", "What should `notes/ideas.md` be called? (a new name in the same folder)"),
        ("text", f"That name won't do: a name may not contain slashes. {again}"),
        ("text", f"That name won't do: `notes/meeting-2026-11-02.md` already exists. {again}"),
        ("confirm", "Rename `notes/ideas.md` to `notes/ideas-2026.md`?"),
    ]
    assert reply.endswith("Renamed `notes/ideas.md` to `notes/ideas-2026.md`.")
    assert events[-1]["type"] == "turn.completed"
    assert (files_root / "notes/ideas-2026.md").is_file()
    assert (files_root / "notes/meeting-2026-11-02.md").is_file()
    assert not (files_root / "notes/ideas.md").exists()


async def test_after_three_names_that_will_not_do_the_file_keeps_its_name(
    people, conversation, files_root
):
    events, reply, questions = await converse(
        conversation,
        people.bob,
        "rename notes/ideas.md",
        [{"answer": ".."}, {"answer": ".hidden.md"}, {"answer": "a" * 256}],
    )
    assert [q["kind"] for q in questions] == ["text", "text", "text"]
    assert questions[1]["prompt"].startswith("That name won't do: “.” and “..” name folders")
    assert questions[2]["prompt"].startswith("That name won't do: hidden names")
    assert reply == (
        "I can't use that name either: it is longer than 255 characters. "
        "After 3 tries, `notes/ideas.md` keeps its name."
    )
    assert events[-1]["type"] == "turn.completed"
    assert sorted(p.name for p in (files_root / "notes").iterdir()) == [
        "ideas.md",
        "meeting-2026-11-02.md",
    ]


async def test_tidy_does_only_the_chores_chosen(people, conversation, files_root):
    (files_root / "empty").mkdir()
    (files_root / "notes" / "messy.md").write_text("# Messy   \nline\t\nlast")
    _, reply, questions = await converse(
        conversation,
        people.bob,
        "tidy",
        [{"answer": ["trailing-whitespace", "empty-folders"]}],
    )
    assert questions[0]["multiple"] and questions[0]["min_choices"] == 1
    assert [o["value"] for o in questions[0]["options"]] == [
        "empty-folders",
        "trailing-whitespace",
        "final-newline",
        "large-files",
    ]
    assert not (files_root / "empty").exists()
    assert (files_root / "notes" / "messy.md").read_text() == "# Messy\nline\nlast"
    assert "trimmed trailing whitespace in 1 file(s)" in reply
    assert "removed 1 empty folder(s)" in reply


async def test_note_asks_with_a_form_and_writes_the_note(people, conversation, files_root):
    fields = {"title": "Launch plan", "tags": "q4, launch", "pinned": True}
    _, reply, questions = await converse(
        conversation, people.bob, "note Ship it on Monday", [{"answer": fields}]
    )
    schema = questions[0]["schema"]
    assert questions[0]["kind"] == "form" and schema["required"] == ["title"]
    assert set(schema["properties"]) == {"title", "tags", "pinned"}
    assert reply == "Wrote `notes/launch-plan.md`."
    assert (files_root / "notes/launch-plan.md").read_text() == (
        "# Launch plan\n\nTags: q4, launch\nPinned: yes\n\nShip it on Monday\n"
    )


async def test_steering_while_parked_is_acknowledged_after_the_answer(people, conversation):
    comm = communicator(conversation.pk, people.bob)
    await comm.connect(timeout=30)
    await comm.receive_json_from(timeout=30)
    await comm.send_json_to({"type": "turn.start", "ref": "t", "input": "summarize"})
    while (frame := await comm.receive_json_from(timeout=10)).get("type") != "selection.requested":
        pass
    turn, sid = frame["turn"], frame["data"]["id"]
    await comm.send_json_to(
        {"type": "turn.steer", "ref": "s", "expected_turn_id": turn, "input": "keep it short"}
    )
    await comm.send_json_to({"type": "selection.reply", "selection_id": sid, "answer": "README.md"})
    events = await communicator_events_until_terminal(comm)
    await comm.disconnect(timeout=30)
    messages = [e["data"]["text"] for e in events if e["type"] == "message.completed"]
    assert messages[0] == "(Noted while I worked: “keep it short”.)"
    assert messages[1].startswith("**README.md**: 11 lines")


async def test_files_whose_paths_are_too_long_to_name_are_left_out_of_matches(
    people, conversation, files_root
):
    # Seventeen folders of 64 characters: the files at the bottom have paths past the 1,024
    # characters any path may have, so no question could be rooted among them nor answered.
    deep = files_root.joinpath(*[f"{n:02}" + "-" * 61 for n in range(17)])
    deep.mkdir(parents=True)
    for name in ("deep-one.md", "deep-two.md"):
        (deep / name).write_text("# Deep\n")
    (files_root / "deep-three.md").write_text("# Shallow\n")
    events, reply, questions = await converse(
        conversation, people.bob, "summarize deep-", [{"answer": "deep-three.md"}]
    )
    assert reply.startswith("**deep-three.md**: 1 lines"), reply
    assert questions == [] and events[-1]["type"] == "turn.completed"
    (files_root / "deep-three.md").unlink()
    events, reply, _ = await converse(conversation, people.bob, "summarize deep-", [])
    assert reply == "There is no `deep-` in this workspace.", reply
    assert events[-1]["type"] == "turn.completed"
    # Listed, the deepest folder that can be named shows the one below it as left out.
    parent = deep.parent.relative_to(files_root).as_posix()
    _, reply, _ = await converse(conversation, people.bob, f'list "{parent}"', [])
    assert reply.startswith(f"`{parent}` is empty."), reply
    assert f"`{parent}/{deep.name}`: its path is longer than 1024 characters" in reply


async def test_recent_lists_what_changed_counted_from_the_time_the_turn_was_given(
    people, conversation, files_root
):
    day = 24 * 3600
    now = time.time()
    for name, age in (("notes/fresh.md", 120), ("reports/week.md", 3 * day), ("old.md", 10 * day)):
        (files_root / name).write_text("x\n")
        os.utime(files_root / name, (now - age, now - age))
    # Every other file of the demo workspace is older than any span asked.
    for path in files_root.rglob("*"):
        if path.is_file() and path.name not in ("fresh.md", "week.md", "old.md"):
            os.utime(path, (now - 400 * day, now - 400 * day))
    events, reply, tools = await run(conversation, people.bob, "recent")
    assert events[-1]["type"] == "turn.completed"
    assert [f["path"] for f in tools[0]["result"]["files"]] == ["notes/fresh.md", "reports/week.md"]
    assert reply.startswith("Changed in the last 7 days, newest first:")
    assert "- `notes/fresh.md`, 2 minutes ago" in reply
    assert "- `reports/week.md`, 3 days ago" in reply and "old.md" not in reply
    for request_text, says in (
        ("recent 1", "Changed in the last day, newest first:\n\n- `notes/fresh.md`, 2 minutes"),
        ("recent 400 days", "Tell me a number of days, from 1 to 366: `recent 3`."),
        ("recent lately", "Tell me a number of days, from 1 to 366: `recent 3`."),
    ):
        other = await sync_to_async(services.conversation_create)(
            workspace=conversation.workspace, user=people.bob.user, title=request_text
        )
        _, reply, _ = await run(other, people.bob, request_text)
        assert reply.startswith(says) and "week.md" not in reply, reply
    # The time it counted from is in the turn's journal, for a resumed turn to count the same.
    clock = await TurnStep.objects.filter(turn_id=events[0]["turn"], kind="clock").aget()
    began = datetime.fromisoformat(clock.outcome["value"]).timestamp()
    assert now - 5 <= began <= time.time()


async def test_note_suggests_what_follows_it_as_the_title(people, conversation, files_root):
    title = "Retro ideas for next sprint"
    _, reply, questions = await converse(
        conversation, people.bob, f"note {title}", [{"answer": {"title": title}}]
    )
    assert questions[0]["schema"]["properties"]["title"]["default"] == title
    assert reply == "Wrote `notes/retro-ideas-for-next-sprint.md`."
    # Kept as the title, it is not written again as the note's text.
    assert (files_root / "notes/retro-ideas-for-next-sprint.md").read_text() == f"# {title}\n\n"
