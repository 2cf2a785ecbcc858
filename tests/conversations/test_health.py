"""Liveness, readiness and metrics as the load balancer and Prometheus see them, from real
Daphnes; and a server that binds its loop (and runs its upkeep) before anyone connects."""

import asyncio
import os
import signal
import time
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from conversations.models import Turn
from ops.servers import Redis, free_port
from tests.conftest import LiveServer, receive_json, wait_for_turn_end
from tests.helpers import samples

STATUSES = ["queued", "running", "awaiting_input", "completed", "failed", "cancelled"]


async def metrics_until(client: httpx.AsyncClient, name: str, labels: dict, value: float):
    """Scrape /metrics until a sample has the value; returns that page's samples."""
    key = (name, tuple(sorted(labels.items())))
    seen = None
    for _ in range(200):
        response = await client.get("/metrics")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        page = samples(response.text)
        seen = page.get(key)
        if seen == value:
            return page
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name}{labels} stayed {seen}, never {value}")


def test_liveness_and_readiness_of_a_healthy_server(server):
    with server.client() as client:  # no credentials: the load balancer has none
        live = client.get("/healthz")
        assert live.status_code == 200 and live.json() == {"status": "ok"}
        ready = client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {
            "status": "ready",
            "checks": {"database": "ok", "channel_layer": "ok"},
        }
        assert "no-cache" in ready.headers["cache-control"]


def test_readiness_names_the_channel_layer_when_redis_is_away(transactional_db, tmp_path):
    # Not through make_server: with its Redis away the server rightly logs errors.
    live = LiveServer(tmp_path / "daphne.log", {"REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"})
    try:
        with live.client() as client:
            assert client.get("/healthz").status_code == 200  # alive, only not ready
            ready = client.get("/readyz")
        assert ready.status_code == 503, ready.text
        body = ready.json()
        assert body["status"] == "unavailable"
        assert body["checks"]["database"] == "ok"
        assert body["checks"]["channel_layer"].startswith("ConnectionError: "), body
    finally:
        live.stop()


def test_a_failing_check_is_tolerated_for_a_while_then_makes_the_process_unready(
    transactional_db, tmp_path
):
    """Once its checks have passed, a process whose shared dependency fails (its Redis stopped
    here) stays ready, "degraded", for PARLEY_READY_TOLERANCE_SECONDS of failed checks (a
    restart or a failover fails every process at once), then is not ready; a process whose
    checks never passed is not ready at once (a wrong address must never be sent work)."""
    redis = Redis(tmp_path / "redis").start()
    # Not through make_server: with its Redis away the server rightly logs errors.
    live = LiveServer(
        tmp_path / "daphne.log", {"REDIS_URL": redis.url, "PARLEY_READY_TOLERANCE_SECONDS": "3"}
    )
    never = LiveServer(
        tmp_path / "never.log",
        {
            "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
            "PARLEY_READY_TOLERANCE_SECONDS": "3",
        },
    )
    try:
        with never.client() as client:
            refused = client.get("/readyz")
        assert refused.status_code == 503 and refused.json()["status"] == "unavailable"
        with live.client() as client:
            assert client.get("/readyz").json()["status"] == "ready"
            redis.stop()
            began = time.monotonic()
            first = client.get("/readyz")
            assert first.status_code == 200, first.text
            assert first.json()["status"] == "degraded"
            assert first.json()["checks"]["channel_layer"].startswith("ConnectionError: ")
            while (ready := client.get("/readyz")).status_code == 200:
                assert ready.json()["status"] == "degraded"
                assert time.monotonic() < began + 30, "still ready long after the tolerance"
                time.sleep(0.2)
        assert ready.status_code == 503 and ready.json()["status"] == "unavailable"
        assert time.monotonic() - began >= 3  # not before the tolerance had passed
    finally:
        live.stop()
        never.stop()
        redis.stop()


@pytest.mark.cluster  # run in the PostgreSQL pass, where the run has a Redis
def test_readiness_pings_redis_when_the_layer_is_on_redis(make_server):
    live = make_server(REDIS_URL=os.environ["PARLEY_TEST_REDIS_URL"])
    with live.client() as client:
        ready = client.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json()["checks"] == {"database": "ok", "channel_layer": "ok"}


def test_sigterm_turns_readiness_false_then_the_server_stops(make_server):
    live = make_server(PARLEY_SHUTDOWN_GRACE_SECONDS="5")
    with live.client() as client:
        assert client.get("/readyz").status_code == 200
        live.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 4
        while (ready := client.get("/readyz")).status_code == 200:
            assert time.monotonic() < deadline, "still ready after SIGTERM"
            time.sleep(0.05)
        # Draining: not ready, but alive and still serving.
        assert ready.status_code == 503 and ready.json()["status"] == "shutting_down"
        assert client.get("/healthz").status_code == 200
        assert client.get("/api/workspaces/").status_code == 401
    assert live.process.wait(timeout=20) == 0
    # A server says so (a command that ran turns of its own, such as seed_demo, does not).
    assert "Shutting down: no longer ready for new connections" in live.log_text()


