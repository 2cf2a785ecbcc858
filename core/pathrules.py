"""What a path inside a files root may be, one rule for what is offered and what is accepted,
and the words for what is wrong with one.

A path is relative, in UTF-8, at most MAX_PATH_CHARS characters, of names of at most
MAX_NAME_BYTES bytes; it holds no ``..`` and no hidden name (one that starts with a dot:
``.env``, ``.git``). Names are taken as they are: spaces, backslashes and colons are parts of
names on this system. Messages name a path relative to the root, never the server's own paths.
"""

import errno
import os
import stat

MAX_PATH_CHARS = 1024
# Linux's limit for one name (one part of a path), in bytes (UTF-8).
MAX_NAME_BYTES = 255
SPECIAL_KINDS = {
    stat.S_IFIFO: "a named pipe",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a device",
    stat.S_IFBLK: "a device",
}

OUTSIDE = "The path leads outside the workspace's files."
HIDDEN = "Hidden files and folders (names starting with a dot) are out of reach."
LOOP = "a loop of symbolic links"
DANGLING = "a symbolic link to something that does not exist"
NOT_TEXT_TARGET = "a link to a name that is not UTF-8"
HIDDEN_TARGET = "a link to a hidden file or folder"
IN_THE_WAY = "a file is in the way of its folder"
NOT_UTF8 = "its name is not UTF-8"


class UnsafePath(ValueError):
    """A path that is malformed, hidden, or leads outside the root; the message says why."""

    def __init__(self, message: str, *, problem: str | None = None):
        super().__init__(message)
        # The problem alone, without the path (a listing shows it beside the entry's name).
        self.problem = problem or message


class UnusablePath(UnsafePath):
    """A path that names something that cannot be used: a loop of links, a link to nothing, a
    name too long, no permission, something that is neither a file nor a folder. The message
    names the path relative to the root."""


def outside() -> UnsafePath:
    return UnsafePath(OUTSIDE, problem="a link that leads outside the workspace's files")


def hidden() -> UnsafePath:
    return UnsafePath(HIDDEN, problem="a hidden file or folder")


def unusable(shown: str, problem: str) -> UnusablePath:
    return UnusablePath(f"'{shown or '.'}' cannot be used ({problem}).", problem=problem)


def os_problem(exc: OSError) -> str:
    """What an OSError means, in words, without the path it carries."""
    if exc.errno == errno.ELOOP:
        return LOOP
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


def path_names(relative) -> list[str]:
    """The names in a relative path, checked against the one rule (see the module). Names are
    taken as they are: spaces, backslashes and colons are parts of names on this system."""
    if not isinstance(relative, str):
        raise UnsafePath("The path must be a string.")
    if "\x00" in relative:
        raise UnsafePath("The path contains a NUL byte.")
    if len(relative) > MAX_PATH_CHARS:
        raise UnsafePath(
            f"The path is longer than {MAX_PATH_CHARS} characters.",
            problem=f"its path is longer than {MAX_PATH_CHARS} characters",
        )
    if relative.startswith("/"):
        raise UnsafePath("The path must be relative to the workspace's files.")
    names = [name for name in relative.split("/") if name not in ("", ".")]
    if ".." in names:
        raise UnsafePath("The path may not contain '..'.")
    for name in names:
        try:
            size = len(name.encode("utf-8"))
        except UnicodeEncodeError:
            raise UnsafePath("The path is not valid text.", problem=NOT_UTF8) from None
        if size > MAX_NAME_BYTES:
            raise UnsafePath(
                f"A name in the path is longer than {MAX_NAME_BYTES} bytes (in UTF-8).",
                problem="a name is too long for the file system",
            )
        if name.startswith("."):
            raise hidden()
    return names


def kind_of_stat(info: os.stat_result, shown: str) -> str:
    """'file' or 'folder'; UnusablePath naming ``shown`` for anything else."""
    if stat.S_ISDIR(info.st_mode):
        return "folder"
    if stat.S_ISREG(info.st_mode):
        return "file"
    what = SPECIAL_KINDS.get(stat.S_IFMT(info.st_mode), "something else")
    raise unusable(shown, f"{what}, not a file or folder")
