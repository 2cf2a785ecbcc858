"""The builtin agent: a deterministic workspace assistant that needs no network.

It works on the workspace's files root. It answers ``help``, ``list [folder]``, ``find <text>``,
``recent [days]`` (the files changed lately, counted from the time the context gives) and
``summarize <path>``; it asks when it needs to: ``summarize`` with no path or an ambiguous
one offers a file picker, ``compare`` asks for two files, ``rename <path>`` asks for the new
name (again, saying why, while one will not do) and then for confirmation, ``tidy`` offers a
multi-select of chores, ``note`` asks with a form, and a request it does not understand makes it
ask which ability was meant. Replies stream at a readable pace; each file operation is reported
as a tool call; input people add mid-turn is acknowledged between steps.
"""

import asyncio
import posixpath
import re
from datetime import datetime, timedelta
from functools import partial
from pathlib import PurePosixPath

from django.conf import settings

from ..files import UnsafePath, exists, list_folder, look, os_problem, real_path, rename
from . import Agent
from .builtin_tools import (
    CHORES,
    bad_name,
    common_folder,
    compare_files,
    explain,
    files_matching,
    find_in_files,
    recent_files,
    said_skipped,
    skipped_part,
    summary_of,
    time_ago,
    write_note,
)
from .quoting import fenced, inline, quoted