def test_sigterm_ends_tails_cleanly_so_that_they_reconnect_elsewhere(
    make_server, people, flood_conversation
):
    """A tail on a stopping process ends after its last whole frame, with a comment and no
    ``done`` (the turn goes on elsewhere), long before the process stops: its client sees a
    finished response, not a connection cut off, and reconnects with Last-Event-ID."""
    live = make_server(PARLEY_SHUTDOWN_GRACE_SECONDS="30")
    cid = flood_conversation.pk
    lines, signalled = [], None
    with live.client(people.alice) as client:
        started = client.post(f"/api/conversations/{cid}/turns/", json={"input": "5000 every 5"})
        assert started.status_code == 202, started.text
        path = f"/api/conversations/{cid}/tail/"
        with client.stream("GET", path, params={"from_seq": 0}, timeout=60) as response:
            assert response.status_code == 200
            for line in response.iter_lines():  # raises if the connection is cut off
                lines.append(line)
                if signalled is None and line == "id: 20":
                    live.process.send_signal(signal.SIGTERM)
                    signalled = time.monotonic()
        # Ended while the process still serves (its grace is 30 s), not by its stopping.
        assert live.process.poll() is None
        assert client.get("/healthz").status_code == 200
    assert signalled is not None
    assert lines[-2:] == [": restarting: reconnect with Last-Event-ID", ""]
    assert "event: done" not in lines
    ids = [int(line.removeprefix("id: ")) for line in lines if line.startswith("id: ")]
    assert ids == list(range(1, len(ids) + 1)) and len(ids) >= 20
    live.process.send_signal(signal.SIGTERM)  # a second SIGTERM stops it at once
    assert live.process.wait(timeout=20) == 0


async def test_metrics_count_sockets_turns_and_questions(server, people, conversation):
    cid = conversation.pk
    async with server.async_client(people.alice) as client:
        page = await metrics_until(client, "parley_sockets_open", {}, 0)
        for status in STATUSES:
            assert ("parley_turns", (("status", status),)) in page
        for name in (
            "parley_questions_pending",
            "parley_turns_running",
            "parley_events_written_total",
            "parley_event_commit_seconds_count",
        ):
            assert (name, ()) in page, name

        async with server.connect(cid, people.alice) as ws:
            assert (await receive_json(ws))["type"] == "ws.ready"
            await metrics_until(client, "parley_sockets_open", {}, 1)
        await metrics_until(client, "parley_sockets_open", {}, 0)

        started = await client.post(f"/api/conversations/{cid}/turns/", json={"input": "help"})
        assert started.status_code == 202, started.text
        with server.client(people.alice) as waiting:
            wait_for_turn_end(waiting, cid)
        await metrics_until(client, "parley_turns", {"status": "completed"}, 1)

        # "summarize" with no path asks which file: a question waits for an answer.
        asking = await client.post(f"/api/conversations/{cid}/turns/", json={"input": "summarize"})
        page = await metrics_until(client, "parley_questions_pending", {}, 1)
        assert page[("parley_turns", (("status", "awaiting_input"),))] == 1
        stop = await client.post(
            f"/api/conversations/{cid}/cancel/", json={"turn_id": asking.json()["turn"]}
        )
        assert stop.status_code == 202, stop.text
        page = await metrics_until(client, "parley_turns", {"status": "cancelled"}, 1)
        assert page[("parley_questions_pending", ())] == 0


def test_upkeep_starts_with_the_server_before_anyone_connects(
    transactional_db, tmp_path, people, conversation
):
    """A turn left running by a server that stopped is taken over (and resumed) by the next
    one as soon as it starts."""
    left = Turn.objects.create(
        conversation=conversation,
        input="help",
        started_by=people.alice.user,
        status=Turn.Status.RUNNING,
        runner="gone:1",
        lease_expires_at=timezone.now() + timedelta(seconds=60),
    )
    live = UntouchedServer(tmp_path / "daphne.log")
    try:
        deadline = time.monotonic() + 20
        while (status := Turn.objects.get(pk=left.pk).status) != Turn.Status.COMPLETED:
            assert live.process.poll() is None, live.log_text()
            assert time.monotonic() < deadline, f"turn still {status}:\n{live.log_text()}"
            time.sleep(0.05)
        resumed = left.events.get(type="turn.resumed").data
        assert resumed["previous"] == "gone:1" and resumed["reason"] == "restart"
    finally:
        live.stop()
    assert " ERROR " not in live.log_text()


class UntouchedServer(LiveServer):
    """A Daphne that nobody sends a request to (a request would bind its loop)."""

    def _wait_ready(self, timeout: float = 20) -> None:
        pass
