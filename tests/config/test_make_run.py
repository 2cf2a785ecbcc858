"""`make run` as a newcomer runs it, with email set up: the links in what it sends lead back to
it as they are (it sets PARLEY_PUBLIC_URL to its own address)."""

import os
import queue
import re
import signal
import subprocess
import threading
import time

import httpx
import pytest

from ops.servers import free_port
from tests.conftest import ROOT

# `make run` is Parley on SQLite whatever the pass: run in the SQLite pass, the shorter one now
# that the PostgreSQL pass holds the cluster's deploys.
pytestmark = pytest.mark.sqlite


@pytest.mark.timeout(300)
def test_make_run_sends_links_that_lead_back_to_itself(tmp_path, mailbox):
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "PARLEY_PUBLIC_URL")
        and not key.startswith("PARLEY_TEST")
    }
    env.update(
        PARLEY_VAR_DIR=str(tmp_path / "var"),
        PARLEY_FILES_ROOT=str(tmp_path / "var" / "files"),
        PARLEY_EMAIL_URL=mailbox.url,
    )
    run = subprocess.Popen(
        ["make", "--no-print-directory", "run", f"PORT={port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in run.stdout], daemon=True).start()
    output: list[str] = []
    try:
        deadline = time.monotonic() + 180
        while not any("Parley is at" in line for line in output):
            assert run.poll() is None, "".join(output)
            assert time.monotonic() < deadline, "".join(output)
            try:
                output.append(lines.get(timeout=1))
            except queue.Empty:
                continue
        token = re.search(r"alice .* token: (\S+)", "".join(output)).group(1)
        # The first run seeds the demo's conversations, one of them waiting for an answer. The
        # seeding ran turns in its own process, which served no one: it does not say it stops
        # serving.
        seeding = "".join(output)
        assert "seeded the conversation “Where is the budget mentioned?”" in seeding
        assert "ready for new connections" not in seeding, seeding
        alice = httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Token {token}"},
            timeout=20,
        )
        while True:
            try:
                alice.get("/healthz")
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "".join(output)
                time.sleep(0.1)
        # Alice hears of every question she may answer by email.
        chose = alice.put("/api/me/notifications/", json={"email": "all"})
        assert chose.status_code == 200, chose.text
        created = alice.post("/api/conversations/", json={"workspace": "demo", "title": "Links"})
        assert created.status_code == 201, created.text
        cid = created.json()["id"]
        started = alice.post(f"/api/conversations/{cid}/turns/", json={"input": "summarize"})
        assert started.status_code == 202, started.text
        (message,) = mailbox.wait_for(1, timeout=60)
        assert message["To"] == "alice@example.com"
        text = message.get_body(("plain",)).get_content()
        link = re.search(r"(\S+/answer/\S+)", text).group(1)
        assert link.startswith(f"http://127.0.0.1:{port}/answer/s_")
        page, _, token = link.partition("#k=")
        assert httpx.get(page, timeout=20).status_code == 200
        selection = page.rstrip("/").rsplit("/", 1)[1]
        shown = httpx.get(
            f"http://127.0.0.1:{port}/api/selections/{selection}/link/",
            headers={"X-Parley-Link": token},
            timeout=20,
        )
        assert shown.status_code == 200, shown.text
        assert shown.json()["conversation"]["title"] == "Links"
        assert shown.json()["me"]["username"] == "alice"
        alice.close()
    finally:
        # Stopped as a newcomer stops it (Ctrl-C reaches make and Daphne). How it stops is not
        # what this test is about: one that lingers (seen once, in a loaded full run, and not
        # since) is made to stop, not waited for.
        os.killpg(run.pid, signal.SIGINT)
        try:
            run.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(timeout=30)
