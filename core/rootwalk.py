"""The descriptor walk under core.rootfs: a path walked down from a root's descriptor one name
at a time, each folder opened relative to the one before with ``O_NOFOLLOW``, and what it ends
on named by its parent folder's descriptor and a single name.

A link met on the way is read (``readlinkat``) and its target walked the same way, from the
folder it is in: ``..`` goes back up the folders walked, never above the root; an absolute
target counts only when it begins with the root's own path. A link whose target leaves the root,
passes through a hidden name, loops or leads nowhere cannot be used. Nothing here follows a link
by the system's own walk, so whatever is renamed or swapped for a link meanwhile, a walk can
end only inside the root and on no hidden name. An operation that finds a link where the walk
found none raises Changed and starts again.
"""

import errno
import os
import stat
from dataclasses import dataclass

from .pathrules import (
    DANGLING,
    HIDDEN_TARGET,
    IN_THE_WAY,
    LOOP,
    MAX_PATH_CHARS,
    NOT_TEXT_TARGET,
    hidden,
    kind_of_stat,
    os_problem,
    outside,
    printable_name,
    unusable,
)

# How many links one path may go through (Linux gives up after 40 too).
MAX_LINKS = 40
# Folders on the way are held as O_PATH descriptors: walking through one needs only the right to
# search it, as the system's own walk does. A folder is opened for reading only to list it.
WALK = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
LIST = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# A file is opened without waiting (a named pipe would wait for its other end) and without
# following a link.
OPEN = os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


class Changed(Exception):
    """What was walked changed under the walk (a name became a link): start again."""


@dataclass(frozen=True)
class Spot:
    """Where a walk ended: the descriptor of the folder holding the last name, that name ('.' for
    the root itself; never a link when links were followed), whether it exists, whether its
    folder does (``complete``), and the path to it from the root, links resolved."""

    parent: int
    name: str
    path: str
    exists: bool
    complete: bool = True


class Walk:
    """One attempt at an operation: the descriptors it keeps open until it is done (those of the
    folders its walks ended in), closed together."""

    def __init__(self, root):
        self.root = root
        self.fds: list[int] = []

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()

    def keep(self, fd: int) -> int:
        if fd != self.root.fd:
            self.fds.append(fd)
        return fd

    def _let_go(self, fd: int) -> None:
        if fd != self.root.fd:
            os.close(fd)

    def _descend(self, names: list[str]) -> int:
        """The folder at ``names`` (real names from the root, no link among them), which the
        caller closes unless it is the root's: Changed if one is no longer a folder."""
        current = self.root.fd
        for name in names:
            try:
                inner = os.open(name, WALK, dir_fd=current)
            except OSError:
                self._let_go(current)
                raise Changed from None
            self._let_go(current)
            current = inner
        return current

    def descend(self, names: list[str]) -> int:
        """As _descend, kept open until the attempt ends."""
        return self.keep(self._descend(names))

    def resolve(
        self, names: list[str], shown: str, *, follow: bool = True, create: bool = False
    ) -> Spot:
        """Walk ``names`` from the root. Links are followed (the last one too if ``follow``);
        with ``create``, missing folders on the way are made. What does not exist is kept by
        name (``exists`` false). Raises UnsafePath for what leaves the root or is hidden, and
        UnusablePath for a loop, a link to nothing, or what cannot be looked at."""
        state = Resolution(self, names, shown)
        try:
            spot = state.run(follow=follow, create=create)
        except BaseException:
            self._let_go(state.current)
            raise
        self.keep(spot.parent)
        return spot


