"""`make test`: the whole suite in four passes run at once, each in its own process.

Every test runs on SQLite, and every test but the browser's and the SQLite backend's own runs
again on PostgreSQL (behind PgBouncer) with Redis, started for the pass by ``ops.servers``. Each
backend's tests are split in two so that the machine's cores stay busy while one pass waits on
its servers, browsers or sockets:

- ``sqlite``: everything on SQLite but the browser tests (printed as it goes);
- ``browser``: the browser tests (Chromium through Playwright), on SQLite;
- ``postgresql``: everything else on PostgreSQL;
- ``cluster``: the multi-process tests, the fuzzers, and the tests that do not depend on the
  database (``once``: run in this pass only), on PostgreSQL and Redis of their own.

The passes share nothing: each has its own scratch folder, database and ports. The other
passes' output goes to ``test-artifacts/test-<pass>.log`` and is printed once all have ended.
The exit status is 0 only if every pass passed.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
PYTEST = [sys.executable, "-m", "pytest"]
ON_POSTGRESQL = [sys.executable, "-m", "ops.servers", "--", *PYTEST, "-p", "no:cacheprovider"]
ONLY_POSTGRESQL = "not browser and not sqlite and not once"

# (name, command): the first is printed as it runs, the others are logged.
PASSES = [
    (
        "sqlite",
        [*PYTEST, "-m", "not cluster and not postgresql and not browser and (not once or sqlite)"],
    ),
    ("browser", [*PYTEST, "-p", "no:cacheprovider", "-m", "browser"]),
    ("postgresql", [*ON_POSTGRESQL, "-m", f"{ONLY_POSTGRESQL} and not cluster and not postgresql"]),
    (
        "cluster",
        [*ON_POSTGRESQL, "-m", "not browser and not sqlite and (cluster or postgresql or once)"],
    ),
]


def main(argv: list[str]) -> int:
    ARTIFACTS.mkdir(exist_ok=True)
    started = time.monotonic()
    running = []
    for index, (name, command) in enumerate(PASSES):
        command = [*command, *argv]
        if index == 0:
            running.append((name, subprocess.Popen(command, cwd=ROOT), None))
            continue
        log = ARTIFACTS / f"test-{name}.log"
        with open(log, "wb") as output:
            process = subprocess.Popen(
                command, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, env=os.environ
            )
        running.append((name, process, log))
    statuses = {}
    while len(statuses) < len(running):
        for name, process, _log in running:
            if name not in statuses and process.poll() is not None:
                statuses[name] = process.returncode
                minutes, seconds = divmod(round(time.monotonic() - started), 60)
                print(
                    f"[{minutes}m{seconds:02d}s] The {name} pass ended: exit {process.returncode}",
                    flush=True,
                )
        time.sleep(1)
    for name, _process, log in running:
        if log is not None:
            print(f"\n===== The {name} pass ({log.relative_to(ROOT)}) =====", flush=True)
            sys.stdout.buffer.write(log.read_bytes())
            sys.stdout.buffer.flush()
    print("\n" + "; ".join(f"{name} pass: exit {status}" for name, status in statuses.items()))
    return 0 if all(status == 0 for status in statuses.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
