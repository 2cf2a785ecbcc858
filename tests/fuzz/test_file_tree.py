"""A file-tree fuzzer: Hypothesis grows random trees in the team's workspace (links inside,
outside, looping, dangling, and out by name and back in; names in any script, with spaces,
newlines, leading dashes and dots, of 255 bytes, not UTF-8; named pipes, sockets, devices,
entries that cannot be read; a chain of long names past the system's limit for a path), and
drives one live Daphne over each: browsing a path question's folder, answering it, the builtin
agent's tools in real turns, and the model's tools on the same tree. Nothing outside the
workspace may ever be listed or read, no request may get a 500, no answer, event or message may
show the server's own paths, and the server's log must show no crash.

The server reads files as their permissions say even when the tests run as root (see
start_honoring_permissions), so what cannot be read is tested for real. Meanwhile a thread keeps
making and removing entries in one folder, so that some vanish between a listing and a look."""

import errno
import json
import os
import shutil
import stat
import threading
import time
from pathlib import Path

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from conversations.agents import llm_tools
from tests.conftest import all_events, wait_for_turn_end
from tests.fuzz.conftest import SCALE, budget
from tests.helpers import (
    create_conversation,
    in_thread,
    reply,
    server_paths,
    start,
    start_honoring_permissions,
    wait_pending,
)

# Trees (times PARLEY_FUZZ_SCALE under `make fuzz`): about a minute and a half here.
EXAMPLES = 36
# What lies outside the workspace, where links lead: no answer may ever hold these.
CANARY = "CANARY-outside-the-workspace"
SECRET_NAME = f"secret-{CANARY}.md"
# /etc/passwd's first line begins so on every Linux.
PASSWD = "root:x:0:0"
NEEDLE = "needle"
CHURN = "churn"
# Most requests one example sends to browse its tree (it has a few dozen entries at most).
MAX_BROWSES = 12

# Names --------------------------------------------------------------------------------------------

ODD_NAMES = [
    "notes",
    "a b",
    " leading space",
    "trailing space ",
    "-rf",
    "--help",
    "new\nline",
    "tab\there",
    "carriage\rreturn",
    "..x",
    "x..",
    "...",
    "日本語のメモ",
    "émoji 🎉.md",
    "\u202eright-to-left",
    "e\u0301",
    "*",
    "?",
    "$(id)",
    "`id`",
    "'quoted'",
    '"double"',
    "back\\slash",
    "%2e%2e",
    "~",
    "C:",
    ".hidden",
    "README.md",
    NEEDLE,
]
# Names of exactly 255 bytes in UTF-8 (the most a name may have).
LONGEST_NAMES = ["a" * 255, "é" * 127 + "a", "日" * 85, "𝄞" * 63 + "abc"]


def _fits(name: str) -> bool:
    data = os.fsencode(name)
    return name not in (".", "..") and b"/" not in data and b"\x00" not in data and len(data) <= 255


NAMES = st.one_of(
    st.text(
        st.characters(exclude_categories=("Cs",), exclude_characters="/\x00"),
        min_size=1,
        max_size=16,
    ),
    st.sampled_from(ODD_NAMES),
    st.sampled_from(LONGEST_NAMES),
    # Names that are not UTF-8 (as Python reads them from the disk).
    st.binary(min_size=1, max_size=6).map(lambda raw: os.fsdecode(b"x\xff" + raw)),
).filter(_fits)

