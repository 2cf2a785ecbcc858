"""Safe access to a workspace's files root: every path is relative, resolved, and kept inside it.

Links are followed one step at a time, as the system would, so that a loop of links, a link to
nothing, a name too long for the file system or an entry that cannot be read is refused with a
sentence naming the path relative to the root (never the server's own path). A listing or a
walk leaves such entries out and says which, and goes on with the others. Only regular files
are ever opened: a named pipe, a socket or a device is refused without being opened (opening a
pipe for reading waits for a writer).
"""

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

MAX_PATH_CHARS = 1024
# Linux's limits: a name (one part of a path) and a whole path, in bytes (UTF-8), the path's
# including the root's own and the NUL that ends it.
MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4096
# How many links one path may go through (Linux gives up after 40 too).
MAX_LINKS = 40
# Files larger than this are not read as text (find, summarize).
MAX_TEXT_BYTES = 1024 * 1024

SPECIAL_KINDS = {
    stat.S_IFIFO: "a named pipe",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a device",
    stat.S_IFBLK: "a device",
}


class UnsafePath(ValueError):
    """A path that is malformed or leads outside the root; the message says why."""

    def __init__(self, message: str, *, problem: str | None = None):
        super().__init__(message)
        # The problem alone, without the path (a listing shows it beside the entry's name).
        self.problem = problem or message


OUTSIDE = "The path leads outside the workspace's files."
NOT_TEXT_TARGET = "a link to a name that is not UTF-8"


def _outside() -> UnsafePath:
    return UnsafePath(OUTSIDE, problem="a link that leads outside the workspace's files")


class UnusablePath(UnsafePath):
    """A path that names something that cannot be used: a loop of links, a link to nothing, a
    name too long, no permission, something that is neither a file nor a folder. The message
    names the path relative to the root."""


def _unusable(shown: str, problem: str) -> UnusablePath:
    return UnusablePath(f"'{shown or '.'}' cannot be used ({problem}).", problem=problem)


def os_problem(exc: OSError) -> str:
    """What an OSError means, in words, without the path it carries."""
    if exc.errno == errno.ELOOP:
        return "a loop of symbolic links"
    if exc.errno == errno.ENAMETOOLONG:
        return "the path is too long for the file system"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return "it vanished while it was being looked at"
    if exc.errno == errno.ENXIO:
        return "a named pipe or a device, not a file"
    return (exc.strerror or "it could not be read or written").lower()


def printable_name(name: str) -> bool:
    """Whether a name (or path) read from the disk is text (a name that is not UTF-8 comes back with
    lone surrogates, which JSON, PostgreSQL and people cannot take)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_name(name: str) -> str:
    """A name read from the disk, as text a person can read (bytes that are not UTF-8 become
    U+FFFD)."""
    return os.fsencode(name).decode("utf-8", "replace")


def _base(root: Path) -> str:
    return os.path.realpath(root)


def _inside(base: str, path: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")


def _lexical(path: str, rest: list[str]) -> str:
    """``path`` with ``rest`` joined to it, ``..`` taken away by name (nothing there exists)."""
    return os.path.normpath(os.path.join(path, *rest)) if rest else path


def _resolve(base: str, start: str, parts: list[str], shown_prefix: str = "") -> str:
    """The real path of ``parts`` from the real folder ``start``, links followed one step at
    a time. What does not exist is kept by name. Raises UnsafePath for a loop, a link to
    nothing, a link leading outside ``base``, and what cannot be looked at."""
    path, links = start, 0
    for index, part in enumerate(parts):
        shown = "/".join(filter(None, [shown_prefix, *parts[: index + 1]]))
        pending, followed = [part], False
        while pending:
            name = pending.pop(0)
            if name in ("", "."):
                continue
            if name == "..":
                path = os.path.dirname(path)
                continue
            candidate = os.path.join(path, name)
            try:
                info = os.lstat(candidate)
            except (FileNotFoundError, NotADirectoryError):
                rest = pending + parts[index + 1 :]
                if not followed:
                    return _lexical(candidate, rest)
                if not _inside(base, _lexical(candidate, rest)):
                    raise _outside() from None
                raise _unusable(shown, "a symbolic link to something that does not exist") from None
            except OSError as exc:
                raise _unusable(shown, os_problem(exc)) from None
            if not stat.S_ISLNK(info.st_mode):
                path = candidate
                continue
            links += 1
            if links > MAX_LINKS:
                raise _unusable(shown, "a loop of symbolic links")
            try:
                target = os.readlink(candidate)
            except OSError as exc:
                raise _unusable(shown, os_problem(exc)) from None
            if target.startswith("/"):
                path = "/"
            pending[:0] = target.split("/")
            followed = True
    return path


def _parts(relative) -> list[str]:
    """The names in a relative path, checked (see resolve_inside)."""
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
    for part in parts:
        try:
            size = len(part.encode("utf-8"))
        except UnicodeEncodeError:
            raise UnsafePath("The path is not valid text.") from None
        if size > MAX_NAME_BYTES:
            raise UnsafePath(
                f"A name in the path is longer than {MAX_NAME_BYTES} bytes (in UTF-8).",
                problem="a name is too long for the file system",
            )
    return parts


def resolve_inside(root: Path, relative: str) -> Path:
    """The absolute path of ``relative`` under ``root``, symlinks resolved.

    Raises UnsafePath for NUL bytes, absolute paths, ``..`` parts, over-long names (over 255
    bytes in UTF-8) or paths, and paths (symlinks included) that lead outside the root; and
    UnusablePath (an UnsafePath) for a loop of links, a link to nothing, or a part that cannot
    be looked at. The path need not exist.
    """
    parts = _parts(relative)
    base = _base(root)
    target = _resolve(base, base, parts)
    if not _inside(base, target):
        raise _outside()
    if not printable_name(target):
        # Only a link leads there (what was asked is text): its path could not be shown.
        raise _unusable("/".join(parts), NOT_TEXT_TARGET)
    if len(os.fsencode(target)) >= MAX_PATH_BYTES:
        raise _unusable("/".join(parts), "the path is too long for the file system")
    return Path(target)


def relative_path(root: Path, path: Path) -> str:
    """``path`` relative to ``root``, with forward slashes ('' for the root itself)."""
    base, path = _base(root), str(path)
    if path == base:
        return ""
    if not _inside(base, path):
        raise _outside()
    return path[len(base.rstrip("/")) + 1 :]


def kind_of(path: Path, shown: str) -> str | None:
    """'file' or 'folder' for what is at ``path`` (a real path, from resolve_inside), or None
    when nothing is. Raises UnusablePath, naming ``shown``, for anything else (a named pipe, a
    socket, a device: never opened) and for what cannot be looked at."""
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise _unusable(shown, os_problem(exc)) from None
    return _kind(info, shown)


def check_readable(path: Path, kind: str, shown: str) -> None:
    """Raise UnusablePath, naming ``shown``, unless the file or folder (``kind``, from kind_of)
    at ``path`` can be read. It is opened and closed at once: only a regular file or a folder
    ever is, and without waiting or following a link."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
    if kind == "folder":
        flags |= os.O_DIRECTORY
    try:
        fd = os.open(path, flags)
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(shown) from None
    except OSError as exc:
        raise _unusable(shown, os_problem(exc)) from None
    os.close(fd)