# How many names a rename asks for before it gives up, when none will do.
MAX_NAME_TRIES = 3
# The longest span `recent` looks back over.
MAX_RECENT_DAYS = 366
ABILITIES = {
    "help": "show what I can do",
    "list": "list a folder: `list [folder]`",
    "find": "find files and lines that contain some text: `find <text>`",
    "summarize": "summarize a file (lines, words, headings, first lines): `summarize [path]`",
    "compare": "compare two files: `compare [path] [path]`",
    "rename": "rename a file, after you confirm: `rename [path]`",
    "tidy": "tidy the workspace's files, choosing the chores",
    "note": "write a note from a short form: `note [text]`",
    "recent": "list the files changed lately: `recent [days]` (the last 7 by default)",
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

NOTE_TITLE = {"type": "string", "title": "Title", "minLength": 1, "maxLength": 120}
NOTE_FORM = {
    "type": "object",
    "properties": {
        "title": NOTE_TITLE,
        "tags": {"type": "string", "title": "Tags", "description": "Separated by commas"},
        "pinned": {"type": "boolean", "title": "Pinned", "default": False},
    },
    "required": ["title"],
}


def note_form(title: str) -> dict:
    """The note's form, its title filled in with ``title`` (if any) for the person to keep."""
    if not title:
        return NOTE_FORM
    properties = {**NOTE_FORM["properties"], "title": {**NOTE_TITLE, "default": title}}
    return {**NOTE_FORM, "properties": properties}


NOT_ANSWERED = {
    "dismissed": "You closed the question, so I'll leave it there.",
    "declined": "Understood: I won't.",
    "expired": "Nobody answered in time, so I stopped there.",
    "cancelled": "The question was withdrawn, so I stopped there.",
    "unavailable": "I'd need to ask someone, but nobody can answer in this turn "
    "(it is not interactive).",
    "limit_reached": "I have asked as many questions as I may in one turn.",
    "rate_limited": "Too many questions were asked for you of late, so I stopped there.",
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


class BuiltinAgent(Agent):
    # Its tools run through ctx.call_tool and it decides only on what the context returns.
    resumable = True

    async def run(self, ctx) -> None:
        self.ctx = ctx
        command, argument = parse_request(ctx.input)
        if command is None:
            said = ctx.input.strip()
            await self.stream(
                quoted(
                    said, "I'm not sure what you mean by {}.", "I'm not sure what you mean by this:"
                )
            )
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
            await self.stream(
                quoted(text.strip(), "(Noted while I worked: {}.)", "Noted while I worked:")
            )
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
        await self.stream(f"{len(matches)} files match {inline(wanted)}.")
        return await self.pick_file(
            f"Several files match {inline(wanted)}: which one should I {purpose}?",
            root=common_folder(matches),
        )

    def _look_up(self, wanted: str) -> dict:
        root = self.ctx.files_root
        try:
            found = look(root, wanted)
            if found is not None and found.kind == "file":
                return {"exact": True}
        except UnsafePath as exc:
            return {"unsafe": str(exc)}
        except FileNotFoundError:
            return {"matches": []}  # no files at all yet
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
            await self.stream(f"`{folder or '.'}` is empty." + said_skipped(listing))
        else:
            # A folder ends with a slash (no icon: the reader's fonts may have none).
            lines = [f"- `{e['path']}{'/' if e['kind'] == 'folder' else ''}`" for e in entries]
            await self.stream(
                f"`{folder or '.'}` holds {len(entries)} entries:\n\n"
                + "\n".join(lines)
                + said_skipped(listing)
            )

    def _list(self, folder: str) -> dict:
        try:
            listing = list_folder(self.ctx.files_root, folder)
        except (UnsafePath, FileNotFoundError, NotADirectoryError) as exc:
            return {"error": explain(exc, folder)}
        return {"entries": [entry.as_dict() for entry in listing.entries]} | skipped_part(
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
            await self.stream(f"Nothing contains {inline(needle)}." + said_skipped(found))
            return
        lines = [f"- `{m['path']}` line {m['line']}: {m['text']}" for m in found["matches"]]
        named = [f for f in found["files"] if f not in {m["path"] for m in found["matches"]}]
        lines += [f"- `{path}` (in its name)" for path in named]
        more = " (only the first matches are shown)" if found["truncated"] else ""
        await self.stream(
            f"{inline(needle)} is in {len(found['files'])} file(s){more}:\n\n"
            + "\n".join(lines)
            + said_skipped(found)
        )

    async def do_recent(self, argument: str) -> None:
        words = _strip_quotes(argument).split()
        days = int(words[0]) if words and words[0].isdigit() else 7
        if not 1 <= days <= MAX_RECENT_DAYS or (words and not words[0].isdigit()):
            await self.stream(f"Tell me a number of days, from 1 to {MAX_RECENT_DAYS}: `recent 3`.")
            return
        # The time is read through the context: a resumed turn counts from the same moment.
        now = self.ctx.now()
        since = (now - timedelta(days=days)).timestamp()
        found = await self.ctx.call_tool(
            "recent", {"days": days}, partial(recent_files, self.ctx.files_root, since)
        )
        span = "day" if days == 1 else f"{days} days"
        if not found["files"]:
            await self.stream(f"No file changed in the last {span}." + said_skipped(found))
            return
        lines = [
            f"- `{item['path']}`, {time_ago(now, datetime.fromisoformat(item['modified']))}"
            for item in found["files"]
        ]
        if found["more"]:
            lines.append(f"- and {found['more']} more")
        await self.stream(
            f"Changed in the last {span}, newest first:\n\n"
            + "\n".join(lines)
            + said_skipped(found)
        )

    async def do_summarize(self, argument: str) -> None:
        path = await self.resolve_file(argument, "summarize")
        if path is not None:
            await self.acknowledge_steering()
            await self.summarize(path)

    async def summarize(self, path: str) -> None:
        summary = await self.ctx.call_tool(
            "summarize", {"path": path}, partial(summary_of, self.ctx.files_root, path)
        )
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
            "compare", {"paths": paths}, partial(compare_files, self.ctx.files_root, *paths)
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
                f"\n\nThe first difference:\n\n{fenced(result['diff'], 'diff')}"
                if result["diff"]
                else ""
            )
        )

    async def do_rename(self, argument: str) -> None:
        path = await self.resolve_file(argument, "rename")
        if path is None:
            return
        try:
            source = real_path(self.ctx.files_root, path)
        except UnsafePath as exc:
            await self.stream(explain(exc, path))
            return
        new_path = await self.ask_new_name(path, source)
        if new_path is None:
            return
        await self.acknowledge_steering()
        confirmed = await self.ctx.confirm(f"Rename `{path}` to `{new_path}`?")
        if not (confirmed.answered and confirmed.value is True):
            if confirmed.answered or confirmed.status == "declined":
                await self.stream("Okay, I left it as it is.")
            else:
                await self.stream(NOT_ANSWERED[confirmed.status] + " The file keeps its name.")
            return
        renamed = await self.ctx.call_tool(
            "rename", {"from": path, "to": new_path}, lambda: self._rename(source, new_path)
        )
        if "error" in renamed:
            await self.stream(renamed["error"])
            return
        await self.stream(f"Renamed `{path}` to `{new_path}`.")

    async def ask_new_name(self, path: str, source: str) -> str | None:
        """Where ``source`` (``path``, links resolved) should go, in its own folder: its new
        path. The name is asked for again, saying what was wrong, until one will do
        (MAX_NAME_TRIES at most). None, having said why, if the question went unanswered or no
        name would do."""
        prompt = f"What should `{path}` be called? (a new name in the same folder)"
        for _ in range(MAX_NAME_TRIES):
            answer = await self.ctx.text(prompt)
            if not answer.answered:
                await self.not_answered(answer)
                return None
            new_name = answer.value.strip()
            target = posixpath.join(posixpath.dirname(source), new_name)
            problem = bad_name(new_name) or await self.ctx.step(
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

    def _name_taken(self, target: str) -> str | None:
        """Why ``target`` (in the folder of the file to rename) will not do, or None. Looked
        at without following links: a link to nothing still holds its name."""
        root = self.ctx.files_root
        try:
            if exists(root, target):
                return f"`{target}` already exists"
            real_path(root, target)
        except UnsafePath as exc:
            return exc.problem
        except OSError as exc:
            return os_problem(exc)
        return None

    def _rename(self, source: str, target: str) -> dict:
        try:
            rename(self.ctx.files_root, source, target)
        except FileExistsError:
            return {"error": f"`{target}` already exists."}
        except FileNotFoundError:
            return {"error": f"I can't rename `{source}`: it is no longer there."}
        except UnsafePath as exc:
            return {"error": f"I can't rename it: {exc}"}
        except OSError as exc:
            return {"error": f"I can't rename `{source}`: {os_problem(exc)}."}
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
                "tidy", {"chore": chore}, partial(CHORES[chore], self.ctx.files_root)
            )
            report.append(done["summary"])
            await self.acknowledge_steering()
        await self.stream("Done:\n\n" + "\n".join(f"- {line}" for line in report))

    async def do_note(self, argument: str) -> None:
        # What follows `note` is the title it suggests (its first line, as long as a title may
        # be); the rest, if any, is the note's text.
        title = argument.strip().split("\n", 1)[0].strip()[: NOTE_TITLE["maxLength"]]
        answer = await self.ctx.form("Tell me about the note.", note_form(title))
        if not answer.answered:
            await self.stream(NOT_ANSWERED[answer.status] + " No note was written.")
            return
        fields = answer.value
        body = "" if argument.strip() == fields["title"].strip() else argument
        written = await self.ctx.call_tool(
            "note", fields, partial(write_note, self.ctx.files_root, fields, body)
        )
        if "error" in written:
            await self.stream(written["error"])
            return
        await self.stream(f"Wrote `{written['path']}`.")
