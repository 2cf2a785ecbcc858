"""Whose code a frame is: Daphne, autobahn, Twisted, Channels, asgiref, Django, Parley, the
standard library..., for bench/ratios.py's summaries of a py-spy profile and of a tracemalloc
diff. A sample or an allocation belongs to the innermost frame that is not the standard
library's (so asyncio's queues that Daphne makes are Daphne's).
"""

import re
import sys
import sysconfig
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STDLIB = "asyncio/stdlib"
LIBRARIES = {
    "daphne": "Daphne",
    "autobahn": "autobahn",
    "txaio": "autobahn",
    "twisted": "Twisted",
    "zope": "Twisted",
    "channels": "Channels",
    "channels_redis": "Channels",
    "asgiref": "asgiref",
    "django": "Django",
    "rest_framework": "Django",
    "psycopg": "psycopg",
    "psycopg_pool": "psycopg",
    "redis": "redis-py",
    "msgpack": "channels_redis",
}
PARLEY = {
    path.name for path in ROOT.iterdir() if path.is_dir() and (path / "__init__.py").exists()
} - {"bench", "tests"}
_STDLIB_DIR = sysconfig.get_paths()["stdlib"]


def owner(filename: str) -> str:
    """The owner of a frame's file, given as an absolute path (tracemalloc) or as py-spy shortens
    it (relative to the entry of sys.path it was found in)."""
    if "site-packages/" in filename:
        filename = filename.split("site-packages/", 1)[1]
    elif filename.startswith(str(ROOT) + "/"):
        filename = filename[len(str(ROOT)) + 1 :]
    elif filename.startswith(_STDLIB_DIR) or filename.startswith("<"):
        return STDLIB
    top = filename.split("/", 1)[0].removesuffix(".py")
    if top in LIBRARIES:
        return LIBRARIES[top]
    if top in PARLEY:
        return "Parley"
    if top == "bench":
        return "bench"
    if top in sys.stdlib_module_names:
        return STDLIB
    return "other"


def innermost_owner(filenames) -> str:
    """The owner of the innermost frame not the standard library's (``filenames`` from the
    outermost frame in); the standard library's when all are."""
    for filename in reversed(list(filenames)):
        found = owner(filename)
        if found != STDLIB:
            return found
    return STDLIB


_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*):(?P<line>\d+)\)$")


def summarise_profile(paths: list[Path], top: int = 12) -> dict:
    """py-spy profiles in ``--format raw`` (collapsed stacks, outermost frame first), taken
    together: the share of samples by owner, and the ``top`` functions by self time (share of
    samples)."""
    owners: Counter = Counter()
    functions: Counter = Counter()
    total = 0
    lines = [line for path in paths if path.exists() for line in path.read_text().splitlines()]
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        count = int(count)
        frames = [m for part in stack.split(";") if (m := _FRAME.match(part))]
        if not frames:
            continue
        total += count
        owners[innermost_owner(m["file"] for m in frames)] += count
        last = frames[-1]
        functions[f"{last['function']} ({last['file']}:{last['line']})"] += count
    return {
        "samples": total,
        "owners": {name: n / total for name, n in owners.most_common()} if total else {},
        "top": [[name, n / total] for name, n in functions.most_common(top)] if total else [],
    }


def profile_lines(summary: dict, indent: str = "    ") -> list[str]:
    if not summary["samples"]:
        return [f"{indent}(no samples)"]
    owners = ", ".join(f"{name} {share:.0%}" for name, share in summary["owners"].items())
    lines = [f"{indent}{summary['samples']:,} samples holding the GIL, by owner: {owners}"]
    lines.append(f"{indent}top functions by self time:")
    for name, share in summary["top"]:
        lines.append(f"{indent}  {share:6.1%}  {name}")
    return lines


def memory_by_owner(before, after, sockets: int) -> dict:
    """KB per socket by owner, from two tracemalloc snapshots taken before and after opening
    ``sockets`` sockets (each allocation's owner: its traceback's innermost non-stdlib frame)."""
    kb: Counter = Counter()
    for diff in after.compare_to(before, "traceback"):
        if diff.size_diff:
            files = [frame.filename for frame in diff.traceback]  # outermost first
            kb[innermost_owner(files)] += diff.size_diff / 1024 / sockets
    return dict(sorted(kb.items(), key=lambda item: -item[1]))
