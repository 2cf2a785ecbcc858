"""The builtin agent: a deterministic workspace assistant that needs no network.

It works on the workspace's files root. It answers ``help``, ``list [folder]``, ``find <text>``
and ``summarize <path>``; it asks when it needs to: ``summarize`` with no path or an ambiguous
one offers a file picker, ``compare`` asks for two files, ``rename <path>`` asks for the new
name (again, saying why, while one will not do) and then for confirmation, ``tidy`` offers a
multi-select of chores, ``note`` asks with a form, and a request it does not understand makes it
ask which ability was meant. Replies stream at a readable pace; each file operation is reported
as a tool call; input people add mid-turn is acknowledged between steps.
"""

import asyncio
import difflib
import os
import re
from functools import partial
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.utils.text import slugify

from ..files import (
    MAX_NAME_BYTES,
    MAX_TEXT_BYTES,
    Skipped,
    UnsafePath,
    kind_of,
    list_folder,
    make_folders,
    os_problem,
    printable_name,
    read_text,
    relative_path,
    resolve_inside,
    walk_files,
    write_text,
)
from . import Agent

MAX_MATCHES = 50
# Most entries left out (loops, links to nothing, pipes...) a listing or a search names.
MAX_SKIPPED = 20
# How many names a rename asks for before it gives up, when none will do.
MAX_NAME_TRIES = 3
TEXT_SUFFIXES = {".md", ".txt", ".csv", ".rst"}

ABILITIES = {
    "help": "show what I can do",
    "list": "list a folder: `list [folder]`",
    "find": "find files and lines that contain some text: `find <text>`",
    "summarize": "summarize a file (lines, words, headings, first lines): `summarize [path]`",
    "compare": "compare two files: `compare [path] [path]`",
    "rename": "rename a file, after you confirm: `rename [path]`",
    "tidy": "tidy the workspace's files, choosing the chores",
    "note": "write a note from a short form: `note [text]`",
}

TIDY_CHORES = [
    {
        "value": "empty-folders",
        "label": "Remove empty folders",
        "description": "Folders with nothing in them are deleted.",
    },
    {
        "value": "trailing-whitespace",
        "label": "Trim trailing whitespace",
        "description": "In text files (.md, .txt, .csv, .rst).",
    },
    {
        "value": "final-newline",
        "label": "End text files with a newline",
        "description": "Adds the missing newline at the end of text files.",
    },
    {
        "value": "large-files",
        "label": "List large files",
        "description": "Files over 1 MB, largest first; nothing is changed.",
    },
]

NOTE_FORM = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "title": "Title", "minLength": 1, "maxLength": 120},
        "tags": {"type": "string", "title": "Tags", "description": "Separated by commas"},
        "pinned": {"type": "boolean", "title": "Pinned", "default": False},
    },
    "required": ["title"],
}

NOT_ANSWERED = {
    "dismissed": "You closed the question, so I'll leave it there.",
    "declined": "Understood: I won't.",
    "expired": "Nobody answered in time, so I stopped there.",
    "cancelled": "The question was withdrawn, so I stopped there.",
    "unavailable": "I'd need to ask someone, but nobody can answer in this turn "
    "(it is not interactive).",
    "limit_reached": "I have asked as many questions as I may in one turn.",
}


def parse_request(text: str) -> tuple[str | None, str]:
    """The first word that names an ability, and what follows it."""
    words = text.strip().split(maxsplit=1)
    if not words:
        return None, ""
    command = words[0].lower().rstrip(":,.")
    argument = words[1].strip() if len(words) > 1 else ""
    if command in ABILITIES:
        return command, argument
    match = re.search(r"\b(" + "|".join(ABILITIES) + r")\b\s*(.*)", text, re.IGNORECASE | re.S)
    if match:
        return match.group(1).lower(), match.group(2).strip()
    return None, text.strip()


def split_arguments(text: str) -> list[str]:
    """Words, keeping quoted ones together: ``compare "a b.md" c.md`` gives two."""
    return [a or b for a, b in re.findall(r'"([^"]*)"|(\S+)', text)]


