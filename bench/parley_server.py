"""Starts Parley's Daphne for the benchmark, noting when each batch of events is committed.

It wraps Hub.publish, which services call on commit, so the benchmark can measure commit ->
socket delay without instrumenting Parley itself. The notes are written at exit to the file
named by BENCH_COMMIT_LOG as [first_seq, last_seq, unix_time] rows.
"""

import atexit
import json
import os
import sys
import time

import django

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from daphne.cli import CommandLineInterface  # noqa: E402

from conversations.broadcast import Hub  # noqa: E402

commits: list = []
_publish = Hub.publish


def publish(self, conversation_id, frames):
    if frames:
        commits.append((conversation_id, frames[0].seq, frames[-1].seq, time.time()))
    _publish(self, conversation_id, frames)


def dump():
    with open(os.environ["BENCH_COMMIT_LOG"], "w") as out:
        json.dump(commits, out)


Hub.publish = publish
atexit.register(dump)

if __name__ == "__main__":
    CommandLineInterface.entrypoint()
