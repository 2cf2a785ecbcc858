"""Path safety inside a workspace's files root, and what every way in (the REST browse, a path
answer, the builtin agent's tools in a turn, the model's tools) makes of what cannot be used:
loops of links, links to nothing or outside, names too long in bytes, pipes, sockets and
entries that cannot be read. Each is refused with a sentence naming the path relative to the
workspace, never the server's own paths, and a folder holding one still lists the others."""

import json
import os
import stat
from pathlib import Path

import pytest

from conversations.agents import llm_tools
from conversations.files import (
    UnsafePath,
    list_folder,
    read_text,
    real_path,
    walk_files,
    write_text,
)
from tests import llm_server as llm
from tests.conftest import all_events, wait_for_turn_end, wait_until
from tests.helpers import (
    ask,
    create_conversation,
    in_thread,
    reply,
    server_paths,
    start,
    start_honoring_permissions,
    wait_pending,
)

# A name of 200 characters but 400 bytes: the file system counts bytes.
LONG_NAME = "é" * 200
# Names of 252 bytes in 63 characters, four deep: where the link 'far' leads (see bad_notes). A
# path of 963 characters through it (under the 1,024 allowed) leads to one of over 1,200
# characters (and past Linux's limit for a whole path, 4,096 bytes), which no path may be.
FAR_CHAIN = "/".join(["𝄞" * 63] * 4)
TOO_FAR = "far/" + "/".join(["𝄞" * 63] * 15)

LOOP = "a loop of symbolic links"
DANGLING = "a symbolic link to something that does not exist"
OUTSIDE = "a link that leads outside the workspace's files"
DENIED = "permission denied"
TOO_LONG = "the path it leads to is longer than 1024 characters"


def loosen(folder: Path) -> None:
    """Give back the permissions plant_bad_entries took (so the next test can remove all)."""
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink() and (path.is_dir() or path.is_file()):
            path.chmod(0o755 if path.is_dir() else 0o644)


# The payloads ----------------------------------------------------------------------------------


def plant_bad_entries(folder: Path, unreadable: bool = True) -> dict[str, str]:
    """One entry of each kind that cannot be used, in ``folder``: each name and the problem
    a listing gives for it."""
    os.symlink("loop", folder / "loop")
    os.symlink("pong", folder / "ping")
    os.symlink("ping", folder / "pong")
    os.symlink("nowhere.md", folder / "dangling.md")
    os.symlink("/etc", folder / "escape")
    os.mkfifo(folder / "pipe")
    os.mknod(folder / "socket", 0o644 | stat.S_IFSOCK)
    problems = {
        "dangling.md": DANGLING,
        "escape": OUTSIDE,
        "loop": LOOP,
        "ping": LOOP,
        "pipe": "a named pipe, not a file or folder",
        "pong": LOOP,
        "socket": "a socket, not a file or folder",
    }
    if unreadable:
        (folder / "locked").mkdir()
        (folder / "locked" / "inside.md").write_text("# Locked away\n")
        (folder / "locked").chmod(0)
        (folder / "secret.md").write_text("# Secret\n")
        (folder / "secret.md").chmod(0)
        problems |= {"locked": DENIED, "secret.md": DENIED}
    return problems


@pytest.fixture
def bad_notes(files_root):
    """The demo's notes/ with every bad entry planted beside its two good files; and 'far', a
    link to a folder four long names deep (for TOO_FAR)."""
    (files_root / "deep" / FAR_CHAIN).mkdir(parents=True)
    os.symlink(f"deep/{FAR_CHAIN}", files_root / "far")
    yield plant_bad_entries(files_root / "notes")
    loosen(files_root)


def assert_no_server_path(text: str) -> None:
    for path in server_paths():
        assert path not in text, f"{path} shown in: {text[:2000]}"