def _strip_quotes(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        return text[1:-1]
    return text


def summarize_text(text: str) -> dict:
    lines = text.splitlines()
    headings = [line.lstrip("#").strip() for line in lines if re.match(r"^#{1,6}\s", line)]
    first = [line for line in lines if line.strip()][:3]
    return {
        "lines": len(lines),
        "words": len(text.split()),
        "headings": headings[:20],
        "first_lines": first,
    }


def find_in_files(root, needle: str) -> dict:
    """Files whose names or lines hold ``needle``; entries that could not be looked at are
    named in ``skipped`` (only when there are some)."""
    needle_lower = needle.lower()
    matches, files, skipped = [], set(), []
    for found in _walk(root, skipped):
        if needle_lower in found.name.lower():
            files.add(found.path)
        if found.size > MAX_TEXT_BYTES:
            continue
        try:
            text = read_text(found.real, found.path)
        except UnsafePath as exc:
            skipped.append(Skipped(found.name, found.path, exc.problem))
            continue
        except FileNotFoundError:
            continue  # gone since the folder was read
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if needle_lower in line.lower():
                files.add(found.path)
                if len(matches) < MAX_MATCHES:
                    matches.append({"path": found.path, "line": number, "text": line.strip()[:200]})
    result = {
        "files": sorted(files),
        "matches": matches,
        "truncated": len(matches) >= MAX_MATCHES,
    }
    return result | _skipped(skipped)


def _skipped(skipped: list) -> dict:
    """What a tool's result says of the entries it left out: nothing if none, else the first
    MAX_SKIPPED (as {"path", "problem"}) and how many in all."""
    if not skipped:
        return {}
    named = [{"path": item.path, "problem": item.problem} for item in skipped[:MAX_SKIPPED]]
    return {"skipped": named, "skipped_count": len(skipped)}


def _said_skipped(result: dict) -> str:
    """The entries a tool left out, as lines of the reply ('' if none)."""
    if not result.get("skipped"):
        return ""
    lines = [f"- `{item['path']}`: {item['problem']}" for item in result["skipped"]]
    more = result["skipped_count"] - len(lines)
    if more > 0:
        lines.append(f"- and {more} more")
    count = result["skipped_count"]
    return f"\n\nI left out {count} entr{'y' if count == 1 else 'ies'} I can't use:\n\n" + (
        "\n".join(lines)
    )


def files_matching(root, text: str) -> list[str]:
    """Files whose path inside the root contains ``text`` (ignoring case)."""
    needle = text.lower()
    return [found.path for found in _walk(root) if needle in found.path.lower()]


def _walk(root, skipped: list | None = None):
    """The workspace's regular files (see walk_files); none if its root cannot be read, which
    is then the one entry left out."""
    try:
        yield from walk_files(root, skipped=skipped)
    except UnsafePath as exc:
        if skipped is not None:
            skipped.append(Skipped(".", ".", exc.problem))


def common_folder(paths: list[str]) -> str:
    parents = [PurePosixPath(p).parent.parts for p in paths]
    shared = []
    for parts in zip(*parents, strict=False):
        if len(set(parts)) != 1:
            break
        shared.append(parts[0])
    return "/".join(shared)


class BuiltinAgent(Agent):
    # Its tools run through ctx.call_tool and it decides only on what the context returns.
    resumable = True

    async def run(self, ctx) -> None:
        self.ctx = ctx
        command, argument = parse_request(ctx.input)
        if command is None:
            await self.stream(f"I'm not sure what you mean by “{ctx.input.strip()}”.")
            answer = await ctx.choose(
                "Which of these did you mean?",
                [
                    {"label": name.title(), "value": name, "description": description}
                    for name, description in ABILITIES.items()
                ],
            )
            if not answer.answered:
                await self.stream(" " + NOT_ANSWERED[answer.status])
                return
            await self.stream("\n\n")
            command, argument = answer.value, ""
        await getattr(self, f"do_{command}")(argument)
        await self.acknowledge_steering()

    # Talking -------------------------------------------------------------------------------

    async def stream(self, text: str) -> None:
        """Say ``text`` a few words at a time, at a pace a person can read along with."""
        pace = settings.PARLEY_BUILTIN_PACE_MS / 1000
        for chunk in re.findall(r"\S+\s*|\s+", text):
            await self.ctx.say(chunk)
            if pace and not self.ctx.replaying:
                await asyncio.sleep(pace)

    async def acknowledge_steering(self) -> None:
        """Say, as a message of its own, each input people added since the last step."""
        for text in self.ctx.steering():
            await self.ctx.end_message()
            await self.stream(f"(Noted while I worked: “{text}”.)")
            await self.ctx.end_message()

    async def not_answered(self, answer) -> None:
        await self.stream(NOT_ANSWERED[answer.status])

    async def pick_file(self, prompt: str, root: str = ""):
        """A file path relative to the files root, or None (having said why)."""
        answer = await self.ctx.select_path(prompt, mode="file", root=root)
        if not answer.answered:
            await self.not_answered(answer)
            return None
        return str(PurePosixPath(root) / answer.value) if root else answer.value

    async def resolve_file(self, argument: str, purpose: str):
        """The file the person meant: named exactly, matched uniquely, or picked from a list."""
        wanted = _strip_quotes(argument)
        if not wanted:
            return await self.pick_file(f"Which file should I {purpose}?")
        # What is on disk is looked at once: a resumed turn gets the same answer back.
        found = await self.ctx.step("look up", lambda: self._look_up(wanted), {"path": wanted})
        if "unsafe" in found:
            await self.stream(f"I can't use `{wanted}`: {found['unsafe']}")
            return None
        if found.get("exact"):
            return wanted
        matches = found["matches"]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            await self.stream(f"There is no `{wanted}` in this workspace.")
            return None
        await self.stream(f"{len(matches)} files match “{wanted}”.")
        return await self.pick_file(
            f"Several files match “{wanted}”: which one should I {purpose}?",
            root=common_folder(matches),
        )

    def _look_up(self, wanted: str) -> dict:
        root = self.ctx.files_root
        try:
            if kind_of(resolve_inside(root, wanted), wanted) == "file":
                return {"exact": True}
        except UnsafePath as exc:
            return {"unsafe": str(exc)}
        return {"matches": files_matching(root, wanted)}

    # Abilities -----------------------------------------------------------------------------

    async def do_help(self, argument: str) -> None:
        lines = [f"- **{name}**: {description}" for name, description in ABILITIES.items()]
        await self.stream(
            "Here is what I can do with this workspace's files:\n\n" + "\n".join(lines)
        )

    async def do_list(self, argument: str) -> None:
        folder = _strip_quotes(argument)
        listing = await self.ctx.call_tool("list", {"folder": folder}, lambda: self._list(folder))
        entries = listing.get("entries")
        if entries is None:
            await self.stream(listing["error"])
        elif not entries:
            await self.stream(f"`{folder or '.'}` is empty." + _said_skipped(listing))
        else:
            # A folder ends with a slash (no icon: the reader's fonts may have none).
            lines = [f"- `{e['path']}{'/' if e['kind'] == 'folder' else ''}`" for e in entries]
            await self.stream(
                f"`{folder or '.'}` holds {len(entries)} entries:\n\n"
                + "\n".join(lines)
                + _said_skipped(listing)
            )

    def _list(self, folder: str) -> dict:
        try:
            listing = list_folder(self.ctx.files_root, folder)
        except (UnsafePath, FileNotFoundError, NotADirectoryError) as exc:
            return {"error": _explain(exc, folder)}
        return {"entries": [entry.as_dict() for entry in listing.entries]} | _skipped(
            listing.skipped
        )

    async def do_find(self, argument: str) -> None:
        needle = _strip_quotes(argument)
        if not needle:
            answer = await self.ctx.text("What should I look for?")
            if not answer.answered:
                await self.not_answered(answer)
                return
            needle = answer.value
        root = self.ctx.files_root
        found = await self.ctx.call_tool(
            "find", {"text": needle}, lambda: find_in_files(root, needle)
        )
        if not found["files"]:
            await self.stream(f"Nothing contains “{needle}”." + _said_skipped(found))
            return
        lines = [f"- `{m['path']}` line {m['line']}: {m['text']}" for m in found["matches"]]
        named = [f for f in found["files"] if f not in {m["path"] for m in found["matches"]}]
        lines += [f"- `{path}` (in its name)" for path in named]
        more = " (only the first matches are shown)" if found["truncated"] else ""
        await self.stream(
            f"“{needle}” is in {len(found['files'])} file(s){more}:\n\n"
            + "\n".join(lines)
            + _said_skipped(found)
        )

    async def do_summarize(self, argument: str) -> None:
        path = await self.resolve_file(argument, "summarize")
        if path is not None:
            await self.acknowledge_steering()
            await self.summarize(path)

    async def summarize(self, path: str) -> None:
        summary = await self.ctx.call_tool("summarize", {"path": path}, lambda: self._summary(path))
        if "error" in summary:
            await self.stream(summary["error"])
            return
        parts = [f"**{path}**: {summary['lines']} lines, {summary['words']} words."]
        if summary["headings"]:
            parts.append("Headings: " + "; ".join(summary["headings"]) + ".")
        if summary["first_lines"]:
            parts.append(
                "It begins:\n\n" + "\n".join(f"> {line}" for line in summary["first_lines"])
            )
        await self.stream("\n\n".join(parts))

    def _summary(self, path: str) -> dict:
        try:
            text = read_text(self._file(path), path)
        except (UnsafePath, FileNotFoundError, IsADirectoryError) as exc:
            return {"error": _explain(exc, path)}
        if text is None:
            return {"error": f"`{path}` is not a text file I can read."}
        return summarize_text(text)

    async def do_compare(self, argument: str) -> None:
        given = split_arguments(argument)[:2]
        paths = []
        for position, name in enumerate(["first", "second"]):
            wanted = given[position] if position < len(given) else ""
            path = await self.resolve_file(wanted, f"compare ({name} file)")
            if path is None:
                return
            paths.append(path)
            await self.acknowledge_steering()
        result = await self.ctx.call_tool(
            "compare", {"paths": paths}, lambda: self._compare(*paths)
        )
        if "error" in result:
            await self.stream(result["error"])
            return
        a, b = paths
        if result["identical"]:
            await self.stream(f"`{a}` and `{b}` are identical ({result['lines'][0]} lines).")
            return
        await self.stream(
            f"`{a}` has {result['lines'][0]} lines and `{b}` has {result['lines'][1]}; "
            f"they share {result['shared']} lines. {result['only_first']} lines are only in "
            f"`{a}` and {result['only_second']} only in `{b}`."
            + (
                f"\n\nThe first difference:\n\n```diff\n{result['diff']}\n```"
                if result["diff"]
                else ""
            )
        )

    def _file(self, path: str) -> Path:
        """The real path of the regular file at ``path``; raises UnsafePath, FileNotFoundError
        or IsADirectoryError."""
        target = resolve_inside(self.ctx.files_root, path)
        kind = kind_of(target, path)
        if kind is None:
            raise FileNotFoundError(path)
        if kind == "folder":
            raise IsADirectoryError(path)
        return target

    def _compare(self, first: str, second: str) -> dict:
        texts = []
        for path in (first, second):
            try:
                text = read_text(self._file(path), path)
            except (UnsafePath, FileNotFoundError, IsADirectoryError) as exc:
                return {"error": _explain(exc, path)}
            if text is None:
                return {"error": f"`{path}` is not a text file I can read."}
            texts.append(text.splitlines())
        one, two = texts
        matcher = difflib.SequenceMatcher(a=one, b=two, autojunk=False)
        shared = sum(block.size for block in matcher.get_matching_blocks())
        diff = list(difflib.unified_diff(one, two, first, second, lineterm="", n=1))
        return {
            "identical": one == two,
            "lines": [len(one), len(two)],
            "shared": shared,
            "only_first": len(one) - shared,
            "only_second": len(two) - shared,
            "diff": "\n".join(diff[:12]),
        }

    async def do_rename(self, argument: str) -> None:
        path = await self.resolve_file(argument, "rename")
        if path is None:
            return
        try:
            source = resolve_inside(self.ctx.files_root, path)
        except UnsafePath as exc:
            await self.stream(_explain(exc, path))
            return
        target = await self.ask_new_name(path, source)
        if target is None:
            return
        new_path = relative_path(self.ctx.files_root, target)
        await self.acknowledge_steering()
        confirmed = await self.ctx.confirm(f"Rename `{path}` to `{new_path}`?")
        if not (confirmed.answered and confirmed.value is True):
            if confirmed.answered or confirmed.status == "declined":
                await self.stream("Okay, I left it as it is.")
            else:
                await self.stream(NOT_ANSWERED[confirmed.status] + " The file keeps its name.")
            return
        renamed = await self.ctx.call_tool(
            "rename", {"from": path, "to": new_path}, lambda: self._rename(source, target)
        )
        if "error" in renamed:
            await self.stream(renamed["error"])
            return
        await self.stream(f"Renamed `{path}` to `{new_path}`.")

    async def ask_new_name(self, path: str, source: Path) -> Path | None:
        """Where ``source`` (at ``path``) should go, in its own folder: the name is asked for
        again, saying what was wrong, until one will do (MAX_NAME_TRIES at most). None, having
        said why, if the question went unanswered or no name would do."""
        prompt = f"What should `{path}` be called? (a new name in the same folder)"
        for _ in range(MAX_NAME_TRIES):
            answer = await self.ctx.text(prompt)
            if not answer.answered:
                await self.not_answered(answer)
                return None
            new_name = answer.value.strip()
            target = source.parent / new_name
            problem = _bad_name(new_name) or await self.ctx.step(
                "check name", partial(self._name_taken, target), {"path": path, "name": new_name}
            )
            if not problem:
                return target
            prompt = f"That name won't do: {problem}. What should `{path}` be called instead?"
        await self.stream(
            f"I can't use that name either: {problem}. After {MAX_NAME_TRIES} tries, "
            f"`{path}` keeps its name."
        )
        return None

    def _name_taken(self, target: Path) -> str | None:
        """Why ``target`` (in the folder of the file to rename) will not do, or None. Looked
        at without following links: a link to nothing still holds its name."""
        root = self.ctx.files_root
        try:
            relative = relative_path(root, target)
            if os.path.lexists(target):
                return f"`{relative}` already exists"
            resolve_inside(root, relative)
        except UnsafePath as exc:
            return exc.problem
        except OSError as exc:
            return os_problem(exc)
        return None

    def _rename(self, source: Path, target: Path) -> dict:
        root = self.ctx.files_root
        try:
            if os.path.lexists(target):
                return {"error": f"`{relative_path(root, target)}` already exists."}
            os.rename(source, target)
        except UnsafePath as exc:
            return {"error": f"I can't rename it: {exc}"}
        except OSError as exc:
            return {"error": f"I can't rename `{relative_path(root, source)}`: {os_problem(exc)}."}
        return {"renamed": True}

    async def do_tidy(self, argument: str) -> None:
        answer = await self.ctx.choose(
            "Which chores should I do?", TIDY_CHORES, multiple=True, min_choices=1
        )
        if not answer.answered:
            await self.stream(NOT_ANSWERED[answer.status] + " Nothing was tidied.")
            return
        report = []
        for chore in answer.value:
            done = await self.ctx.call_tool(
                "tidy", {"chore": chore}, getattr(self, "_" + chore.replace("-", "_"))
            )
            report.append(done["summary"])
            await self.acknowledge_steering()
        await self.stream("Done:\n\n" + "\n".join(f"- {line}" for line in report))

    def _empty_folders(self) -> dict:
        root = self.ctx.files_root.resolve()
        removed = []
        # os.walk follows no links, and passes over folders it cannot read.
        for folder, _dirs, _files in os.walk(root, topdown=False):
            path = Path(folder)
            try:
                relative = relative_path(root, path)
                if path == root or not printable_name(relative) or any(path.iterdir()):
                    continue
                path.rmdir()
            except (OSError, UnsafePath):
                continue
            removed.append(relative)
        return {"removed": removed, "summary": f"removed {len(removed)} empty folder(s)"}

    def _rewrite_text_files(self, change) -> list[str]:
        changed = []
        for found in _walk(self.ctx.files_root):
            if PurePosixPath(found.path).suffix.lower() not in TEXT_SUFFIXES:
                continue
            try:
                text = read_text(found.real, found.path)
                if text is None:
                    continue
                new = change(text)
                if new != text:
                    write_text(found.real, found.path, new)
                    changed.append(found.path)
            except (UnsafePath, FileNotFoundError):
                continue
        return changed

    def _trailing_whitespace(self) -> dict:
        changed = self._rewrite_text_files(
            lambda text: "".join(_trim_line(line) for line in text.splitlines(keepends=True))
        )
        return {
            "changed": changed,
            "summary": f"trimmed trailing whitespace in {len(changed)} file(s)",
        }

    def _final_newline(self) -> dict:
        changed = self._rewrite_text_files(
            lambda text: text if not text or text.endswith("\n") else text + "\n"
        )
        return {"changed": changed, "summary": f"added a final newline to {len(changed)} file(s)"}

    def _large_files(self) -> dict:
        large = sorted(
            (
                (found.size, found.path)
                for found in _walk(self.ctx.files_root)
                if found.size > 1024 * 1024
            ),
            reverse=True,
        )
        files = [{"path": path, "size": size} for size, path in large]
        names = ", ".join(f"`{f['path']}`" for f in files) or "none"
        return {"files": files, "summary": f"files over 1 MB: {names}"}

    async def do_note(self, argument: str) -> None:
        answer = await self.ctx.form("Tell me about the note.", NOTE_FORM)
        if not answer.answered:
            await self.stream(NOT_ANSWERED[answer.status] + " No note was written.")
            return
        fields = answer.value
        written = await self.ctx.call_tool("note", fields, lambda: self._note(fields, argument))
        if "error" in written:
            await self.stream(written["error"])
            return
        await self.stream(f"Wrote `{written['path']}`.")

    def _note(self, fields: dict, body: str) -> dict:
        try:
            return {"path": self._write_note(fields, body)}
        except UnsafePath as exc:
            return {"error": f"I can't write the note: {exc}"}

    def _write_note(self, fields: dict, body: str) -> str:
        """The note's path, once written in ``notes/``. Raises UnsafePath when that folder
        cannot be used (a loop, a link to nothing, a file in its way...)."""
        root = self.ctx.files_root
        folder = resolve_inside(root, "notes")
        make_folders(folder, "notes")
        stem = slugify(fields["title"]) or "note"
        target, number = folder / f"{stem}.md", 1
        while os.path.lexists(target):
            number += 1
            target = folder / f"{stem}-{number}.md"
        tags = [t.strip() for t in fields.get("tags", "").split(",") if t.strip()]
        lines = [f"# {fields['title']}", ""]
        if tags:
            lines.append("Tags: " + ", ".join(tags))
        if fields.get("pinned"):
            lines.append("Pinned: yes")
        if body.strip():
            lines += ["", body.strip()]
        relative = relative_path(root, target)
        write_text(target, relative, "\n".join(lines) + "\n")
        return relative


def _trim_line(line: str) -> str:
    """The line without spaces or tabs before its line ending (which it keeps)."""
    body = line.rstrip("\r\n")
    return body.rstrip(" \t") + line[len(body) :]


def _bad_name(name: str) -> str | None:
    """What is wrong with ``name`` as a file's new name in its folder (see conversations.files
    for what every path refuses), or None."""
    if not name:
        return "it is empty"
    if name in (".", ".."):
        return "“.” and “..” name folders, not files"
    if "/" in name or "\\" in name:
        return "a name may not contain slashes"
    if "\x00" in name:
        return "a name may not contain a NUL character"
    if len(name) > MAX_NAME_BYTES:
        return f"it is longer than {MAX_NAME_BYTES} characters"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        # The file system counts bytes: é takes two, 日 three.
        return f"it is longer than {MAX_NAME_BYTES} bytes in UTF-8"
    if name.startswith("."):
        return "hidden names (starting with a dot) are not allowed"
    return None


def _explain(exc: Exception, path: str) -> str:
    if isinstance(exc, UnsafePath):
        return f"I can't use `{path}`: {exc}"
    if isinstance(exc, NotADirectoryError):
        return f"`{path}` is a file, not a folder."
    if isinstance(exc, IsADirectoryError):
        return f"`{path}` is a folder, not a file."
    return f"There is no `{path}` in this workspace."
