"""What the agents' file tools and the path picker can reach: no hidden file, nor a link to one,
in any tool (the model's search, list, read, write and rename; the builtin agent's find, list,
summarize, rename and tidy; the picker and its answers); nothing outside the workspace while a
folder is swapped for a link to an outside one in a tight loop; and whatever the picker offers,
an answer takes."""

import ctypes
import json
import os
import threading
import time

import pytest

from conversations.agents import builtin_tools, llm_tools
from tests import llm_server as llm
from tests.conftest import all_events, wait_for_turn_end
from tests.helpers import (
    ask,
    create_conversation,
    create_model_conversation,
    finished,
    in_thread,
    reply,
    start,
    start_model_turn,
    tool_messages,
    wait_pending,
)

SECRET = "SECRET_ENV=hunter2"
GIT_SECRET = "gitpass-4242"
HIDDEN_TARGET = "a link to a hidden file or folder"
HIDDEN = "Hidden files and folders (names starting with a dot) are out of reach."


@pytest.fixture
def envlink(files_root):
    """The issue's reproduction: ``notes/envlink -> ../.env``, and a link to a hidden folder
    beside it (``notes/gitlink -> ../.git``), each holding a secret."""
    (files_root / ".env").write_text(f"{SECRET}\n")
    (files_root / ".git").mkdir()
    (files_root / ".git" / "config").write_text(f"token = {GIT_SECRET}\n")
    os.symlink("../.env", files_root / "notes" / "envlink")
    os.symlink("../.git", files_root / "notes" / "gitlink")
    return files_root


def assert_no_secret(text: str) -> None:
    """No line of the secrets (the searches name what they look for: not that)."""
    assert "hunter2" not in text and GIT_SECRET not in text, text[:3000]


def assert_secrets_untouched(root) -> None:
    assert (root / ".env").read_text() == f"{SECRET}\n"
    assert (root / ".git" / "config").read_text() == f"token = {GIT_SECRET}\n"
    assert os.readlink(root / "notes" / "envlink") == "../.env"
    assert sorted(os.listdir(root / ".git")) == ["config"]


# Hidden files, through a link or not ----------------------------------------------------------


@pytest.mark.once
def test_the_model_reaches_no_hidden_file_in_any_tool(start_parley, model, people, envlink):
    model.script(
        llm.tool_calls(
            ("search_files", {"text": "SECRET_ENV"}),
            ("search_files", {"text": "token", "path": "notes"}),
            ("list_files", {"path": "notes"}),
            ("list_files", {"path": "notes/gitlink"}),
            ("read_file", {"path": "notes/envlink"}),
            ("read_file", {"path": "notes/gitlink/config"}),
            ("read_file", {"path": ".env"}),
            ("write_file", {"path": "notes/envlink", "content": "overwritten"}),
            ("write_file", {"path": "notes/gitlink/config", "content": "overwritten"}),
            ("rename_file", {"path": "notes/envlink", "new_path": "notes/env.md"}),
            ("rename_file", {"path": ".env", "new_path": "env.md"}),
            ("rename_file", {"path": "notes/ideas.md", "new_path": ".ideas.md"}),
        ),
        llm.text("Done."),
    )
    server = start_parley()
    with server.client(people.alice) as client:
        cid = create_model_conversation(client)
        start_model_turn(client, cid, "Find the secrets", confirm_writes=False)
        events = finished(client, cid)
    assert events[-1]["type"] == "turn.completed"
    _, second = model.wait_requests(2)
    assert_no_secret(json.dumps(events))
    assert_no_secret(json.dumps(second))
    results = [json.loads(m["content"]) for m in tool_messages(second)]
    found, found_in_notes, listed, *refused = results
    assert found["matches"] == [] and found_in_notes["matches"] == []
    assert {s["path"]: s["problem"] for s in found["skipped"]} == {
        "notes/envlink": HIDDEN_TARGET,
        "notes/gitlink": HIDDEN_TARGET,
    }
    assert "envlink" not in {e["name"] for e in listed["entries"]}
    assert {s["name"]: s["problem"] for s in listed["skipped"]} == {
        "envlink": HIDDEN_TARGET,
        "gitlink": HIDDEN_TARGET,
    }
    assert [r["error"] for r in refused] == [
        f"'notes/gitlink' cannot be used ({HIDDEN_TARGET}).",
        f"'notes/envlink' cannot be used ({HIDDEN_TARGET}).",
        f"'notes/gitlink' cannot be used ({HIDDEN_TARGET}).",
        HIDDEN,
        f"'notes/envlink' cannot be used ({HIDDEN_TARGET}).",
        f"'notes/gitlink' cannot be used ({HIDDEN_TARGET}).",
        f"'notes/envlink' cannot be used ({HIDDEN_TARGET}).",
        HIDDEN,
        HIDDEN,
    ]
    assert_secrets_untouched(envlink)
    assert (envlink / "notes" / "ideas.md").is_file() and not (envlink / "env.md").exists()