# Link targets: (how, a number choosing which entity where one is needed).
LINKS = st.tuples(
    st.sampled_from(
        [
            "inside",
            "inside",
            "absolute inside",
            "out and back",
            "outside file",
            "outside folder",
            "outside by dots",
            "etc",
            "passwd",
            "self",
            "dangling",
            "dangling deep",
            "dangling outside",
        ]
    ),
    st.integers(0, 10**6),
)
PICK = st.integers(0, 10**6)
OPS = st.one_of(
    st.tuples(st.just("folder"), PICK, NAMES, st.booleans()),
    st.tuples(st.just("folder"), PICK, NAMES, st.just(False)),
    st.tuples(
        st.just("file"),
        PICK,
        NAMES,
        st.one_of(st.text(max_size=60), st.just(f"a {NEEDLE} here\n"), st.binary(max_size=40)),
        st.booleans(),
    ),
    st.tuples(st.just("link"), PICK, NAMES, LINKS),
    st.tuples(st.just("link"), PICK, NAMES, LINKS),
    st.tuples(st.just("pair"), PICK, NAMES, NAMES),
    st.tuples(st.just("fifo"), PICK, NAMES),
    st.tuples(st.just("socket"), PICK, NAMES),
    st.tuples(st.just("device"), PICK, NAMES),
    st.tuples(st.just("deep"), PICK, st.integers(14, 17)),
)
TREES = st.lists(OPS, min_size=1, max_size=24)


# Growing a tree -----------------------------------------------------------------------------------


class Tree:
    """The entries one example made: their paths relative to the root (as Python names them),
    the folders among them, and which are unreadable on purpose."""

    def __init__(self, root: Path, outside: Path):
        self.root, self.outside = root, outside
        self.paths: list[str] = []
        self.folders: list[str] = [""]

    def where(self, pick: int) -> str:
        return self.folders[pick % len(self.folders)]

    def entity(self, pick: int) -> str:
        return (self.paths or [""])[pick % max(1, len(self.paths))]

    def full(self, relative: str) -> str:
        return os.path.join(os.fsencode(self.root), os.fsencode(relative)).decode(
            "utf-8", "surrogateescape"
        )

    def depth(self, folder: str) -> int:
        return len(folder.split("/")) if folder else 0

    def link_target(self, folder: str, how: str, pick: int) -> str:
        up = "../" * (self.depth(folder) + 1)
        target = self.entity(pick)
        return {
            "inside": os.path.relpath(self.full(target), self.full(folder)),
            "absolute inside": self.full(target),
            "out and back": f"{up}{self.root.name}/{target}",
            "outside file": str(self.outside / SECRET_NAME),
            "outside folder": str(self.outside),
            "outside by dots": f"{up}{self.outside.name}/{SECRET_NAME}",
            "etc": "/etc",
            "passwd": "/etc/passwd",
            "self": "",  # filled in with the link's own name
            "dangling": f"nowhere-{pick}",
            "dangling deep": f"nowhere/{pick}/x.md",
            "dangling outside": f"/nonexistent-{pick}/x",
        }[how]

    def make(self, op) -> None:
        kind, pick, *rest = op
        folder = self.where(pick)
        if kind == "deep":
            self._deep(folder, rest[0])
            return
        name = rest[0]
        relative = f"{folder}/{name}" if folder else name
        if relative in self.paths or relative == CHURN:
            return
        path = self.full(relative)
        if kind == "folder":
            os.mkdir(path)
            self.folders.append(relative)
            if rest[1]:
                os.chmod(path, 0)
        elif kind == "file":
            content = rest[1]
            data = content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content
            with open(path, "wb") as file:
                file.write(data)
            if rest[2]:
                os.chmod(path, 0)
        elif kind == "link":
            how, which = rest[1]
            os.symlink(name if how == "self" else self.link_target(folder, how, which), path)
        elif kind == "pair":
            other = f"{folder}/{rest[1]}" if folder else rest[1]
            if other in self.paths or other == relative or other == CHURN:
                return
            os.symlink(rest[1], path)
            os.symlink(name, self.full(other))
            self.paths.append(other)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "socket":
            os.mknod(path, 0o644 | stat.S_IFSOCK)
        elif kind == "device":
            try:  # /dev/zero's numbers; only root may make one
                os.mknod(path, 0o644 | stat.S_IFCHR, os.makedev(1, 5))
            except PermissionError:
                return
        self.paths.append(relative)

    def _deep(self, folder: str, levels: int) -> None:
        """A chain of folders with 255-byte names, ``levels`` deep: past 4,096 bytes, the
        system's limit for a whole path, so it is made one folder at a time."""
        name = "d" * 255
        fd = os.open(self.full(folder), os.O_RDONLY | os.O_DIRECTORY)
        try:
            for _ in range(levels):
                try:
                    os.mkdir(name, dir_fd=fd)
                except FileExistsError:
                    pass
                inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = inner
            with open(os.open(f"{NEEDLE}.md", os.O_WRONLY | os.O_CREAT, dir_fd=fd), "w") as file:
                file.write(f"deep {NEEDLE}\n")
        finally:
            os.close(fd)
        chain = "/".join([name] * 3)
        self.paths.append(f"{folder}/{chain}" if folder else chain)


