"""bench/owners.py: whose code a profile's sample or an allocation is (the bench's summaries of
a missed aim rest on it)."""

import tracemalloc

from bench.owners import innermost_owner, memory_by_owner, owner, summarise_profile


def test_frames_are_owned_by_their_package_wherever_the_path_comes_from():
    assert owner("daphne/server.py") == "Daphne"
    assert owner("/x/.venv/lib/python3.11/site-packages/autobahn/websocket/protocol.py") == (
        "autobahn"
    )
    assert owner("twisted/internet/defer.py") == "Twisted"
    assert owner("conversations/consumers.py") == "Parley"
    assert owner("rest_framework/views.py") == "Django"
    assert owner("asyncio/queues.py") == "asyncio/stdlib"
    assert owner("<frozen runpy>") == "asyncio/stdlib"


def test_a_sample_belongs_to_its_innermost_frame_that_is_not_the_standard_library():
    # Daphne making an asyncio queue: Daphne's, not asyncio's.
    assert innermost_owner(["twisted/a.py", "daphne/server.py", "asyncio/queues.py"]) == "Daphne"
    assert innermost_owner(["asyncio/events.py", "json/encoder.py"]) == "asyncio/stdlib"


def test_a_raw_profile_is_summarised_by_owner_and_by_self_time(tmp_path):
    raw = tmp_path / "profile.txt"
    raw.write_text(
        "thread (1);run (daphne/server.py:10);get (asyncio/queues.py:5) 3\n"
        "thread (1);run (daphne/server.py:10);open (conversations/consumers.py:7) 1\n"
    )
    summary = summarise_profile([raw])
    assert summary["samples"] == 4
    assert summary["owners"] == {"Daphne": 0.75, "Parley": 0.25}
    assert summary["top"][0] == ["get (asyncio/queues.py:5)", 0.75]


def test_the_memory_a_socket_adds_is_given_per_owner():
    tracemalloc.start(5)
    try:
        before = tracemalloc.take_snapshot()
        kept = [bytearray(10_240) for _ in range(10)]  # this test module's: "other"
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    by_owner = memory_by_owner(before, after, sockets=10)
    assert len(kept) == 10
    assert 10 <= by_owner["other"] < 11
