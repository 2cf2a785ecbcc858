"""The tools Parley gives a model: work on the workspace's files (list, read, search, write,
rename), and ask people, one tool per question kind (their schemas derived from the kinds'
definition). Each tool's arguments are checked against
its JSON schema before it runs; a bad argument goes back to the model as the tool's error."""

from pathlib import Path

from django.conf import settings
from jsonschema import Draft202012Validator

from core.errors import SaidToPeople

from ..files import (
    MAX_PATH_CHARS,
    MAX_TEXT_BYTES,
    Skipped,
    UnsafePath,
    exists,
    list_folder,
    read_bytes,
    rename,
    walk_files,
    write_text,
)
from ..questions import KINDS, tool_description, tool_schema

# Most entries a listing returns, matches a search returns, and characters a write may hold.
MAX_LISTED = 200
MAX_MATCHES = 100
# Most entries left out (loops, links to nothing, pipes...) a listing or a search names.
MAX_SKIPPED = 20
MAX_WRITE_CHARS = 1_000_000

_PATH = {"type": "string", "maxLength": MAX_PATH_CHARS}


def _object(properties: dict, required: list[str]) -> dict:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


FILE_TOOLS = {
    "list_files": (
        "List a folder of the workspace's files (folders first). Paths are relative to the "
        "workspace's root; '' is the root. Hidden files and folders (names starting with a dot) "
        "are out of reach.",
        _object({"path": _PATH}, []),
    ),
    "read_file": (
        "Read a text file of the workspace. Long files are cut: read on with 'offset' (in "
        "characters).",
        _object({"path": _PATH, "offset": {"type": "integer", "minimum": 0}}, ["path"]),
    ),
    "search_files": (
        "Find the lines of the workspace's text files that contain a text (case-insensitive), "
        "inside 'path' ('' for everywhere).",
        _object(
            {"text": {"type": "string", "minLength": 1, "maxLength": 200}, "path": _PATH}, ["text"]
        ),
    ),
    "write_file": (
        "Write a text file (created, or replaced whole), making its folders. People are asked "
        "to confirm first unless the turn was started without confirmation.",
        _object(
            {"path": _PATH, "content": {"type": "string", "maxLength": MAX_WRITE_CHARS}},
            ["path", "content"],
        ),
    ),
    "rename_file": (
        "Rename or move a file or folder inside the workspace; the new path must be free. "
        "People are asked to confirm first unless the turn was started without confirmation.",
        _object({"path": _PATH, "new_path": _PATH}, ["path", "new_path"]),
    ),
}

# One tool per question kind, derived from the kinds' definition (conversations.questions).
ASK_TOOLS = {
    f"ask_{kind.name}": (kind.name, tool_description(kind), tool_schema(kind))
    for kind in KINDS.values()
}

_VALIDATORS = {name: Draft202012Validator(schema) for name, (_, schema) in FILE_TOOLS.items()}
_VALIDATORS.update(
    {name: Draft202012Validator(schema) for name, (_, _, schema) in ASK_TOOLS.items()}
)


def tool_definitions() -> list[dict]:
    """The tools, as the Chat Completions API takes them."""

    def function(name, description, schema):
        return {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": schema},
        }

    return [function(name, text, schema) for name, (text, schema) in FILE_TOOLS.items()] + [
        function(name, text, schema) for name, (_, text, schema) in ASK_TOOLS.items()
    ]


def argument_errors(name: str, arguments) -> str | None:
    """Why these arguments do not fit the tool (None if they do)."""
    validator = _VALIDATORS.get(name)
    if validator is None:
        return f"There is no tool named '{name}'."
    errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
    if not errors:
        return None
    where = lambda e: "/".join(str(p) for p in e.path) or "arguments"  # noqa: E731
    return "Invalid arguments: " + "; ".join(f"{where(e)}: {e.message}" for e in errors[:5])


class ToolFailed(SaidToPeople):
    """A tool could not do what it was asked; the message goes back to the model."""


def _skipped(skipped: list) -> dict:
    """What a result says of the entries left out: nothing if none, else the first
    MAX_SKIPPED and how many in all."""
    if not skipped:
        return {}
    named = [item.as_dict() for item in skipped[:MAX_SKIPPED]]
    return {"skipped": named, "skipped_count": len(skipped)}