# The file layer itself ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, reason",
    [
        ("../secret", "'..'"),
        ("notes/../../x", "'..'"),
        ("/etc/passwd", "relative"),
        ("notes/\x00.md", "NUL"),
        ("a" * 256, "longer than 255"),
        (LONG_NAME, "longer than 255 bytes (in UTF-8)"),
        (f"notes/{LONG_NAME}/x.md", "longer than 255 bytes (in UTF-8)"),
        ("a/" * 600, "longer than 1024"),
        ("escape/passwd", "outside"),
        ("escape", "outside"),
        ("loop", f"'loop' cannot be used ({LOOP})."),
        ("loop/deeper/x.md", f"'loop' cannot be used ({LOOP})."),
        ("ping", f"'ping' cannot be used ({LOOP})."),
        ("dangling.md", f"'dangling.md' cannot be used ({DANGLING})."),
        ("gone/x.md", f"'gone' cannot be used ({DANGLING})."),
        ("away", "outside"),
        (".env", "Hidden files and folders"),
        ("notes/.git/config", "Hidden files and folders"),
        ("envlink", "'envlink' cannot be used (a link to a hidden file or folder)."),
        ("up-and-hidden/x", "'up-and-hidden' cannot be used (a link to a hidden file or folder)."),
    ],
)
def test_paths_that_leave_the_root_or_are_malformed_are_refused(files_root, path, reason):
    os.symlink("/etc", files_root / "escape")
    os.symlink("loop", files_root / "loop")
    os.symlink("pong", files_root / "ping")
    os.symlink("ping", files_root / "pong")
    os.symlink("nowhere.md", files_root / "dangling.md")
    os.symlink("nowhere", files_root / "gone")
    os.symlink("/nonexistent/place", files_root / "away")
    (files_root / ".env").write_text("SECRET_ENV=1\n")
    os.symlink(".env", files_root / "envlink")
    os.symlink("notes/../.git", files_root / "up-and-hidden")
    with pytest.raises(UnsafePath) as refused:
        real_path(files_root, path)
    assert reason in str(refused.value)
    assert_no_server_path(str(refused.value))


def test_a_path_leading_to_one_too_long_to_name_is_refused(files_root, bad_notes):
    assert len(TOO_FAR) < 1024 and real_path(files_root, "far") == f"deep/{FAR_CHAIN}"
    with pytest.raises(UnsafePath) as refused:
        real_path(files_root, TOO_FAR)
    assert str(refused.value) == f"'{TOO_FAR}' cannot be used ({TOO_LONG})."


def test_names_are_taken_as_they_are(files_root):
    """Spaces, backslashes and colons are parts of names on this system: a path naming them
    is not trimmed, split or taken for a Windows drive."""
    for name in (" leading space", "trailing space ", "back\\slash", "C:", "C:\\Windows"):
        (files_root / name).mkdir()
        (files_root / name / "x.md").write_text("x\n")
        assert real_path(files_root, f"{name}/x.md") == f"{name}/x.md"
        assert list_folder(files_root, name).entries[0].path == f"{name}/x.md"


def test_paths_inside_resolve_even_through_inner_links(files_root):
    os.symlink(files_root / "notes", files_root / "shortcut")
    os.symlink("../notes/ideas.md", files_root / "docs" / "ideas-link.md")
    os.symlink("../docs/../notes/./", files_root / "reports" / "notes-again")
    assert real_path(files_root, "shortcut/ideas.md") == "notes/ideas.md"
    assert real_path(files_root, "docs/ideas-link.md") == "notes/ideas.md"
    assert real_path(files_root, "reports/notes-again/ideas.md") == "notes/ideas.md"
    assert real_path(files_root, "./notes//ideas.md") == "notes/ideas.md"
    assert real_path(files_root, "") == ""
    # What does not exist yet (a file about to be written) resolves by name.
    assert real_path(files_root, "shortcut/new/plan.md") == "notes/new/plan.md"


def test_listing_puts_folders_first_and_hides_links_that_leave(files_root):
    os.symlink("/etc", files_root / "escape")
    (files_root / ".hidden").write_text("x")
    listing = list_folder(files_root, "")
    assert [(e.name, e.kind) for e in listing.entries] == [
        ("data", "folder"),
        ("docs", "folder"),
        ("notes", "folder"),
        ("reports", "folder"),
        ("README.md", "file"),
    ]
    assert [s.as_dict() for s in listing.skipped] == [
        {"name": "escape", "path": "escape", "problem": OUTSIDE}
    ]
    assert [e.path for e in list_folder(files_root, "notes").entries] == [
        "notes/ideas.md",
        "notes/meeting-2026-11-02.md",
    ]
    with pytest.raises(NotADirectoryError):
        list_folder(files_root, "README.md")
    with pytest.raises(FileNotFoundError):
        list_folder(files_root, "nowhere")