class Resolution:
    """One walk down a path (see Walk.resolve): the folder it is in (``current``, a descriptor
    it owns unless it is the root's) and the real names that lead there from the root."""

    def __init__(self, walk: Walk, names: list[str], shown: str):
        self.walk, self.names, self.shown = walk, names, shown
        self.current = walk.root.fd
        self.path: list[str] = []

    def _move(self, fd: int, path: list[str]) -> None:
        self.walk._let_go(self.current)
        self.current, self.path = fd, path

    def run(self, *, follow: bool, create: bool) -> Spot:
        names = self.names
        pending = [(name, index, False) for index, name in enumerate(names)]
        links = 0
        while pending:
            name, index, linked = pending.pop(0)
            here = "/".join(names[: index + 1])
            if name in ("", "."):
                continue
            if name == "..":
                if not self.path:
                    raise outside()
                up = self.path[:-1]
                self._move(self.walk.root.fd, [])
                self._move(self.walk._descend(up), up)
                continue
            if name.startswith("."):
                raise unusable(here, HIDDEN_TARGET) if linked else hidden()
            if not printable_name(name):
                raise unusable(here, NOT_TEXT_TARGET)
            last = not pending
            if last and not follow:
                return self._spot(name, exists=_lexists(name, self.current, here))
            target = _read_link(name, self.current, here)
            if target is not None and target is not _MISSING:
                links += 1
                if links > MAX_LINKS:
                    raise unusable(here, LOOP)
                if target.startswith("/"):
                    target = self.walk.root.inside(target)
                    self._move(self.walk.root.fd, [])
                pending[:0] = [(part, index, True) for part in target.split("/")]
                continue
            if target is _MISSING:
                if linked:
                    raise unusable(here, DANGLING)
                if create and not last:
                    _make_folder(name, self.current, here)
                    pending.insert(0, (name, index, linked))
                    continue
                return self._spot(name, exists=False, rest=[part for part, _, _ in pending])
            if last:
                return self._spot(name, exists=True)
            try:
                inner = os.open(name, WALK, dir_fd=self.current)
            except (NotADirectoryError, FileNotFoundError):
                # A file (or a pipe...) where a folder should be, or a name that changed since
                # it was read: looked at again, as many times as links may be.
                links += 1
                if links > MAX_LINKS:
                    raise unusable(here, "it kept changing while it was being looked at") from None
                if _read_link(name, self.current, here) is None:
                    if create:
                        raise unusable(here, IN_THE_WAY) from None
                    return self._spot(name, exists=False, rest=[part for part, _, _ in pending])
                pending.insert(0, (name, index, linked))
                continue
            except OSError as exc:
                raise unusable(here, os_problem(exc)) from None
            self._move(inner, [*self.path, name])
        # The walk ended on a folder it entered (or on the root): named from its parent.
        if not self.path:
            return Spot(self.walk.root.fd, ".", "", exists=True)
        *up, name = self.path
        self._move(self.walk.root.fd, [])
        self._move(self.walk._descend(up), up)
        return self._spot(name, exists=True)

    def _spot(self, name: str, *, exists: bool, rest=()) -> Spot:
        full = "/".join([*self.path, name, *rest])
        if len(full) > MAX_PATH_CHARS:
            problem = f"the path it leads to is longer than {MAX_PATH_CHARS} characters"
            raise unusable(self.shown, problem)
        return Spot(self.current, name, full, exists=exists, complete=not rest)


_MISSING = object()


def _read_link(name: str, folder: int, shown: str):
    """The target of the link ``name`` in ``folder``; None if it is not a link, _MISSING if
    nothing is there."""
    try:
        return os.readlink(name, dir_fd=folder)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return _MISSING
        raise unusable(shown, os_problem(exc)) from None


def _lexists(name: str, folder: int, shown: str) -> bool:
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as exc:
        raise unusable(shown, os_problem(exc)) from None
    return True


def _make_folder(name: str, folder: int, shown: str) -> None:
    try:
        os.mkdir(name, 0o777, dir_fd=folder)
    except FileExistsError:
        pass  # made meanwhile: looked at again
    except OSError as exc:
        raise unusable(shown, os_problem(exc)) from None


def stat_spot(spot: Spot, shown: str) -> os.stat_result | None:
    """What is at ``spot``, not following a link (one there now was put there since)."""
    try:
        info = os.stat(spot.name, dir_fd=spot.parent, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise unusable(shown, os_problem(exc)) from None
    if stat.S_ISLNK(info.st_mode):
        raise Changed
    return info


def open_spot(spot: Spot, flags: int, shown: str, mode: int = 0o666) -> int:
    """A descriptor of what is at ``spot``, opened without following a link or waiting."""
    try:
        return os.open(spot.name, flags | OPEN, mode, dir_fd=spot.parent)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Changed from None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise FileNotFoundError(shown) from None
        if exc.errno == errno.EISDIR:
            raise IsADirectoryError(shown) from None
        if exc.errno == errno.EEXIST:
            raise FileExistsError(shown) from None
        raise unusable(shown, os_problem(exc)) from None


def regular(fd: int, shown: str) -> os.stat_result:
    """The stat of the open ``fd``; UnusablePath (and ``fd`` closed) unless a regular file."""
    try:
        info = os.fstat(fd)
        if kind_of_stat(info, shown) != "file":
            raise IsADirectoryError(shown)
    except BaseException:
        os.close(fd)
        raise
    return info