def builtin_said(client, cid: str, text: str, answers=()) -> str:
    """A builtin turn's reply (its questions answered with ``answers`` in order)."""
    turn = start(client, cid, text)
    for answer in answers:
        reply(client, wait_pending(client, cid, timeout=30)["id"], answer=answer)
    wait_for_turn_end(client, cid)
    events = [e for e in all_events(client, cid) if e["turn"] == turn]
    assert events[-1]["type"] == "turn.completed", (text, events[-1])
    assert_no_secret(json.dumps(events))
    return "".join(e["data"]["text"] for e in events if e["type"] == "message.completed")


def test_the_builtin_agent_reaches_no_hidden_file(make_server, people, envlink):
    # Tidying adds a final newline to text files: never to one reached through a link to .env.
    (envlink / ".env").write_text(SECRET)
    os.symlink("../.env", envlink / "notes" / "env.md")
    server = make_server(PARLEY_BUILTIN_PACE_MS="0")
    with server.client(people.bob) as client:
        cid = create_conversation(client, agent="builtin")
        said = builtin_said(client, cid, "find SECRET_ENV")
        assert said.startswith("Nothing contains `SECRET_ENV`.")
        said = builtin_said(client, cid, "list notes")
        assert f"- `notes/envlink`: {HIDDEN_TARGET}" in said
        assert "`notes/envlink`" not in said.split("I left out")[0]
        for text in ("summarize notes/envlink", "summarize notes/gitlink/config"):
            assert f"cannot be used ({HIDDEN_TARGET})" in builtin_said(client, cid, text)
        assert HIDDEN in builtin_said(client, cid, "summarize .env")
        assert HIDDEN_TARGET in builtin_said(client, cid, "compare notes/ideas.md notes/env.md")
        assert HIDDEN_TARGET in builtin_said(client, cid, "rename notes/envlink")
        said = builtin_said(client, cid, "tidy", [["final-newline", "trailing-whitespace"]])
        assert said.startswith("Done:")
    assert (envlink / ".env").read_text() == SECRET
    assert os.readlink(envlink / "notes" / "env.md") == "../.env"


def test_the_picker_offers_no_hidden_file_and_an_answer_naming_one_is_refused(
    make_server, people, envlink
):
    server = make_server()
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [ask(kind="path", mode="any")])
        sid = wait_pending(client, cid)["id"]
        url = f"/api/selections/{sid}/browse/"
        root = client.get(url).json()
        assert ".env" not in {e["name"] for e in root["entries"]} | {
            s["name"] for s in root.get("skipped", [])
        }
        notes = client.get(url, params={"path": "notes"}).json()
        assert {s["name"]: s["problem"] for s in notes["skipped"]} == {
            "envlink": HIDDEN_TARGET,
            "gitlink": HIDDEN_TARGET,
        }
        for path in (".git", "notes/gitlink"):
            browsed = client.get(url, params={"path": path})
            assert browsed.status_code == 400 and "GIT" not in browsed.text
        for answer, says in [
            ("notes/envlink", f"answer: 'notes/envlink' cannot be used ({HIDDEN_TARGET})."),
            ("notes/gitlink/config", f"answer: 'notes/gitlink' cannot be used ({HIDDEN_TARGET})."),
            (".env", f"answer: {HIDDEN}"),
            ("notes/../.env", "answer: The path may not contain '..'."),
        ]:
            response = reply(client, sid, answer=answer)
            assert response.status_code == 400, (answer, response.text)
            assert response.json()["error"]["message"] == says
        assert client.get(f"/api/selections/{sid}/").json()["status"] == "pending"
        reply(client, sid, action="dismiss")
        wait_for_turn_end(client, cid)


# Swapping a folder for a link to an outside one, in a tight loop ------------------------------

CANARY = "CANARY-outside-the-workspace"
# The least number of times the tools must have met each state of the swapped folder, and the
# most time they get to (on a quiet machine, two seconds or so).
ENOUGH = 200
CEILING = 120


_libc = ctypes.CDLL(None, use_errno=True)
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def exchange(one, other) -> None:
    """Swap two names at once (renameat2 with RENAME_EXCHANGE): never a moment without either."""
    if _libc.renameat2(
        _AT_FDCWD, os.fsencode(one), _AT_FDCWD, os.fsencode(other), _RENAME_EXCHANGE
    ):
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))


def swap_until(root, stop: threading.Event, swaps: list) -> None:
    """Swap ``sub`` between its real folder and a link to the outside one (the other parked under
    a hidden name, which no tool sees), as fast as the system lets, until told to stop."""
    try:
        while not stop.is_set():
            exchange(root / "sub", root / ".other")
            swaps[0] += 1
    except BaseException as exc:  # the test's thread reports it
        swaps.append(exc)