def test_a_folder_with_bad_entries_still_lists_the_others_and_says_which_it_left_out(
    files_root, bad_notes
):
    listing = in_thread(lambda: list_folder(files_root, "notes"))
    assert [e.name for e in listing.entries] == ["ideas.md", "meeting-2026-11-02.md"]
    assert {s.name: s.problem for s in listing.skipped} == bad_notes
    assert all(s.path == f"notes/{s.name}" for s in listing.skipped)
    # The folder itself, reached through a link that stays inside, lists the same.
    os.symlink("notes", files_root / "shortcut")
    assert in_thread(lambda: list_folder(files_root, "shortcut")).entries == listing.entries


def test_folders_that_cannot_be_listed_say_why_relative_to_the_root(files_root, bad_notes):
    for path, says in [
        ("notes/loop", f"'notes/loop' cannot be used ({LOOP})."),
        ("notes/pipe", "'notes/pipe' cannot be used (a named pipe, not a file or folder)."),
        ("notes/socket", "'notes/socket' cannot be used (a socket, not a file or folder)."),
        ("notes/locked", f"'notes/locked' cannot be used ({DENIED})."),
        ("notes/locked/deeper", f"'notes/locked/deeper' cannot be used ({DENIED})."),
    ]:
        with pytest.raises(UnsafePath) as refused:
            in_thread(lambda path=path: list_folder(files_root, path))
        assert str(refused.value) == says


def test_walking_skips_links_that_leave_the_root_and_names_what_it_left_out(files_root, bad_notes):
    os.symlink("/etc/hostname", files_root / "notes" / "host")
    os.symlink("ideas.md", files_root / "notes" / "same-ideas.md")
    skipped = []
    walked = in_thread(lambda: [f.path for f in walk_files(files_root, skipped=skipped)])
    assert "notes/host" not in walked and "notes/same-ideas.md" in walked
    # The eight demo files, the inner link, and the unreadable file (walking does not read).
    assert len(walked) == 10 and "notes/secret.md" in walked
    left_out = {s.path: s.problem for s in skipped}
    assert left_out == {
        "notes/host": OUTSIDE,
        **{f"notes/{name}": problem for name, problem in bad_notes.items() if name != "secret.md"},
    }


def test_a_pipe_is_never_opened_for_reading_nor_writing(files_root, bad_notes):
    for act in (
        lambda: read_text(files_root, "notes/pipe"),
        lambda: write_text(files_root, "notes/pipe", "x"),
    ):
        with pytest.raises(UnsafePath, match="named pipe"):
            in_thread(act, timeout=30)


def test_names_that_are_not_utf8_are_left_out_by_name(files_root):
    os.mkdir(os.fsencode(files_root / "notes") + b"/caf\xe9")
    # A link whose name is text, to that folder: the path it leads to could not be shown.
    os.symlink(b"caf\xe9", os.fsencode(files_root / "notes") + b"/cafe")
    listing = list_folder(files_root, "notes")
    assert [e.name for e in listing.entries] == ["ideas.md", "meeting-2026-11-02.md"]
    assert [s.as_dict() for s in listing.skipped] == [
        {"name": "cafe", "path": "notes/cafe", "problem": "a link to a name that is not UTF-8"},
        {"name": "caf\ufffd", "path": "notes/caf\ufffd", "problem": "its name is not UTF-8"},
    ]
    json.dumps([s.as_dict() for s in listing.skipped]).encode()  # JSON and UTF-8 take it
    with pytest.raises(UnsafePath, match="'notes/cafe' cannot be used"):
        real_path(files_root, "notes/cafe")
    # A walk leaves the folder out by name, and goes neither into it nor through the link.
    with open(os.fsencode(files_root / "notes") + b"/caf\xe9/inside.md", "w") as file:
        file.write("x\n")
    skipped = []
    walked = [f.path for f in walk_files(files_root, "notes", skipped=skipped)]
    assert walked == ["notes/ideas.md", "notes/meeting-2026-11-02.md"]
    assert {s.path: s.problem for s in skipped} == {
        "notes/cafe": "a link to a name that is not UTF-8",
        "notes/caf\ufffd": "its name is not UTF-8",
    }


# REST: browsing a path question's folder and answering it -----------------------------------------