def list_files(root: Path, path: str = "") -> dict:
    try:
        listing = list_folder(root, path)
    except UnsafePath as exc:
        raise ToolFailed(str(exc)) from None
    except FileNotFoundError:
        raise ToolFailed(f"There is no folder '{path}'.") from None
    except NotADirectoryError:
        raise ToolFailed(f"'{path}' is a file, not a folder.") from None
    entries = listing.entries
    listed = [entry.as_dict() for entry in entries[:MAX_LISTED]]
    result = {"path": path, "entries": listed, "more": max(0, len(entries) - MAX_LISTED)}
    return result | _skipped(listing.skipped)


def _read(root: Path, path: str) -> tuple[str, int, str]:
    """The file's text, its first MAX_TEXT_BYTES at most (never more is read), its size in
    bytes and its real path. Only a regular file is ever opened."""
    try:
        data, size, real = read_bytes(root, path, MAX_TEXT_BYTES)
    except UnsafePath as exc:
        raise ToolFailed(str(exc)) from None
    except FileNotFoundError:
        raise ToolFailed(f"There is no file '{path}'.") from None
    except IsADirectoryError:
        raise ToolFailed(f"'{path}' is a folder, not a file.") from None
    if b"\x00" in data[:8192]:
        raise ToolFailed(f"'{path}' is not a text file.")
    return data.decode("utf-8", errors="replace"), size, real


def read_file(root: Path, path: str, offset: int = 0) -> dict:
    text, size, real = _read(root, path)
    limit = settings.PARLEY_LLM_READ_MAX_BYTES
    part = text[offset : offset + limit]
    result = {
        "path": real,
        "offset": offset,
        "content": part,
        "characters": len(text),
        "truncated": offset + len(part) < len(text),
    }
    if size > MAX_TEXT_BYTES:
        result["note"] = f"Only the first {MAX_TEXT_BYTES:,} bytes of this file can be read."
    return result


def search_files(root: Path, text: str, path: str = "") -> dict:
    needle = text.lower()
    matches, skipped = [], []
    try:
        for found in walk_files(root, path, skipped=skipped):
            if found.size > MAX_TEXT_BYTES:
                continue
            try:
                data, _, _ = read_bytes(root, found.real, MAX_TEXT_BYTES)
            except UnsafePath as exc:
                skipped.append(Skipped(found.name, found.path, exc.problem))
                continue
            except (FileNotFoundError, IsADirectoryError):
                continue  # gone since its folder was read
            if b"\x00" in data[:8192]:
                continue
            content = data.decode("utf-8", errors="replace")
            for number, line in enumerate(content.splitlines(), start=1):
                if needle in line.lower():
                    matches.append({"path": found.path, "line": number, "text": line.strip()[:200]})
                    if len(matches) >= MAX_MATCHES:
                        return {"text": text, "matches": matches, "more": True} | _skipped(skipped)
    except UnsafePath as exc:
        raise ToolFailed(str(exc)) from None
    except (FileNotFoundError, NotADirectoryError):
        raise ToolFailed(f"There is no folder '{path}'.") from None
    return {"text": text, "matches": matches, "more": False} | _skipped(skipped)


def file_exists(root: Path, path: str) -> bool:
    try:
        return exists(root, path)
    except UnsafePath as exc:
        raise ToolFailed(str(exc)) from None
    except FileNotFoundError:
        return False  # no files at all yet


def write_file(root: Path, path: str, content: str) -> dict:
    try:
        real, created = write_text(root, path, content, make_folders=True)
    except UnsafePath as exc:
        raise ToolFailed(str(exc)) from None
    except IsADirectoryError:
        raise ToolFailed(f"'{path}' is a folder.") from None
    except FileNotFoundError:
        raise ToolFailed(f"'{path}' vanished while it was being written.") from None
    return {"path": real, "created": created, "characters": len(content)}


def rename_file(root: Path, path: str, new_path: str) -> dict:
    try:
        source, target = rename(root, path, new_path, make_folders=True)
    except UnsafePath as exc:
        raise ToolFailed(str(exc)) from None
    except FileNotFoundError:
        raise ToolFailed(f"There is no file or folder '{path}'.") from None
    except FileExistsError:
        raise ToolFailed(f"'{new_path}' already exists.") from None
    return {"path": source, "new_path": target}