def wipe(root: Path) -> None:
    """Everything in the root but the churning folder (paths past the system's limit too:
    shutil.rmtree works from folder descriptors)."""
    loosen_all(root)
    for entry in os.scandir(root):
        if entry.name == CHURN:
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def loosen_all(root: Path) -> None:
    """Give every folder and file back its permissions (needed to remove them when not root),
    but the churning folder's."""
    if os.geteuid() == 0:
        return
    for folder, folders, files, fd in os.fwalk(root):
        if folder == str(root):
            folders[:] = [name for name in folders if name != CHURN]
        for name in folders + files:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode):
                os.chmod(name, 0o755, dir_fd=fd)


def churn(root: Path, stop: threading.Event) -> None:
    """Make and remove entries in ``churn/`` until told to stop: a file, a link to it, a pipe,
    a folder, each there for a moment."""
    folder = root / CHURN
    number = 0
    while not stop.is_set():
        number += 1
        made = folder / f"c{number % 7}"
        try:
            if number % 4 == 0:
                made.write_text(f"{NEEDLE} {number}\n")
            elif number % 4 == 1:
                os.symlink(f"c{(number - 1) % 7}", made)
            elif number % 4 == 2:
                os.mkfifo(made)
            else:
                made.mkdir()
            time.sleep(0.002)
            if made.is_dir() and not made.is_symlink():
                made.rmdir()
            else:
                made.unlink()
        except OSError:
            pass


# Checking what comes back -------------------------------------------------------------------------


class Checks:
    """What every answer, event and result is checked for, and counts of what was seen."""

    def __init__(self, root: Path, server):
        self.root, self.server = root, server
        self.real_root = os.path.realpath(root)
        self.forbidden = [*server_paths(), CANARY, PASSWD]
        self.seen: dict[str, int] = {}

    def count(self, what: str) -> None:
        self.seen[what] = self.seen.get(what, 0) + 1

    def text(self, text: str, what: str) -> None:
        for forbidden in self.forbidden:
            assert forbidden not in text, f"{what} shows {forbidden!r}: {text[:3000]}"

    def response(self, response, what: str, allowed=(200, 400, 404)):
        assert response.status_code < 500, (
            f"{what}: {response.status_code} {response.text}\n{self.server.log_text()[-6000:]}"
        )
        assert response.status_code in allowed, f"{what}: {response.status_code} {response.text}"
        self.text(response.text, what)
        self.count(f"{what} {response.status_code}")
        return response.json()

    def inside(self, relative: str, what: str) -> None:
        """A path Parley gave (relative to the root) is inside the root on the disk."""
        assert not relative.startswith("/") and ".." not in relative.split("/"), (what, relative)
        real = os.path.realpath(os.path.join(self.root, relative))
        assert real == self.real_root or real.startswith(self.real_root + "/"), (
            what,
            relative,
            _links(self.root, relative),
        )

    def value(self, value, what: str) -> None:
        """A tool's result: JSON that UTF-8 can carry, nothing forbidden in it, and every path
        it names inside the root (but those it names as left out, with their problem)."""
        text = json.dumps(value, ensure_ascii=False)
        text.encode("utf-8")
        self.text(text, what)
        for key, item in _pairs(value):
            if key == "path" and isinstance(item, str) and not item.startswith(CHURN):
                self.inside(item, what)