def test_browse_lists_the_good_entries_and_refuses_each_bad_one(make_server, people, bad_notes):
    server = start_honoring_permissions(make_server)
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [ask(kind="path", mode="any", root="notes"), ask(kind="path")])
        sid = wait_pending(client, cid)["id"]
        url = f"/api/selections/{sid}/browse/"
        listing = client.get(url)
        assert listing.status_code == 200, listing.text
        body = listing.json()
        assert [e["name"] for e in body["entries"]] == ["ideas.md", "meeting-2026-11-02.md"]
        assert {s["name"]: s["problem"] for s in body["skipped"]} == bad_notes
        assert all(s["path"] == s["name"] for s in body["skipped"])  # relative to the question
        for path, says in [
            ("loop", f"'loop' cannot be used ({LOOP})."),
            ("loop/deeper", f"'loop' cannot be used ({LOOP})."),
            ("ping", f"'ping' cannot be used ({LOOP})."),
            ("dangling.md", f"'dangling.md' cannot be used ({DANGLING})."),
            ("pipe", "'pipe' cannot be used (a named pipe, not a file or folder)."),
            ("socket", "'socket' cannot be used (a socket, not a file or folder)."),
            ("locked", f"'locked' cannot be used ({DENIED})."),
            ("escape", "The path leads outside the workspace's files."),
            (LONG_NAME, "A name in the path is longer than 255 bytes (in UTF-8)."),
        ]:
            response = client.get(url, params={"path": path})
            assert response.status_code == 400, (path, response.text)
            error = response.json()["error"]
            assert error["code"] == "invalid_path" and says in error["message"], (path, error)
            assert_no_server_path(response.text)
        reply(client, sid, action="dismiss")
        # From the workspace's root, a path through 'far' passes the system's limit.
        root_question = wait_until(lambda: _next_question(client, cid, sid))
        response = client.get(f"/api/selections/{root_question}/browse/", params={"path": TOO_FAR})
        assert response.status_code == 400, response.text
        assert response.json()["error"]["message"] == f"'{TOO_FAR}' cannot be used ({TOO_LONG})."
        reply(client, root_question, action="dismiss")
        wait_for_turn_end(client, cid)


def _next_question(client, cid: str, after: str) -> str | None:
    """The id of the conversation's pending question once it is not ``after``."""
    pending = client.get(f"/api/conversations/{cid}/in-flight/").json()["pending_selections"]
    return pending[0]["id"] if pending and pending[0]["id"] != after else None


def test_path_answers_naming_bad_entries_are_refused_and_change_nothing(
    make_server, people, files_root, bad_notes
):
    os.symlink("ideas.md", files_root / "notes" / "same-ideas.md")
    server = start_honoring_permissions(make_server)
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [ask(kind="path", mode="any", root="notes"), ask(kind="path")])
        sid = wait_pending(client, cid)["id"]
        for answer, says in [
            ("loop", f"answer: 'loop' cannot be used ({LOOP})."),
            ("loop/x.md", f"answer: 'loop' cannot be used ({LOOP})."),
            ("pong", f"answer: 'pong' cannot be used ({LOOP})."),
            ("dangling.md", f"answer: 'dangling.md' cannot be used ({DANGLING})."),
            ("pipe", "answer: 'pipe' cannot be used (a named pipe, not a file or folder)."),
            ("socket", "answer: 'socket' cannot be used (a socket, not a file or folder)."),
            ("locked", f"answer: 'locked' cannot be used ({DENIED})."),
            ("locked/inside.md", f"answer: 'locked/inside.md' cannot be used ({DENIED})."),
            ("secret.md", f"answer: 'secret.md' cannot be used ({DENIED})."),
            ("escape", "answer: The path leads outside the workspace's files."),
            ("escape/passwd", "answer: The path leads outside the workspace's files."),
            (LONG_NAME, "answer: A name in the path is longer than 255 bytes (in UTF-8)."),
        ]:
            response = reply(client, sid, answer=answer)
            assert response.status_code == 400, (answer, response.text)
            error = response.json()["error"]
            assert error["code"] == "invalid_answer" and says in error["message"], (answer, error)
            assert_no_server_path(response.text)
        assert client.get(f"/api/selections/{sid}/").json()["status"] == "pending"
        # A link that stays inside still answers, as before.
        accepted = reply(client, sid, answer="same-ideas.md")
        assert accepted.status_code == 200 and accepted.json()["answer"] == "ideas.md"
        root_question = wait_until(lambda: _next_question(client, cid, sid))
        response = reply(client, root_question, answer=TOO_FAR)
        assert response.status_code == 400, response.text
        assert response.json()["error"]["message"] == (
            f"answer: '{TOO_FAR}' cannot be used ({TOO_LONG})."
        )
        reply(client, root_question, action="dismiss")
        wait_for_turn_end(client, cid)


