"""Files under one root folder, reached from it by folder descriptors only: race-free by
construction.

Every operation walks its path down from the root's descriptor one name at a time
(core.rootwalk) and acts on the last name relative to its parent folder's descriptor, never
following a link there. So a name renamed, or a folder swapped for a link, at any moment can
never lead outside the root, nor to a hidden name. A path must pass core.pathrules' one rule, and
the path an operation reports (where it really acted, links resolved) passes it too.

Only regular files are opened for reading or writing: a named pipe, a socket or a device is
refused (a pipe opened for reading would wait for a writer). Nothing here knows what the root
belongs to.
"""

import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .pathrules import (
    MAX_PATH_CHARS,
    NOT_UTF8,
    UnsafePath,
    kind_of_stat,
    os_problem,
    outside,
    path_names,
    printable_name,
    shown_name,
    unusable,
)
from .rootwalk import LIST, WALK, Changed, Spot, Walk, open_spot, regular, stat_spot

# How many times an operation starts again when what it walked changed under it (a name
# swapped for a link between being looked at and being opened) before it gives up.
TRIES = 8


@dataclass(frozen=True)
class Within:
    """A folder inside a files root, itself the root of what is done there (a question's
    folder: its links may not leave it)."""

    root: Path
    folder: str


@dataclass(frozen=True)
class Found:
    """What a path names, links resolved: its kind, where it really is, its size (files) and
    when it last changed."""

    kind: str
    path: str
    size: int | None
    modified: float


@dataclass(frozen=True)
class Walked:
    """A regular file a walk found: its path as listed (a link's own), its real path, size and
    mtime."""

    path: str
    real: str
    size: int
    modified: float

    @property
    def name(self) -> str:
        return self.path.rpartition("/")[2]


def _existing(walk: Walk, names: list[str], shown: str, *, folder: bool) -> Spot:
    """Where ``names`` leads, which must be a folder (``folder``) or must not: raises
    FileNotFoundError when nothing is there, NotADirectoryError or IsADirectoryError when what
    is there is of the other kind."""
    spot = walk.resolve(names, shown)
    info = stat_spot(spot, shown) if spot.exists else None
    if info is None:
        raise FileNotFoundError(shown)
    if (kind_of_stat(info, shown) == "folder") != folder:
        raise (NotADirectoryError if folder else IsADirectoryError)(shown)
    return spot