def _kind(info: os.stat_result, shown: str) -> str:
    if stat.S_ISDIR(info.st_mode):
        return "folder"
    if stat.S_ISREG(info.st_mode):
        return "file"
    what = SPECIAL_KINDS.get(stat.S_IFMT(info.st_mode), "something else")
    raise _unusable(shown, f"{what}, not a file or folder")


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
    """A folder's usable entries, folders first, and those left out (loops, links to nothing or
    outside the root, pipes, what cannot be read), by name."""

    entries: list[Entry] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def _unnamable(name: str, path: str) -> str | None:
    """Why an entry could not be named anywhere in Parley (an answer, a question's root, a
    tool's argument: see _parts), or None."""
    if not printable_name(name):
        return "its name is not UTF-8"
    if len(path) > MAX_PATH_CHARS:
        return f"its path is longer than {MAX_PATH_CHARS} characters"
    return None


def list_folder(root: Path, relative: str = "", *, include_hidden: bool = False) -> Listing:
    """The entries of a folder inside the root, folders first, then by name.

    Entries that cannot be used are left out of ``entries`` and named in ``skipped``: links
    that lead outside the root, loops of links, links to nothing, names that are not UTF-8,
    named pipes, sockets and devices, and what cannot be looked at or read. Raises UnsafePath
    for a bad path or a folder that cannot be read, and NotADirectoryError / FileNotFoundError
    when it is not an existing folder.
    """
    base = _base(root)
    folder = resolve_inside(root, relative)
    shown = "/".join(_parts(relative))
    kind = kind_of(folder, shown)
    if kind is None:
        raise FileNotFoundError(relative or ".")
    if kind != "folder":
        raise NotADirectoryError(relative)
    here = relative_path(root, folder)
    try:
        with os.scandir(folder) as items:
            names = [item.name for item in items]
    except FileNotFoundError:
        raise FileNotFoundError(relative or ".") from None
    except OSError as exc:
        raise _unusable(shown, os_problem(exc)) from None
    listing = Listing()
    for name in names:
        if name.startswith(".") and not include_hidden:
            continue
        path = _join(here, shown_name(name))
        if problem := _unnamable(name, path):
            listing.skipped.append(Skipped(shown_name(name), path, problem))
            continue
        try:
            target = _resolve(base, str(folder), [name], here)
            if not _inside(base, target):
                raise _outside()
            if not printable_name(target):
                raise _unusable(path, NOT_TEXT_TARGET)
            info = os.stat(target)
            kind = _kind(info, path)
            check_readable(target, kind, path)
        except UnsafePath as exc:
            listing.skipped.append(Skipped(name, path, exc.problem))
            continue
        except (FileNotFoundError, NotADirectoryError):
            continue  # gone since the folder was read
        except OSError as exc:
            listing.skipped.append(Skipped(name, path, os_problem(exc)))
            continue
        size = None if kind == "folder" else info.st_size
        listing.entries.append(Entry(name=name, path=path, kind=kind, size=size))
    listing.entries.sort(key=lambda e: (e.kind != "folder", e.name.lower()))
    listing.skipped.sort(key=lambda e: e.name.lower())
    return listing