def test_a_question_whose_folder_became_a_loop_is_refused_not_a_500(
    make_server, people, files_root
):
    (files_root / "drafts").mkdir()
    server = make_server()
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [ask(kind="path", mode="any", root="drafts")])
        sid = wait_pending(client, cid)["id"]
        (files_root / "drafts").rmdir()
        os.symlink("drafts", files_root / "drafts")
        browsed = client.get(f"/api/selections/{sid}/browse/")
        assert browsed.status_code == 400
        assert browsed.json()["error"]["message"] == f"'drafts' cannot be used ({LOOP})."
        answered = reply(client, sid, answer="x.md")
        assert answered.status_code == 400
        assert answered.json()["error"]["message"] == (
            f"answer: the question's folder can no longer be used: "
            f"'drafts' cannot be used ({LOOP})."
        )
        reply(client, sid, action="dismiss")
        wait_for_turn_end(client, cid)


# The builtin agent's tools, in real turns ------------------------------------------------------


def builtin_turn(client, cid: str, text: str, answers=()) -> tuple[list[dict], str, list[dict]]:
    """Run a builtin turn over REST, answering its questions with ``answers`` in order, each
    ``(body, status it must get)`` (a refused path answer leaves the question open for the
    next). Returns the turn's events, its reply and its tool results."""
    turn = start(client, cid, text)
    answers = list(answers)
    while answers:
        question = wait_pending(client, cid, timeout=30)
        body, status = answers.pop(0)
        response = reply(client, question["id"], **body)
        assert response.status_code == status, (text, body, response.text)
        assert_no_server_path(response.text)
    wait_for_turn_end(client, cid)
    events = [e for e in all_events(client, cid) if e["turn"] == turn]
    assert_no_server_path(json.dumps(events, ensure_ascii=False))
    assert events[-1]["type"] == "turn.completed", (text, events[-1])
    said = "".join(e["data"]["text"] for e in events if e["type"] == "message.completed")
    tools = [e["data"] for e in events if e["type"] == "tool.completed"]
    return events, said, tools