def test_swapping_a_folder_for_a_link_never_leads_the_tools_outside(files_root):
    outside = files_root.parent / "outside-race"
    outside.mkdir()
    # No final newline: a tidy that reached it would add one.
    (outside / "x.md").write_text(CANARY)
    (files_root / "sub").mkdir()
    (files_root / "sub" / "x.md").write_text("inside\n")
    os.symlink(outside, files_root / ".other")
    seen = {"inside": 0, "refused": 0, "calls": 0}
    shown = []

    def note(result) -> None:
        text = json.dumps(result)
        if CANARY in text:
            shown.append(text)
        seen["inside"] += "inside" in text
        seen["calls"] += 1

    def use_the_tools() -> None:
        deadline = time.monotonic() + CEILING
        while time.monotonic() < deadline and min(seen["inside"], seen["refused"]) < ENOUGH:
            for call in (
                lambda: llm_tools.read_file(files_root, "sub/x.md"),
                lambda: llm_tools.write_file(files_root, "sub/x.md", "inside, written\n"),
                lambda: llm_tools.search_files(files_root, "i", "sub"),
                lambda: llm_tools.list_files(files_root, "sub"),
                lambda: llm_tools.rename_file(files_root, "sub/x.md", "sub/y.md"),
                lambda: llm_tools.rename_file(files_root, "sub/y.md", "sub/x.md"),
                lambda: builtin_tools.find_in_files(files_root, "CANARY"),
                lambda: builtin_tools.summary_of(files_root, "sub/x.md"),
                lambda: builtin_tools.final_newline(files_root),
            ):
                try:
                    note(call())
                except llm_tools.ToolFailed as exc:
                    note(str(exc))
                    seen["refused"] += "leads outside" in str(exc)

    stop, swaps = threading.Event(), [0]
    swapper = threading.Thread(target=swap_until, args=(files_root, stop, swaps), daemon=True)
    swapper.start()
    try:
        in_thread(use_the_tools, timeout=CEILING + 30)
    finally:
        stop.set()
        swapper.join(10)
    print(f"{swaps[0]} swaps, {seen}")
    assert len(swaps) == 1, f"the swapping stopped: {swaps[1:]}"
    # Both states were met many times: the race was run, not missed.
    assert seen["inside"] >= ENOUGH and seen["refused"] >= ENOUGH, (swaps, seen)
    assert shown == [], f"read outside {len(shown)} times: {shown[:3]}"
    assert sorted(os.listdir(outside)) == ["x.md"], "written or moved outside"
    assert (outside / "x.md").read_text() == CANARY, "written outside"


# What the picker offers, an answer takes ------------------------------------------------------

DEEP = "d" * 255


def browse_everything(client, sid: str) -> list[dict]:
    """Every entry the picker offers, browsing each folder it offers from the root."""
    url = f"/api/selections/{sid}/browse/"
    queue, offered = [""], []
    while queue:
        response = client.get(url, params={"path": queue.pop(0)})
        assert response.status_code == 200, response.text
        for entry in response.json()["entries"]:
            offered.append(entry)
            if entry["kind"] == "folder":
                queue.append(entry["path"])
    return offered


def test_whatever_the_picker_offers_an_answer_takes(make_server, people, files_root):
    """The fuzzer's case (a README.md and folders of 255-character names, deep) with the names
    the picker once offered and the answer then refused: a colon second, a leading backslash,
    spaces around."""
    fd = os.open(files_root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(5):  # past 1,024 characters: the fifth is left out, as no path may be
            os.mkdir(DEEP, dir_fd=fd)
            inner = os.open(DEEP, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    for name in ("C:", "x:y.md", "\\windows", " leading", "trailing ", "a\\b.md", "new\nline", " "):
        (files_root / "docs" / name).write_text("odd\n")
    (files_root / "docs" / "C:folder").mkdir()
    os.symlink(f"../{DEEP}/{DEEP}", files_root / "docs" / "deep-link")
    server = make_server(PARLEY_MAX_QUESTIONS_PER_TURN="500")
    with server.client(people.bob) as client:
        cid = create_conversation(client)
        start(client, cid, [ask(kind="path", mode="any")])
        first = wait_pending(client, cid)["id"]
        offered = browse_everything(client, first)
        reply(client, first, action="dismiss")
        wait_for_turn_end(client, cid)
        paths = [entry["path"] for entry in offered]
        assert "/".join([DEEP] * 4) in paths and "/".join([DEEP] * 3) in paths
        assert {"docs/C:", "docs/\\windows", "docs/ leading", "docs/new\nline", "docs/ "} <= set(
            paths
        )

        start(client, cid, [ask(kind="path", mode="any") for _ in offered])
        for entry in offered:
            sid = wait_pending(client, cid)["id"]
            response = reply(client, sid, answer=entry["path"])
            assert response.status_code == 200, (entry["path"][:80], response.text)
            expected = f"{DEEP}/{DEEP}" if entry["path"] == "docs/deep-link" else entry["path"]
            assert response.json()["answer"] == expected
            wait_until_answered(client, cid, sid)
        wait_for_turn_end(client, cid)


def wait_until_answered(client, cid: str, sid: str) -> None:
    """Until the question ``sid`` is no longer the pending one."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pending = client.get(f"/api/conversations/{cid}/in-flight/").json()["pending_selections"]
        if not pending or pending[0]["id"] != sid:
            return
        time.sleep(0.02)
    raise AssertionError(f"question {sid} still pending")
