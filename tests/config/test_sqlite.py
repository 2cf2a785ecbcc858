"""The SQLite backend's writer lock: write transactions take turns in the order they asked."""

import threading
import time

import pytest
from django.db import connection, transaction

from config.sqlite.base import _FairLock
from conversations.models import Workspace

pytestmark = pytest.mark.sqlite


def wait_until(condition, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_waiters_get_the_lock_in_the_order_they_came():
    lock = _FairLock()
    assert lock.acquire(timeout=1)
    order, threads = [], []

    def wait_for_it(number):
        assert lock.acquire(timeout=5)
        order.append(number)
        lock.release()

    for number in range(6):
        thread = threading.Thread(target=wait_for_it, args=(number,))
        thread.start()
        threads.append(thread)
        wait_until(lambda n=number: len(lock._waiters) == n + 1)
    lock.release()
    for thread in threads:
        thread.join(timeout=5)
    assert order == list(range(6))
    assert lock.acquire(timeout=0.1)  # free again


def test_a_waiter_that_gives_up_leaves_the_queue():
    lock = _FairLock()
    assert lock.acquire(timeout=1)
    assert lock.acquire(timeout=0.05) is False
    assert len(lock._waiters) == 0
    lock.release()
    assert lock.acquire(timeout=0.1)


@pytest.mark.django_db(transaction=True)
def test_a_thread_that_keeps_writing_does_not_shut_the_others_out():
    """One thread commits write after write while another writes ten times: each of the other's
    writes waits for at most the one transaction that held the lock when it asked."""
    stop = threading.Event()
    busy_writes = []

    def busy():
        while not stop.is_set():
            with transaction.atomic():
                Workspace.objects.create(slug=f"busy-{len(busy_writes)}", name="busy")
                busy_writes.append(1)  # counted inside the transaction: before its commit
        connection.close()

    # The connection opened and a first write made before the busy thread starts: opening one
    # (its PRAGMAs) waits in SQLite's busy handler, which is not what is measured here.
    with transaction.atomic():
        Workspace.objects.create(slug="other-first", name="first")
    worker = threading.Thread(target=busy)
    worker.start()
    waited_behind = []
    try:
        wait_until(lambda: len(busy_writes) > 5)
        for number in range(10):
            asked = len(busy_writes)
            with transaction.atomic():
                Workspace.objects.create(slug=f"other-{number}", name="other")
                # The write above holds SQLite's write lock, with or without our turns.
                waited_behind.append(len(busy_writes) - asked)
    finally:
        stop.set()
        worker.join(timeout=10)
    assert Workspace.objects.filter(name="other").count() == 10
    # Taking turns: a busy transaction that held the lock when the other asked may finish, the
    # next one queues behind the other (under SQLite's busy handler alone the busy thread retook
    # the lock at once, again and again, while the other slept between tries).
    assert max(waited_behind) <= 1, waited_behind
    assert Workspace.objects.filter(name="busy").count() > 5