def _links(root: Path, relative: str) -> list:
    """How each part of ``relative`` is linked, for an assertion's message."""
    shown, path = [], str(root)
    for part in relative.split("/"):
        path = os.path.join(path, part)
        shown.append((part, os.readlink(path) if os.path.islink(path) else None))
    return shown


def _pairs(value):
    if isinstance(value, dict) and "problem" not in value:
        for key, item in value.items():
            yield key, item
            yield from _pairs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _pairs(item)


# Driving the server -------------------------------------------------------------------------------


def browse_all(client, checks: Checks, sid: str, extra: list[str]) -> list[dict]:
    """Browse the question's folders from its root (and ``extra`` paths); every entry offered."""
    url = f"/api/selections/{sid}/browse/"
    queue, seen, offered = ["", *extra], set(), []
    while queue and len(seen) < MAX_BROWSES:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        body = checks.response(client.get(url, params={"path": path}), "browse")
        if "entries" not in body:
            assert set(body["error"]) == {"code", "message"}
            continue
        for entry in body["entries"]:
            assert entry["kind"] in ("file", "folder")
            if not entry["path"].startswith(CHURN):
                checks.inside(entry["path"], "browse")
            offered.append(entry)
            if entry["kind"] == "folder":
                queue.append(entry["path"])
        for skipped in body.get("skipped", []):
            assert set(skipped) == {"name", "path", "problem"}
            checks.count("browse skipped")
    return offered


def run_turn(client, checks: Checks, cid: str, text: str) -> list[dict]:
    """A builtin turn, each question it asks dismissed; it must complete."""
    turn = start(client, cid, text)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = client.get(f"/api/conversations/{cid}/in-flight/").json()
        if not state["in_flight"]:
            break
        for question in state["pending_selections"]:
            checks.response(reply(client, question["id"], action="dismiss"), "dismiss", (200, 409))
        time.sleep(0.05)
    wait_for_turn_end(client, cid)
    events = [e for e in all_events(client, cid) if e["turn"] == turn]
    checks.text(json.dumps(events, ensure_ascii=False), f"turn {text!r}")
    assert events[-1]["type"] == "turn.completed", f"{text!r}: {json.dumps(events[-1])}"
    for event in events:
        if event["type"] == "tool.completed":
            checks.value(event["data"].get("result"), f"turn {text!r}")
    checks.count("turn")
    return events


def path_question(client, checks: Checks, tree: Tree, answers: list[str]) -> None:
    """The builtin's file picker (``summarize`` with no path): browsed all over, answered with
    ``answers`` until one is taken (each refused one leaves it open), else with a file it
    offered, which must be taken; the turn then summarizes it and completes."""
    cid = create_conversation(client, agent="builtin", title="Picker")
    turn = start(client, cid, "summarize")
    sid = wait_pending(client, cid, timeout=30)["id"]
    try:
        offered = browse_all(client, checks, sid, answers[:3])
        taken = False
        for answer in answers:
            response = reply(client, sid, answer=answer)
            body = checks.response(response, "answer", (200, 400))
            if response.status_code == 200:
                checks.inside(body["answer"], "answer")
                taken = True
                break
            assert body["error"]["code"] == "invalid_answer"
        files = [e for e in offered if e["selectable"] and not e["path"].startswith(CHURN)]
        if not taken and files:
            # What the picker offers, an answer takes.
            response = reply(client, sid, answer=files[0]["path"])
            checks.response(response, "offered answer", (200,))
    finally:
        # Also when a check failed: no turn is left waiting for the next example to meet.
        reply(client, sid, action="dismiss")
    wait_for_turn_end(client, cid)
    events = [e for e in all_events(client, cid) if e["turn"] == turn]
    checks.text(json.dumps(events, ensure_ascii=False), "picker turn")
    assert events[-1]["type"] == "turn.completed", events[-1]


