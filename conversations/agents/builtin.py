"""The builtin agent: a deterministic workspace assistant that needs no network.

It works on the workspace's files root: ``help``, ``list [folder]``, ``find <text>`` and
``summarize <path>``. Replies stream at a readable pace; each file operation is reported as a
tool call.
"""

import asyncio
import re

from django.conf import settings

from ..files import UnsafePath, list_folder, read_text, relative_path, resolve_inside, walk_files
from . import Agent

MAX_MATCHES = 50

ABILITIES = {
    "help": "show what I can do",
    "list": "list a folder: `list [folder]`",
    "find": "find files and lines that contain some text: `find <text>`",
    "summarize": "summarize a file (lines, words, headings, first lines): `summarize <path>`",
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
    needle_lower = needle.lower()
    matches, files = [], set()
    for path in walk_files(root):
        relative = relative_path(root, path)
        if needle_lower in path.name.lower():
            files.add(relative)
        text = read_text(path)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if needle_lower in line.lower():
                files.add(relative)
                if len(matches) < MAX_MATCHES:
                    matches.append({"path": relative, "line": number, "text": line.strip()[:200]})
    return {"files": sorted(files), "matches": matches, "truncated": len(matches) >= MAX_MATCHES}


class BuiltinAgent(Agent):
    async def run(self, ctx) -> None:
        self.ctx = ctx
        command, argument = parse_request(ctx.input)
        handler = getattr(self, f"do_{command}", None) if command else None
        if handler is None:
            await self.stream(f"I'm not sure what you mean by “{ctx.input.strip()}”.\n\n")
            handler = self.do_help
        await handler(argument)
        for text in ctx.steering():
            await self.stream(f"\n\n(Noted while I worked: “{text}”.)")

    async def stream(self, text: str) -> None:
        """Say ``text`` a few words at a time, at a pace a person can read along with."""
        pace = settings.PARLEY_BUILTIN_PACE_MS / 1000
        for chunk in re.findall(r"\S+\s*|\s+", text):
            await self.ctx.say(chunk)
            if pace:
                await asyncio.sleep(pace)

    async def do_help(self, argument: str) -> None:
        lines = [f"- **{name}**: {description}" for name, description in ABILITIES.items()]
        await self.stream(
            "Here is what I can do with this workspace's files:\n\n" + "\n".join(lines)
        )

    async def do_list(self, argument: str) -> None:
        folder = _strip_quotes(argument)
        async with self.ctx.tool("list", {"folder": folder}) as call:
            try:
                entries = await asyncio.to_thread(list_folder, self.ctx.files_root, folder)
            except (UnsafePath, FileNotFoundError, NotADirectoryError) as exc:
                call.result = {"error": _explain(exc, folder)}
                entries = None
            else:
                call.result = {"entries": [e.as_dict() for e in entries]}
        if entries is None:
            await self.stream(call.result["error"])
        elif not entries:
            await self.stream(f"`{folder or '.'}` is empty.")
        else:
            lines = [f"- {'📁 ' if e.kind == 'folder' else ''}`{e.path}`" for e in entries]
            await self.stream(
                f"`{folder or '.'}` holds {len(entries)} entries:\n\n" + "\n".join(lines)
            )

    async def do_find(self, argument: str) -> None:
        needle = _strip_quotes(argument)
        if not needle:
            await self.stream("Tell me what to look for, as in `find budget`.")
            return
        async with self.ctx.tool("find", {"text": needle}) as call:
            call.result = await asyncio.to_thread(find_in_files, self.ctx.files_root, needle)
        found = call.result
        if not found["files"]:
            await self.stream(f"Nothing contains “{needle}”.")
            return
        lines = [f"- `{m['path']}` line {m['line']}: {m['text']}" for m in found["matches"]]
        named = [f for f in found["files"] if f not in {m["path"] for m in found["matches"]}]
        lines += [f"- `{path}` (in its name)" for path in named]
        more = " (only the first matches are shown)" if found["truncated"] else ""
        await self.stream(
            f"“{needle}” is in {len(found['files'])} file(s){more}:\n\n" + "\n".join(lines)
        )

    async def do_summarize(self, argument: str) -> None:
        path = _strip_quotes(argument)
        if not path:
            await self.stream("Tell me which file to summarize, as in `summarize README.md`.")
            return
        await self.summarize(path)

    async def summarize(self, path: str) -> None:
        async with self.ctx.tool("summarize", {"path": path}) as call:
            call.result = await asyncio.to_thread(self._summary, path)
        summary = call.result
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
            target = resolve_inside(self.ctx.files_root, path)
            if not target.is_file():
                raise FileNotFoundError(path)
            text = read_text(target)
        except (UnsafePath, FileNotFoundError) as exc:
            return {"error": _explain(exc, path)}
        if text is None:
            return {"error": f"`{path}` is not a text file I can read."}
        return summarize_text(text)


def _explain(exc: Exception, path: str) -> str:
    if isinstance(exc, UnsafePath):
        return f"I can't use `{path}`: {exc}"
    if isinstance(exc, NotADirectoryError):
        return f"`{path}` is a file, not a folder."
    return f"There is no `{path}` in this workspace."
