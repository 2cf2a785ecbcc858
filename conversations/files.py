"""A workspace's files as people and agents see them: listings and walks that say what they left
out, text read and written, renames.

Every path goes through core.rootfs, which walks it down from the workspace's root one name at a
time by folder descriptors, so that nothing outside the root and no hidden name (one starting
with a dot, as ``.env``) is ever reached, whatever is renamed or swapped for a link meanwhile
(core.pathrules says what a path may be, core.rootwalk what a link inside means). The same rule
holds for every agent, the model's tools and the path picker: what a listing offers is exactly
what a path answer or a tool's argument accepts. A listing or a walk leaves out what cannot be
used and says which, and goes on with the others; hidden names it passes over without a word.
"""

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from core.pathrules import (
    MAX_NAME_BYTES,
    MAX_PATH_CHARS,
    NOT_UTF8,
    UnsafePath,
    UnusablePath,
    os_problem,
    printable_name,
    shown_name,
)
from core.rootfs import Found, Walked, Within, open_root, opened

__all__ = [
    "MAX_NAME_BYTES",
    "MAX_PATH_CHARS",
    "MAX_TEXT_BYTES",
    "Entry",
    "Found",
    "Listing",
    "Skipped",
    "UnsafePath",
    "UnusablePath",
    "Walked",
    "Within",
    "exists",
    "list_folder",
    "look",
    "open_root",
    "opened",
    "os_problem",
    "printable_name",
    "read_bytes",
    "read_text",
    "real_path",
    "remove_empty_folders",
    "rename",
    "shown_name",
    "walk_files",
    "write_text",
]

# Files larger than this are not read as text (find, summarize).
MAX_TEXT_BYTES = 1024 * 1024

Root = Path | Within


@dataclass(frozen=True)
class Entry:
    name: str
    path: str
    kind: str  # "file" or "folder"
    size: int | None

    as_dict = asdict


@dataclass(frozen=True)
class Skipped:
    """An entry left out of a listing or a walk, and why (its name as a person can read it)."""

    name: str
    path: str
    problem: str

    as_dict = asdict


@dataclass
class Listing:
    """A folder's usable entries, folders first, and those left out (loops, links to nothing,
    outside the root or to hidden names, pipes, what cannot be read), by name; ``path`` is the
    folder's own, links resolved."""

    path: str = ""
    entries: list[Entry] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def list_folder(root: Root, relative: str = "") -> Listing:
    """The entries of a folder inside the root, folders first, then by name.

    Each entry is offered only once its own path has been looked up as any path given is (the
    same rule, links resolved, readable): what is listed, an answer or a tool's argument takes.
    The others are named in ``skipped``; hidden names are left out. Raises UnsafePath for a
    bad path or a folder that cannot be read, and NotADirectoryError / FileNotFoundError when
    it is not an existing folder.
    """
    with opened(root) as place:
        here, names = place.listdir(relative)
        listing = Listing(path=here)
        for name in names:
            if name.startswith("."):
                continue
            path = _join(here, shown_name(name))
            if not printable_name(name):
                listing.skipped.append(Skipped(shown_name(name), path, NOT_UTF8))
                continue
            try:
                found = place.inspect(path, readable=True)
            except UnsafePath as exc:
                listing.skipped.append(Skipped(name, path, exc.problem))
                continue
            if found is None:
                continue  # gone since the folder was read
            listing.entries.append(Entry(name=name, path=path, kind=found.kind, size=found.size))
    listing.entries.sort(key=lambda e: (e.kind != "folder", e.name.lower()))
    listing.skipped.sort(key=lambda e: e.name.lower())
    return listing


def walk_files(root: Root, under: str = "", skipped: list | None = None) -> Iterator[Walked]:
    """Every regular file inside the root (or its folder ``under``), each folder's files by
    name before its folders. Hidden ones are passed over, and so are links to folders (which
    are not followed). Entries that cannot be used (see list_folder) are left out and, if
    ``skipped`` is a list, added to it. Raises UnsafePath for a bad ``under``, or one that
    cannot be read, FileNotFoundError / NotADirectoryError when it is not a folder."""

    def leave_out(name: str, path: str, problem: str) -> None:
        if skipped is not None:
            skipped.append(Skipped(name, path, problem))

    with opened(root) as place:
        yield from place.walk_files(under, leave_out)


def look(root: Root, relative: str, *, readable: bool = False) -> Found | None:
    """What ``relative`` names, links resolved (its kind, real path, size), or None when
    nothing is there. With ``readable``, it must also open for reading. Raises UnsafePath, and
    FileNotFoundError when the root itself is missing."""
    with opened(root) as place:
        return place.inspect(relative, readable=readable)


def real_path(root: Root, relative: str) -> str:
    """Where ``relative`` leads inside the root, links resolved; it need not exist."""
    with opened(root) as place:
        return place.real_path(relative)


def exists(root: Root, relative: str) -> bool:
    """Whether something holds the last name of ``relative`` (a link to nothing too)."""
    with opened(root) as place:
        return place.exists(relative)


def read_bytes(root: Root, relative: str, limit: int = MAX_TEXT_BYTES) -> tuple[bytes, int, str]:
    """The first ``limit`` bytes of the regular file ``relative``, its size and its real path.
    Raises UnusablePath when it is not a regular file or cannot be read, IsADirectoryError for
    a folder and FileNotFoundError when nothing is there."""
    with opened(root) as place:
        return place.read(relative, limit)


def read_text(root: Root, relative: str) -> str | None:
    """The text of the regular file ``relative``, or None if it is too large (nothing is read
    then) or not text. Raises as read_bytes."""
    with opened(root) as place:
        data, size, _ = place.read(relative, MAX_TEXT_BYTES + 1, largest=MAX_TEXT_BYTES)
    if size > MAX_TEXT_BYTES or len(data) > MAX_TEXT_BYTES or b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def write_text(
    root: Root, relative: str, content: str, *, make_folders: bool = False, exclusive: bool = False
) -> tuple[str, bool]:
    """Write ``content`` to the regular file ``relative``, made if missing (its folders too
    with ``make_folders``; only if missing with ``exclusive``): its real path and whether it
    was made. Never writes to anything but a regular file. Raises UnsafePath,
    FileNotFoundError (no folder for it), FileExistsError, IsADirectoryError."""
    with opened(root) as place:
        return place.write(
            relative, content.encode("utf-8"), make_folders=make_folders, exclusive=exclusive
        )


def rename(root: Root, source: str, target: str, *, make_folders: bool = False) -> tuple[str, str]:
    """Move what ``source`` names to ``target``, which must be free (its folders made with
    ``make_folders``): both real paths. Raises UnsafePath, FileNotFoundError, FileExistsError."""
    with opened(root) as place:
        return place.rename(source, target, make_folders=make_folders)


def remove_empty_folders(root: Root) -> list[str]:
    """Remove the empty folders inside the root, deepest first: their paths. A folder holding
    a hidden name is not empty."""
    with opened(root) as place:
        return place.remove_empty_folders()