def test_the_builtin_agent_lists_finds_and_summarizes_around_bad_entries(
    make_server, people, files_root, bad_notes
):
    server = start_honoring_permissions(make_server, PARLEY_BUILTIN_PACE_MS="0")
    with server.client(people.bob) as client:
        cid = create_conversation(client, agent="builtin")

        _, said, (listed,) = builtin_turn(client, cid, "list notes")
        assert [e["name"] for e in listed["result"]["entries"]] == [
            "ideas.md",
            "meeting-2026-11-02.md",
        ]
        assert {s["path"]: s["problem"] for s in listed["result"]["skipped"]} == {
            f"notes/{name}": problem for name, problem in bad_notes.items()
        }
        assert "`notes` holds 2 entries" in said and "I left out 9 entries I can't use" in said
        assert f"- `notes/loop`: {LOOP}" in said and f"- `notes/locked`: {DENIED}" in said

        _, said, (found,) = builtin_turn(client, cid, "find ideas")
        assert "notes/ideas.md" in found["result"]["files"]
        assert {s["path"] for s in found["result"]["skipped"]} == {
            f"notes/{name}" for name in bad_notes
        }
        assert "I left out 9 entries I can't use" in said

        for text, says in [
            ("list notes/loop", f"I can't use `notes/loop`: 'notes/loop' cannot be used ({LOOP})."),
            ("list notes/dangling.md", f"({DANGLING})."),
            ("list notes/locked", "I can't use `notes/locked`: 'notes/locked' cannot be used "),
            (f"list {LONG_NAME}", "A name in the path is longer than 255 bytes (in UTF-8)."),
            (f"list {TOO_FAR}", TOO_LONG),
            ("summarize notes/loop", f"'notes/loop' cannot be used ({LOOP})."),
            ("summarize notes/ping", f"'notes/ping' cannot be used ({LOOP})."),
            ("summarize notes/dangling.md", f"'notes/dangling.md' cannot be used ({DANGLING})."),
            ("summarize notes/pipe", "'notes/pipe' cannot be used (a named pipe, not a file"),
            ("summarize notes/socket", "'notes/socket' cannot be used (a socket, not a file"),
            ("summarize notes/secret.md", f"'notes/secret.md' cannot be used ({DENIED})."),
            ("summarize notes/locked/inside.md", "'notes/locked/inside.md' cannot be used"),
            ("summarize notes/escape/passwd", "The path leads outside the workspace's files."),
            (f"summarize {LONG_NAME}", "longer than 255 bytes (in UTF-8)."),
            ("compare notes/ideas.md notes/pipe", "'notes/pipe' cannot be used (a named pipe"),
            ("rename notes/loop", f"'notes/loop' cannot be used ({LOOP})."),
        ]:
            _, said, _ = builtin_turn(client, cid, text)
            assert says in said, (text, said)

        # The picker's answers are checked as any path answer: the bad ones are refused.
        _, said, (summary,) = builtin_turn(
            client,
            cid,
            "summarize",
            [
                ({"answer": "notes/loop"}, 400),
                ({"answer": "notes/pipe"}, 400),
                ({"answer": f"notes/{LONG_NAME}"}, 400),
                ({"answer": "notes/ideas.md"}, 200),
            ],
        )
        assert said.startswith("**notes/ideas.md**") and "error" not in summary["result"]

        _, said, _ = builtin_turn(
            client,
            cid,
            "rename notes/ideas.md",
            [
                ({"answer": LONG_NAME}, 200),
                ({"answer": "dangling.md"}, 200),
                ({"answer": "loop"}, 200),
            ],
        )
        assert said == (
            "I can't use that name either: `notes/loop` already exists. "
            "After 3 tries, `notes/ideas.md` keeps its name."
        )
        prompts = [
            e["data"]["prompt"]
            for e in all_events(client, cid)
            if e["type"] == "selection.requested"
        ]
        assert "it is longer than 255 bytes in UTF-8" in prompts[-2]
        assert "`notes/dangling.md` already exists" in prompts[-1]

        _, said, _ = builtin_turn(
            client,
            cid,
            "tidy",
            [({"answer": ["empty-folders", "trailing-whitespace", "final-newline"]}, 200)],
        )
        assert said.startswith("Done:")
    assert (files_root / "notes" / "ideas.md").is_file()


def test_the_builtin_agent_says_why_it_cannot_write_a_note_into_a_loop(server, people, files_root):
    for path in (files_root / "notes").iterdir():
        path.unlink()
    (files_root / "notes").rmdir()
    os.symlink("notes", files_root / "notes")
    with server.client(people.bob) as client:
        cid = create_conversation(client, agent="builtin")
        _, said, (note,) = builtin_turn(
            client, cid, "note plans", [({"answer": {"title": "Plans"}}, 200)]
        )
    assert note["result"] == {"error": f"I can't write the note: 'notes' cannot be used ({LOOP})."}
    assert said == note["result"]["error"]


# The model's tools: their functions on a real workspace, and in a real turn --------------------


