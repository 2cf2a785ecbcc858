"""Starts a Daphne (Parley's or a bare app, as its arguments say) for bench/tracing.py: on
SIGUSR2 it turns tracemalloc on (once started: tracing the imports would take half a minute),
on SIGUSR1 it writes a snapshot to the file named by BENCH_TRACE_SNAPSHOT (written beside it,
then renamed into place, so a reader never sees half of one). Parley itself carries no
benchmark code: this wrapper is the only difference.
"""

import os
import signal
import sys
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from daphne.cli import CommandLineInterface


def dump(signum, frame):
    path = os.environ["BENCH_TRACE_SNAPSHOT"]
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    snapshot.dump(path + ".part")
    os.replace(path + ".part", path)


def start(signum, frame):
    tracemalloc.start(int(os.environ.get("BENCH_TRACE_FRAMES", "25")))


signal.signal(signal.SIGUSR1, dump)
signal.signal(signal.SIGUSR2, start)

if __name__ == "__main__":
    CommandLineInterface.entrypoint()