class Root:
    """An open root folder (see opened): each method walks its path down from it."""

    def __init__(self, fd: int, prefixes: set[str]):
        self.fd = fd
        # The root's own absolute paths: an absolute link inside counts only below one of them.
        self.prefixes = prefixes

    def close(self) -> None:
        os.close(self.fd)

    def inside(self, target: str) -> str:
        """An absolute link target, relative to the root; UnsafePath if it is not below it."""
        for prefix in self.prefixes:
            if target == prefix or target.startswith(prefix.rstrip("/") + "/"):
                return target[len(prefix) :]
        raise outside()

    def _attempts(self, shown: str, act: Callable[[Walk], object]):
        for _ in range(TRIES):
            walk = Walk(self)
            try:
                return act(walk)
            except Changed:
                continue
            finally:
                walk.close()
        raise unusable(shown, "it kept changing while it was being used")

    def folder(self, relative: str) -> "Root":
        """The folder ``relative`` as a root of its own. Raises as inspect, FileNotFoundError
        when it is missing and NotADirectoryError when it is not a folder."""
        names = path_names(relative)
        shown = "/".join(names)

        def act(walk: Walk) -> Root:
            spot = _existing(walk, names, shown, folder=True)
            try:
                fd = os.open(spot.name, WALK, dir_fd=spot.parent)
            except OSError:
                raise Changed from None
            return Root(
                fd, {os.path.join(prefix, spot.path).rstrip("/") for prefix in self.prefixes}
            )

        return self._attempts(shown, act) if names else Root(os.dup(self.fd), self.prefixes)

    def inspect(self, relative: str, *, readable: bool = False) -> Found | None:
        """What ``relative`` names (None when nothing is there). With ``readable``, a file or a
        folder is also opened for reading (and closed) and refused if it cannot be. Raises
        UnsafePath / UnusablePath (see the module)."""
        names = path_names(relative)
        shown = "/".join(names)

        def act(walk: Walk) -> Found | None:
            spot = walk.resolve(names, shown)
            info = stat_spot(spot, shown) if spot.exists else None
            if info is None:
                return None
            kind = kind_of_stat(info, shown)
            if readable:
                try:
                    os.close(
                        open_spot(
                            spot, os.O_RDONLY | (os.O_DIRECTORY if kind == "folder" else 0), shown
                        )
                    )
                except FileNotFoundError:
                    return None
            size = info.st_size if kind == "file" else None
            return Found(kind=kind, path=spot.path, size=size, modified=info.st_mtime)

        return self._attempts(shown, act)

    def real_path(self, relative: str) -> str:
        """Where ``relative`` leads, links resolved; it need not exist."""
        names = path_names(relative)
        shown = "/".join(names)
        return self._attempts(shown, lambda walk: walk.resolve(names, shown).path)

    def exists(self, relative: str) -> bool:
        """Whether anything has the last name of ``relative`` (a link to nothing too)."""
        names = path_names(relative)
        shown = "/".join(names)
        return self._attempts(shown, lambda walk: walk.resolve(names, shown, follow=False).exists)

    def read(
        self, relative: str, limit: int, *, largest: int | None = None
    ) -> tuple[bytes, int, str]:
        """The first ``limit`` bytes of the regular file ``relative``, its size and real path
        (nothing is read if it is larger than ``largest``). Raises FileNotFoundError,
        IsADirectoryError, UnsafePath."""
        names = path_names(relative)
        shown = "/".join(names)

        def act(walk: Walk):
            spot = _existing(walk, names, shown, folder=False)
            fd = open_spot(spot, os.O_RDONLY, shown)
            size = regular(fd, shown).st_size
            with os.fdopen(fd, "rb") as file:
                if largest is not None and size > largest:
                    return b"", size, spot.path
                try:
                    return file.read(limit), size, spot.path
                except OSError as exc:
                    raise unusable(shown, os_problem(exc)) from None

        return self._attempts(shown, act)

    def write(
        self, relative: str, data: bytes, *, make_folders: bool = False, exclusive: bool = False
    ) -> tuple[str, bool]:
        """Write ``data`` to the regular file ``relative`` (made if missing, and its folders
        too with ``make_folders``; only if missing with ``exclusive``): its real path, and
        whether it was made. Never writes to anything but a regular file. Raises
        FileNotFoundError (no folder), FileExistsError, IsADirectoryError, UnsafePath."""
        names = path_names(relative)
        shown = "/".join(names)

        def act(walk: Walk):
            spot = walk.resolve(names, shown, create=make_folders)
            if spot.name == "." or not spot.complete:
                raise IsADirectoryError(shown) if spot.name == "." else FileNotFoundError(shown)
            info = stat_spot(spot, shown) if spot.exists else None
            if info is not None and exclusive:
                raise FileExistsError(shown)
            if info is not None and kind_of_stat(info, shown) == "folder":
                raise IsADirectoryError(shown)
            flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else 0)
            fd = open_spot(spot, flags, shown)
            regular(fd, shown)
            with os.fdopen(fd, "wb") as file:
                try:
                    file.truncate(0)
                    file.write(data)
                except OSError as exc:
                    raise unusable(shown, os_problem(exc)) from None
            return spot.path, info is None

        return self._attempts(shown, act)

    def rename(self, source: str, target: str, *, make_folders: bool = False) -> tuple[str, str]:
        """Move what ``source`` names (links resolved) to ``target``, which must be free: both
        real paths. Raises FileNotFoundError (no source, or no folder for the target),
        FileExistsError (the target is taken), UnsafePath (the root, a folder into itself)."""
        names, new_names = path_names(source), path_names(target)
        shown, new_shown = "/".join(names), "/".join(new_names)

        def act(walk: Walk):
            spot = walk.resolve(names, shown)
            if spot.name == ".":
                raise UnsafePath("The workspace's root cannot be renamed.")
            info = stat_spot(spot, shown) if spot.exists else None
            if info is None:
                raise FileNotFoundError(shown)
            kind = kind_of_stat(info, shown)
            to = walk.resolve(new_names, new_shown)
            if to.exists:
                raise FileExistsError(new_shown)
            if kind == "folder" and f"{to.path}/".startswith(f"{spot.path}/"):
                raise UnsafePath("A folder cannot be moved inside itself.")
            if not to.complete and make_folders:
                to = walk.resolve(new_names, new_shown, create=True)
            if not to.complete or to.exists:
                raise (
                    FileNotFoundError(new_shown) if not to.complete else FileExistsError(new_shown)
                )
            try:
                # Both names are single names in folders walked to: a link put there since is
                # moved itself, never followed.
                os.rename(spot.name, to.name, src_dir_fd=spot.parent, dst_dir_fd=to.parent)
            except FileNotFoundError:
                raise FileNotFoundError(shown) from None
            except OSError as exc:
                raise unusable(shown, os_problem(exc)) from None
            return spot.path, to.path

        return self._attempts(shown, act)

    def listdir(self, relative: str) -> tuple[str, list[str]]:
        """The real path of the folder ``relative`` and the names in it (as the disk has them).
        Raises FileNotFoundError, NotADirectoryError, UnsafePath."""
        names = path_names(relative)
        shown = "/".join(names)

        def act(walk: Walk):
            spot = _existing(walk, names, shown, folder=True)
            fd = open_spot(spot, os.O_RDONLY | os.O_DIRECTORY, shown)
            try:
                return spot.path, os.listdir(fd)
            except OSError as exc:
                raise unusable(shown, os_problem(exc)) from None
            finally:
                os.close(fd)

        return self._attempts(shown, act)

    def _scan(self, folder: list[str]) -> list[tuple[str, os.stat_result]]:
        """The names in the real folder ``folder`` and what each is (not following links),
        hidden ones left out; Changed or OSError when it cannot be listed."""
        walk = Walk(self)
        try:
            fd = os.open(".", LIST, dir_fd=walk.descend(folder))
            try:
                names = sorted(os.listdir(fd))
                found = []
                for name in names:
                    if name.startswith("."):
                        continue
                    try:
                        found.append((name, os.stat(name, dir_fd=fd, follow_symlinks=False)))
                    except (FileNotFoundError, NotADirectoryError):
                        continue  # gone since the folder was read
                    except OSError as exc:
                        found.append((name, exc))
                return found
            finally:
                os.close(fd)
        finally:
            walk.close()

    def walk_files(
        self, under: str, leave_out: Callable[[str, str, str], None]
    ) -> Iterator[Walked]:
        """Every regular file in the folder ``under``, each folder's files by name before its
        folders. Links to files are followed (as inspect does), links to folders are not;
        hidden names are passed over. What cannot be used is handed to ``leave_out(name, path,
        problem)``. Raises as listdir for ``under``."""
        found = self.inspect(under, readable=True)
        if found is None:
            raise FileNotFoundError(under)
        if found.kind != "folder":
            raise NotADirectoryError(under)
        stack = [found.path.split("/") if found.path else []]
        while stack:
            folder = stack.pop()
            here = "/".join(folder)
            try:
                entries = self._scan(folder)
            except Changed:
                continue
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                leave_out(folder[-1] if folder else ".", here or ".", os_problem(exc))
                continue
            folders = []
            for name, info in entries:
                path = f"{here}/{shown_name(name)}" if here else shown_name(name)
                try:
                    if not printable_name(name):
                        raise UnsafePath("The path is not valid text.", problem=NOT_UTF8)
                    if isinstance(info, OSError):
                        raise unusable(path, os_problem(info))
                    path_names(path)
                    if stat.S_ISLNK(info.st_mode):
                        found = self.inspect(path)
                        if found is not None and found.kind == "file":
                            yield Walked(path, found.path, found.size, found.modified)
                    elif stat.S_ISDIR(info.st_mode):
                        folders.append([*folder, name])
                    elif kind_of_stat(info, path) == "file":
                        yield Walked(path, path, info.st_size, info.st_mtime)
                except UnsafePath as exc:
                    leave_out(shown_name(name), path, exc.problem)
            stack.extend(reversed(folders))

    def remove_empty_folders(self) -> list[str]:
        """Remove every empty folder inside the root (not the root), deepest first: their
        paths. A folder holding anything, hidden names included, is kept."""
        order, stack = [], [[]]
        while stack:
            folder = stack.pop()
            try:
                entries = self._scan(folder)
            except (Changed, OSError):
                continue
            order.append(folder)
            for name, info in entries:
                path = "/".join([*folder, name])
                if isinstance(info, OSError) or not stat.S_ISDIR(info.st_mode):
                    continue
                if printable_name(name) and len(path) <= MAX_PATH_CHARS:
                    stack.append([*folder, name])
        removed = []
        for folder in reversed(order[1:]):
            walk = Walk(self)
            try:
                os.rmdir(folder[-1], dir_fd=walk.descend(folder[:-1]))
            except (Changed, OSError):
                continue  # not empty, gone, or not a folder any more
            finally:
                walk.close()
            removed.append("/".join(folder))
        return removed


def open_root(root: Path | Within) -> Root:
    """The root (or a folder inside one) opened; close it. Raises FileNotFoundError when it is
    missing, and for a folder inside, as Root.folder."""
    if isinstance(root, Within):
        outer = open_root(root.root)
        try:
            return outer.folder(root.folder)
        finally:
            outer.close()
    try:
        fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(".") from None
    except OSError as exc:
        raise unusable("", os_problem(exc)) from None
    return Root(fd, {os.path.realpath(root), os.path.abspath(root)})


@contextmanager
def opened(root: Path | Within) -> Iterator[Root]:
    """The root opened for the block (see open_root)."""
    handle = open_root(root)
    try:
        yield handle
    finally:
        handle.close()
