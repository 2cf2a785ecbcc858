"""What the builtin agent does to a workspace's files, as plain functions (its tools run them in
threads, through ctx.call_tool): find, summarise, match names, tidy lines, check new names, and
say what was left out."""

import difflib
import re
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from django.utils.text import slugify

from ..files import (
    MAX_NAME_BYTES,
    MAX_TEXT_BYTES,
    Skipped,
    UnsafePath,
    read_text,
    remove_empty_folders,
    walk_files,
    write_text,
)

MAX_MATCHES = 50
# Most entries left out (loops, links to nothing, pipes...) a listing or a search names.
MAX_SKIPPED = 20
TEXT_SUFFIXES = {".md", ".txt", ".csv", ".rst"}


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
    for found in walk(root, skipped):
        if needle_lower in found.name.lower():
            files.add(found.path)
        if found.size > MAX_TEXT_BYTES:
            continue
        try:
            text = read_text(root, found.real)
        except UnsafePath as exc:
            skipped.append(Skipped(found.name, found.path, exc.problem))
            continue
        except (FileNotFoundError, IsADirectoryError):
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
    return result | skipped_part(skipped)


def skipped_part(skipped: list) -> dict:
    """What a tool's result says of the entries it left out: nothing if none, else the first
    MAX_SKIPPED (as {"path", "problem"}) and how many in all."""
    if not skipped:
        return {}
    named = [{"path": item.path, "problem": item.problem} for item in skipped[:MAX_SKIPPED]]
    return {"skipped": named, "skipped_count": len(skipped)}


def said_skipped(result: dict) -> str:
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
    return [found.path for found in walk(root) if needle in found.path.lower()]


def walk(root, skipped: list | None = None):
    """The workspace's regular files (see walk_files); none if its root cannot be read, which
    is then the one entry left out."""
    try:
        yield from walk_files(root, skipped=skipped)
    except UnsafePath as exc:
        if skipped is not None:
            skipped.append(Skipped(".", ".", exc.problem))
    except (FileNotFoundError, NotADirectoryError):
        return  # no files yet


def common_folder(paths: list[str]) -> str:
    parents = [PurePosixPath(p).parent.parts for p in paths]
    shared = []
    for parts in zip(*parents, strict=False):
        if len(set(parts)) != 1:
            break
        shared.append(parts[0])
    return "/".join(shared)


def trim_line(line: str) -> str:
    """The line without spaces or tabs before its line ending (which it keeps)."""
    body = line.rstrip("\r\n")
    return body.rstrip(" \t") + line[len(body) :]


def bad_name(name: str) -> str | None:
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


def explain(exc: Exception, path: str) -> str:
    if isinstance(exc, UnsafePath):
        return f"I can't use `{path}`: {exc}"
    if isinstance(exc, NotADirectoryError):
        return f"`{path}` is a file, not a folder."
    if isinstance(exc, IsADirectoryError):
        return f"`{path}` is a folder, not a file."
    return f"There is no `{path}` in this workspace."


def summary_of(root: Path, path: str) -> dict:
    text = text_of(root, path)
    return text if isinstance(text, dict) else summarize_text(text)


def text_of(root: Path, path: str) -> str | dict:
    """The text of the file at ``path``, or ``{"error"}`` saying why it cannot be read."""
    try:
        text = read_text(root, path)
    except (UnsafePath, FileNotFoundError, IsADirectoryError) as exc:
        return {"error": explain(exc, path)}
    if text is None:
        return {"error": f"`{path}` is not a text file I can read."}
    return text


def compare_files(root: Path, first: str, second: str) -> dict:
    texts = []
    for path in (first, second):
        text = text_of(root, path)
        if isinstance(text, dict):
            return text
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


def empty_folders(root: Path) -> dict:
    """Remove the empty folders (links are not followed, hidden ones are left alone)."""
    try:
        removed = remove_empty_folders(root)
    except (UnsafePath, FileNotFoundError):
        removed = []
    return {"removed": removed, "summary": f"removed {len(removed)} empty folder(s)"}


