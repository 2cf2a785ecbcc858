"""`make cluster` from a clean folder: PostgreSQL, Redis and two Parley processes that share one
conversation, printed with the demo tokens, and all stopped by Ctrl-C."""

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest

from ops.servers import free_port
from tests.conftest import ROOT

pytestmark = pytest.mark.cluster


@pytest.mark.timeout(300)
def test_make_cluster_starts_two_processes_that_share_everything_and_stops_on_ctrl_c(
    folder, request
):
    ports = [free_port(), free_port()]
    env = {
        key: value
        for key, value in os.environ.items()
        # The pass's PgBouncer is not the cluster's database.
        if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "PARLEY_DB_PGBOUNCER")
    }
    env.update(PARLEY_CLUSTER_DIR=str(folder), PARLEY_CLUSTER_PORTS=f"{ports[0]},{ports[1]}")
    cluster = subprocess.Popen(
        [sys.executable, "-m", "ops.cluster"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(
        target=lambda: [lines.put(line) for line in cluster.stdout], daemon=True
    ).start()
    output = []
    try:
        deadline = time.monotonic() + 180
        while not output or "Cluster ready" not in output[-1]:
            assert cluster.poll() is None, "".join(output) + "".join(lines.queue)
            assert time.monotonic() < deadline, "".join(output)
            try:
                output.append(lines.get(timeout=1))
            except queue.Empty:
                continue
        text = "".join(output)
        for port in ports:
            assert f"http://127.0.0.1:{port}/" in text
        token = re.search(r"alice .* token: (\S+)", text).group(1)
        a, b = (
            httpx.Client(
                base_url=f"http://127.0.0.1:{port}",
                headers={"Authorization": f"Token {token}"},
                timeout=20,
            )
            for port in ports
        )
        wait_ready(a), wait_ready(b)
        created = a.post(
            "/api/conversations/", json={"workspace": "demo", "title": "Across the cluster"}
        )
        assert created.status_code == 201, created.text
        cid = created.json()["id"]
        assert b.post(f"/api/conversations/{cid}/turns/", json={"input": "list"}).status_code == 202
        deadline = time.monotonic() + 60
        while a.get(f"/api/conversations/{cid}/in-flight/").json()["in_flight"]:
            assert time.monotonic() < deadline, "the turn did not finish"
            time.sleep(0.1)
        events = a.get(f"/api/conversations/{cid}/events/").json()["events"]
        assert events[-1]["type"] == "turn.completed"
    finally:
        cluster.send_signal(signal.SIGINT)
        code = cluster.wait(timeout=90)
    assert code == 0, "".join(output)
    moved = re.search(r"cannot reach .*; its data is in (\S+)", "".join(output))
    if folder.name == "private" and os.geteuid() == 0:
        # As root, PostgreSQL runs as nobody, who cannot pass through a private folder.
        data = Path(moved.group(1))
        request.addfinalizer(lambda: shutil.rmtree(data, ignore_errors=True))
    else:
        assert moved is None, "".join(output)
        data = folder
    assert (data / "postgres" / "PG_VERSION").exists()
    assert not (data / "postgres" / "postmaster.pid").exists()
    for port in ports:
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)


@pytest.fixture(params=["shared", "private"])
def folder(request, tmp_path):
    """The cluster's folder: one anyone may pass through, or one inside a private folder (as a
    checkout in root's home is)."""
    if request.param == "private":
        return tmp_path / "private"  # pytest's own folders are for their owner only
    parent = Path(tempfile.mkdtemp(prefix="parley-cluster-"))
    parent.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(parent, ignore_errors=True))
    return parent / "shared"


def wait_ready(client: httpx.Client, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if client.get("/readyz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"{client.base_url} never became ready"
        time.sleep(0.1)