@dataclass(frozen=True)
class WalkedFile:
    """A regular file walk_files found: its path (relative), real path, size and mtime."""

    path: str
    real: Path
    size: int
    modified: float

    @property
    def name(self) -> str:
        return self.path.rpartition("/")[2]


def walk_files(root: Path, under: str = "", skipped: list | None = None) -> Iterator[WalkedFile]:
    """Every regular file inside the root (or its folder ``under``), each folder's files by
    name before its folders. Hidden ones are skipped, and so are links to folders (which are not
    followed). Entries that cannot be used (see list_folder) are left out and, if ``skipped``
    is a list, added to it. Raises UnsafePath for a bad ``under``, or one that cannot be read."""
    base = _base(root)
    start = resolve_inside(root, under)
    kind = kind_of(start, under)
    if kind != "folder":
        return
    check_readable(start, kind, under)
    stack = [(relative_path(root, start), str(start))]

    def leave_out(name: str, path: str, problem: str) -> None:
        if skipped is not None:
            skipped.append(Skipped(shown_name(name), path, problem))

    while stack:
        here, folder = stack.pop()
        try:
            with os.scandir(folder) as items:
                names = sorted(item.name for item in items)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            leave_out(here.rpartition("/")[2], here, os_problem(exc))
            continue
        folders = []
        for name in names:
            if name.startswith("."):
                continue
            path = _join(here, shown_name(name))
            if problem := _unnamable(name, path):
                leave_out(name, path, problem)
                continue
            real = os.path.join(folder, name)
            try:
                info = os.lstat(real)
                if stat.S_ISLNK(info.st_mode):
                    real = _resolve(base, folder, [name], here)
                    if not _inside(base, real):
                        raise _outside()
                    info = os.stat(real)
                    if stat.S_ISDIR(info.st_mode):
                        continue
                elif stat.S_ISDIR(info.st_mode):
                    folders.append((path, real))
                    continue
                _kind(info, path)
            except UnsafePath as exc:
                leave_out(name, path, exc.problem)
                continue
            except (FileNotFoundError, NotADirectoryError):
                continue  # gone since the folder was read
            except OSError as exc:
                leave_out(name, path, os_problem(exc))
                continue
            yield WalkedFile(path=path, real=Path(real), size=info.st_size, modified=info.st_mtime)
        stack.extend(reversed(folders))


def _open_regular(path: Path, shown: str, flags: int) -> int:
    """A descriptor of the regular file at ``path``. Opened without waiting (a named pipe
    would wait for its other end) and without following a link (``path`` is real: a link
    there now was put there since), then refused unless it is a regular file."""
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(shown) from None
    except IsADirectoryError:
        raise _unusable(shown, "a folder, not a file") from None
    except OSError as exc:
        raise _unusable(shown, os_problem(exc)) from None
    try:
        if _kind(os.fstat(fd), shown) != "file":
            raise _unusable(shown, "a folder, not a file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(path: Path, shown: str, limit: int = MAX_TEXT_BYTES) -> tuple[bytes, int]:
    """The first ``limit`` bytes of the regular file at ``path`` (a real path), and its size.
    Raises UnusablePath naming ``shown`` when it is not a regular file or cannot be read, and
    FileNotFoundError when nothing is there."""
    fd = _open_regular(path, shown, os.O_RDONLY)
    try:
        with os.fdopen(fd, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            return file.read(limit), size
    except OSError as exc:
        raise _unusable(shown, os_problem(exc)) from None


def read_text(path: Path, shown: str) -> str | None:
    """The text of the regular file at ``path``, or None if it is too large (nothing is read
    then) or not text. Raises as read_bytes."""
    fd = _open_regular(path, shown, os.O_RDONLY)
    try:
        with os.fdopen(fd, "rb") as file:
            if os.fstat(file.fileno()).st_size > MAX_TEXT_BYTES:
                return None
            data = file.read(MAX_TEXT_BYTES + 1)
    except OSError as exc:
        raise _unusable(shown, os_problem(exc)) from None
    if len(data) > MAX_TEXT_BYTES or b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def write_text(path: Path, shown: str, content: str) -> None:
    """Write ``content`` to the regular file at ``path`` (a real path), made if missing; its
    folder must exist. Never writes to anything but a regular file. Raises UnusablePath."""
    fd = _open_regular(path, shown, os.O_WRONLY | os.O_CREAT)
    try:
        with os.fdopen(fd, "wb") as file:
            file.truncate(0)
            file.write(content.encode("utf-8"))
    except OSError as exc:
        raise _unusable(shown, os_problem(exc)) from None


def make_folders(path: Path, shown: str) -> None:
    """Make the folder at ``path`` (a real path inside the root) and its parents. Raises
    UnusablePath naming ``shown`` when one is in the way or cannot be made."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise _unusable(shown, "a file is in the way of its folder") from None
    except OSError as exc:
        raise _unusable(shown, os_problem(exc)) from None