def model_tools(checks: Checks, root: Path, paths: list[str], other: str) -> None:
    """The model's file tools on ``paths``: each answers, or refuses with ToolFailed (said
    without the server's paths); nothing else may escape them."""
    calls = []
    for path in paths:
        calls += [
            (llm_tools.list_files, (path,)),
            (llm_tools.read_file, (path,)),
            (llm_tools.search_files, (NEEDLE, path)),
            (llm_tools.file_exists, (path,)),
        ]
    for path in paths[:2]:
        calls += [
            (llm_tools.write_file, (f"{path}/written.md", f"{NEEDLE}\n")),
            (llm_tools.rename_file, (path, other)),
        ]
    for tool, arguments in calls:

        def call(tool=tool, arguments=arguments):
            try:
                return tool(root, *arguments)
            except llm_tools.ToolFailed as exc:
                return {"refused": str(exc)}

        checks.value(in_thread(call), tool.__name__)
        checks.count(tool.__name__)


def _sendable(path: str) -> bool:
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return not path.startswith(CHURN)


# The fuzzer ---------------------------------------------------------------------------------------


@pytest.mark.timeout(300 * SCALE)
def test_random_trees_never_escape_the_workspace_nor_break_the_server(
    make_server, people, files_root
):
    outside = files_root.parent / "outside"
    (outside / "inner").mkdir(parents=True)
    (outside / SECRET_NAME).write_text(f"{CANARY}\n{NEEDLE}\n")
    (outside / "inner" / f"{CANARY}.md").write_text(f"{CANARY} {NEEDLE}\n")
    before_outside = sorted(p.name for p in outside.rglob("*"))
    (files_root / CHURN).mkdir()
    server = start_honoring_permissions(make_server, PARLEY_BUILTIN_PACE_MS="0")
    checks = Checks(files_root, server)
    stop = threading.Event()
    churning = threading.Thread(target=churn, args=(files_root, stop), daemon=True)
    churning.start()
    client = server.client(people.bob)
    cid = create_conversation(client, agent="builtin", title="Fuzzed tree")

    # Not shrunk: each case crosses a live server many times, and a failing one is reported
    # with all it drew (its tree and paths) all the same.
    @settings(budget(EXAMPLES), phases=[Phase.explicit, Phase.reuse, Phase.generate])
    @given(ops=TREES, data=st.data())
    def exercise(ops, data):
        wipe(files_root)
        (files_root / "README.md").write_text(f"# Read me\n\nA {NEEDLE}.\n")
        tree = Tree(files_root, outside)
        for op in ops:
            try:
                tree.make(op)
            except OSError as exc:
                # A name taken twice in one folder; a folder locked (when not root) or nested
                # past the system's limits before this entry came.
                assert exc.errno in (errno.EEXIST, errno.EACCES, errno.ENAMETOOLONG), exc
        sendable = [p for p in tree.paths if _sendable(p)]
        extra = [
            "é" * 200,
            "/".join(["𝄞" * 63] * 16),
            f"{CHURN}/c1",
            "../outside",
            "README.md/x",
        ]
        picked = data.draw(
            st.lists(st.sampled_from(sendable + extra), min_size=1, max_size=5), label="paths"
        )
        path_question(client, checks, tree, picked)
        run_turn(client, checks, cid, "list")
        for path in picked[:2]:
            run_turn(client, checks, cid, f'list "{path}"')
            run_turn(client, checks, cid, f'summarize "{path}"')
        run_turn(client, checks, cid, f"find {NEEDLE}")
        other = data.draw(st.sampled_from([*sendable, "moved.md"]), label="rename to")
        model_tools(checks, files_root, picked, other)
        assert sorted(p.name for p in outside.rglob("*")) == before_outside
        assert CANARY in (outside / SECRET_NAME).read_text()
        assert set(os.listdir(files_root.parent)) <= {"team", "other", "outside"}

    try:
        exercise()
    finally:
        stop.set()
        churning.join(10)
        client.close()
        wipe(files_root)
    print(f"seen: {dict(sorted(checks.seen.items()))}")
    log = server.log_text()
    assert "Exception inside application" not in log, log
    assert "Traceback" not in log, log
    # Every way in met refusals and answers both.
    assert checks.seen.get("browse 400") and checks.seen.get("browse 200")
    assert checks.seen.get("answer 400") and checks.seen.get("browse skipped")