def _rewrite_text_files(root: Path, change) -> list[str]:
    changed = []
    for found in walk(root):
        if PurePosixPath(found.path).suffix.lower() not in TEXT_SUFFIXES:
            continue
        try:
            text = read_text(root, found.real)
            if text is None:
                continue
            new = change(text)
            if new != text:
                write_text(root, found.real, new)
                changed.append(found.path)
        except (UnsafePath, FileNotFoundError, IsADirectoryError):
            continue
    return changed


def trailing_whitespace(root: Path) -> dict:
    changed = _rewrite_text_files(
        root, lambda text: "".join(trim_line(line) for line in text.splitlines(keepends=True))
    )
    return {
        "changed": changed,
        "summary": f"trimmed trailing whitespace in {len(changed)} file(s)",
    }


def final_newline(root: Path) -> dict:
    changed = _rewrite_text_files(
        root, lambda text: text if not text or text.endswith("\n") else text + "\n"
    )
    return {"changed": changed, "summary": f"added a final newline to {len(changed)} file(s)"}


def large_files(root: Path) -> dict:
    large = sorted(
        ((found.size, found.path) for found in walk(root) if found.size > 1024 * 1024),
        reverse=True,
    )
    files = [{"path": path, "size": size} for size, path in large]
    names = ", ".join(f"`{f['path']}`" for f in files) or "none"
    return {"files": files, "summary": f"files over 1 MB: {names}"}


def write_note(root: Path, fields: dict, body: str) -> dict:
    try:
        return {"path": _write_note(root, fields, body)}
    except UnsafePath as exc:
        return {"error": f"I can't write the note: {exc}"}


def _write_note(root: Path, fields: dict, body: str) -> str:
    """The note's path, once written in ``notes/`` under a name nothing has yet. Raises
    UnsafePath when that folder cannot be used (a loop, a link to nothing, a file in its
    way...)."""
    stem = slugify(fields["title"]) or "note"
    tags = [t.strip() for t in fields.get("tags", "").split(",") if t.strip()]
    lines = [f"# {fields['title']}", ""]
    if tags:
        lines.append("Tags: " + ", ".join(tags))
    if fields.get("pinned"):
        lines.append("Pinned: yes")
    if body.strip():
        lines += ["", body.strip()]
    text = "\n".join(lines) + "\n"
    for number in range(1, 1000):
        name = f"notes/{stem}.md" if number == 1 else f"notes/{stem}-{number}.md"
        try:
            return write_text(root, name, text, make_folders=True, exclusive=True)[0]
        except FileExistsError:
            continue
    raise UnsafePath(f"There are too many notes called '{stem}'.")


# What each tidy chore (see builtin.TIDY_CHORES) runs.
CHORES = {
    "empty-folders": empty_folders,
    "trailing-whitespace": trailing_whitespace,
    "final-newline": final_newline,
    "large-files": large_files,
}


def recent_files(root: Path, since: float) -> dict:
    """The files changed since ``since`` (a POSIX timestamp), newest first: their paths and
    when (ISO 8601, in UTC), the first MAX_MATCHES; entries left out are named."""
    skipped = []
    found = sorted(
        ((f.modified, f.path) for f in walk(root, skipped) if f.modified >= since), reverse=True
    )
    files = [
        {"path": path, "modified": datetime.fromtimestamp(when, UTC).isoformat()}
        for when, path in found[:MAX_MATCHES]
    ]
    return {"files": files, "more": max(0, len(found) - MAX_MATCHES)} | skipped_part(skipped)


def time_ago(now: datetime, then: datetime) -> str:
    """How long before ``now`` ``then`` was, in words: "just now", "5 minutes ago"…"""
    seconds = max(0.0, (now - then).total_seconds())
    for unit, length in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= length:
            count = int(seconds // length)
            return f"{count} {unit}{'' if count == 1 else 's'} ago"
    return "just now"