def test_the_models_file_tools_refuse_bad_entries_by_their_relative_path(files_root, bad_notes):
    root = files_root

    def refusal(tool, *args) -> str:
        def call():
            with pytest.raises(llm_tools.ToolFailed) as refused:
                tool(root, *args)
            return str(refused.value)

        message = in_thread(call)
        assert_no_server_path(message)
        return message

    listed = in_thread(lambda: llm_tools.list_files(root, "notes"))
    assert [e["name"] for e in listed["entries"]] == ["ideas.md", "meeting-2026-11-02.md"]
    assert {s["name"]: s["problem"] for s in listed["skipped"]} == bad_notes
    assert listed["skipped_count"] == len(bad_notes)

    found = in_thread(lambda: llm_tools.search_files(root, "idea", "notes"))
    assert {m["path"] for m in found["matches"]} == {"notes/ideas.md"}
    assert {s["path"]: s["problem"] for s in found["skipped"]} == {
        f"notes/{name}": problem for name, problem in bad_notes.items()
    }

    assert refusal(llm_tools.list_files, "notes/loop") == (f"'notes/loop' cannot be used ({LOOP}).")
    assert refusal(llm_tools.list_files, "notes/locked") == (
        f"'notes/locked' cannot be used ({DENIED})."
    )
    assert refusal(llm_tools.read_file, "notes/ping") == f"'notes/ping' cannot be used ({LOOP})."
    assert refusal(llm_tools.read_file, "notes/dangling.md") == (
        f"'notes/dangling.md' cannot be used ({DANGLING})."
    )
    assert "named pipe" in refusal(llm_tools.read_file, "notes/pipe")
    assert "a socket" in refusal(llm_tools.read_file, "notes/socket")
    assert refusal(llm_tools.read_file, "notes/secret.md") == (
        f"'notes/secret.md' cannot be used ({DENIED})."
    )
    assert "longer than 255 bytes" in refusal(llm_tools.read_file, LONG_NAME)
    assert TOO_LONG in refusal(llm_tools.read_file, TOO_FAR)
    assert "leads outside" in refusal(llm_tools.read_file, "notes/escape/passwd")
    assert "named pipe" in refusal(llm_tools.write_file, "notes/pipe", "x")
    assert refusal(llm_tools.write_file, "notes/loop/plan.md", "x") == (
        f"'notes/loop' cannot be used ({LOOP})."
    )
    assert refusal(llm_tools.write_file, "notes/secret.md", "x") == (
        f"'notes/secret.md' cannot be used ({DENIED})."
    )
    assert "longer than 255 bytes" in refusal(llm_tools.write_file, f"notes/{LONG_NAME}", "x")
    assert refusal(llm_tools.rename_file, "notes/ideas.md", "notes/dangling.md") == (
        f"'notes/dangling.md' cannot be used ({DANGLING})."
    )
    assert refusal(llm_tools.rename_file, "notes/ideas.md", "notes/pipe") == (
        "'notes/pipe' already exists."
    )
    assert "'notes/loop' cannot be used" in refusal(llm_tools.rename_file, "notes/loop", "x.md")
    assert "longer than 255 bytes" in refusal(
        llm_tools.rename_file, "notes/ideas.md", f"notes/{LONG_NAME}"
    )
    assert refusal(llm_tools.search_files, "x", "notes/locked") == (
        f"'notes/locked' cannot be used ({DENIED})."
    )
    # Nothing was written or moved.
    assert (root / "notes" / "ideas.md").is_file()
    assert not (root / "notes" / "nowhere.md").exists()


@pytest.mark.once
def test_the_models_tools_tell_it_what_is_wrong_without_the_servers_paths(
    start_parley, model, people, files_root
):
    problems = plant_bad_entries(files_root / "notes", unreadable=False)
    model.script(
        llm.tool_calls(
            ("list_files", {"path": "notes"}),
            ("read_file", {"path": "notes/loop"}),
            ("read_file", {"path": "notes/pipe"}),
            ("read_file", {"path": LONG_NAME}),
            ("search_files", {"text": "idea"}),
        ),
        llm.text("Done."),
    )
    server = start_parley()
    with server.client(people.alice) as client:
        response = client.post(
            "/api/conversations/",
            json={"workspace": "team", "title": "Bad entries", "agent": "openai"},
        )
        cid = response.json()["id"]
        start(client, cid, "Look at the notes")
        wait_for_turn_end(client, cid)
        events = all_events(client, cid)
    assert events[-1]["type"] == "turn.completed"
    assert_no_server_path(json.dumps(events, ensure_ascii=False))
    _, second = model.wait_requests(2)
    assert_no_server_path(json.dumps(second, ensure_ascii=False))
    listed, loop, pipe, long_name, found = [
        json.loads(m["content"]) for m in second["messages"] if m["role"] == "tool"
    ]
    assert {s["name"]: s["problem"] for s in listed["skipped"]} == problems
    assert loop == {"error": f"'notes/loop' cannot be used ({LOOP})."}
    assert pipe == {"error": "'notes/pipe' cannot be used (a named pipe, not a file or folder)."}
    assert "longer than 255 bytes" in long_name["error"]
    assert "notes/ideas.md" in {m["path"] for m in found["matches"]}
