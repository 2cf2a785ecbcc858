"""Safe access to a workspace's files root: every path is relative, resolved, and kept inside it."""

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

MAX_PATH_CHARS = 1024
MAX_NAME_CHARS = 255
# Files larger than this are not read as text (find, summarize).
MAX_TEXT_BYTES = 1024 * 1024


class UnsafePath(ValueError):
    """A path that is malformed or leads outside the root; the message says why."""


def resolve_inside(root: Path, relative: str) -> Path:
    """The absolute path of ``relative`` under ``root``, symlinks resolved.

    Raises UnsafePath for NUL bytes, absolute paths, ``..`` parts, over-long names, and paths
    (symlinks included) that lead outside the root. The path need not exist.
    """
    if not isinstance(relative, str):
        raise UnsafePath("The path must be a string.")
    if "\x00" in relative:
        raise UnsafePath("The path contains a NUL byte.")
    if len(relative) > MAX_PATH_CHARS:
        raise UnsafePath(f"The path is longer than {MAX_PATH_CHARS} characters.")
    relative = relative.strip()
    if (
        relative.startswith(("/", "\\"))
        or PurePosixPath(relative).is_absolute()
        or (len(relative) > 1 and relative[1] == ":")
    ):
        raise UnsafePath("The path must be relative to the workspace's files.")
    parts = [part for part in relative.replace("\\", "/").split("/") if part not in ("", ".")]
    if ".." in parts:
        raise UnsafePath("The path may not contain '..'.")
    if any(len(part) > MAX_NAME_CHARS for part in parts):
        raise UnsafePath(f"A name in the path is longer than {MAX_NAME_CHARS} characters.")
    base = root.resolve()
    target = base.joinpath(*parts).resolve()
    if target != base and base not in target.parents:
        raise UnsafePath("The path leads outside the workspace's files.")
    return target


def relative_path(root: Path, path: Path) -> str:
    """``path`` relative to ``root``, with forward slashes ('' for the root itself)."""
    relative = path.relative_to(root.resolve()).as_posix()
    return "" if relative == "." else relative


@dataclass(frozen=True)
class Entry:
    name: str
    path: str
    kind: str  # "file" or "folder"
    size: int | None

    def as_dict(self) -> dict:
        return {"name": self.name, "path": self.path, "kind": self.kind, "size": self.size}


def list_folder(root: Path, relative: str = "", *, include_hidden: bool = False) -> list[Entry]:
    """The entries of a folder inside the root, folders first, then by name.

    Symlinks that lead outside the root are left out. Raises UnsafePath for a bad path and
    NotADirectoryError / FileNotFoundError when it is not an existing folder.
    """
    base = root.resolve()
    folder = resolve_inside(root, relative)
    if not folder.exists():
        raise FileNotFoundError(relative or ".")
    if not folder.is_dir():
        raise NotADirectoryError(relative)
    entries = []
    with os.scandir(folder) as items:
        for item in items:
            if item.name.startswith(".") and not include_hidden:
                continue
            target = Path(item.path).resolve()
            if target != base and base not in target.parents:
                continue
            is_dir = target.is_dir()
            size = None if is_dir else target.stat().st_size
            entries.append(
                Entry(
                    name=item.name,
                    path=relative_path(root, folder / item.name),
                    kind="folder" if is_dir else "file",
                    size=size,
                )
            )
    entries.sort(key=lambda e: (e.kind != "folder", e.name.lower()))
    return entries


def walk_files(root: Path):
    """Every regular file inside the root (hidden ones and links that leave it skipped)."""
    base = root.resolve()
    if not base.is_dir():
        return
    for folder, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = Path(folder) / name
            target = path.resolve()
            if base in target.parents and target.is_file():
                yield path


def read_text(path: Path) -> str | None:
    """The file's text, or None if it is too large or not text."""
    if path.stat().st_size > MAX_TEXT_BYTES:
        return None
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")
