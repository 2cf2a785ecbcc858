"""`make cluster` from a clean folder: PostgreSQL, Redis, two Parley processes and HAProxy in
front of them ending TLS, printed with the one https address and the demo tokens; a
conversation shared through it; and all stopped by Ctrl-C."""

import asyncio
import os
import re
import shutil
import socket
import ssl
from pathlib import Path

import httpx
import pytest
import websockets

from tests.cluster.running import RunningCluster
from tests.conftest import receive_json
from tests.mcp_client import ACCEPT, open_raw_session, rpc_result

pytestmark = pytest.mark.cluster


@pytest.mark.timeout(300)
async def test_make_cluster_serves_everything_through_one_https_address_and_stops_on_ctrl_c(
    folder, request
):
    # The builtin agent at a pace a person reads: a turn lasts long enough to watch it stream.
    cluster = RunningCluster(folder, PARLEY_BUILTIN_PACE_MS="40")
    try:
        text = cluster.wait_ready()
        url, ca_file = cluster.url, cluster.ca_file
        assert url == f"https://localhost:{cluster.https_port}"
        for port in cluster.ports:
            assert f"Process:    127.0.0.1:{port} " in text
        trusted = ssl.create_default_context(cafile=ca_file)
        token = cluster.token("alice")
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(
            base_url=url, verify=trusted, headers=headers, timeout=20
        ) as client:
            created = await client.post(
                "/api/conversations/", json={"workspace": "demo", "title": "Across the cluster"}
            )
            assert created.status_code == 201, created.text
            cid = created.json()["id"]
            # Parley sees https (PARLEY_HTTPS, from ops/deploy/parley.env): HSTS on every answer.
            assert created.headers["strict-transport-security"].startswith("max-age=")
            # A socket, upgraded through the proxy, sees the turn live to its end.
            socket_url = f"wss://localhost:{cluster.https_port}/ws/conversations/{cid}/"
            async with websockets.connect(
                socket_url, additional_headers=headers, ssl=trusted, open_timeout=20
            ) as ws:
                assert (await receive_json(ws))["type"] == "ws.ready"
                started = await client.post(
                    f"/api/conversations/{cid}/turns/", json={"input": "summarize README.md"}
                )
                assert started.status_code == 202
                seen = []
                while not seen or seen[-1]["type"] != "turn.completed":
                    frame = await receive_json(ws, timeout=60)
                    if "seq" in frame:
                        seen.append(frame)
            # A tail through the proxy is not buffered: its first frames arrive while the turn
            # still runs, then the rest, then done.
            started = await client.post(
                f"/api/conversations/{cid}/turns/", json={"input": "summarize README.md"}
            )
            assert started.status_code == 202
            after = seen[-1]["seq"]
            path = f"/api/conversations/{cid}/tail/"
            ids = []
            async with client.stream("GET", path, params={"from_seq": after}) as tail:
                assert tail.headers["content-type"].startswith("text/event-stream")
                async for line in tail.aiter_lines():
                    if line.startswith("id: "):
                        ids.append(int(line[4:]))
                    if len(ids) == 1:
                        state = await client.get(f"/api/conversations/{cid}/in-flight/")
                        assert state.json()["in_flight"], "the tail's first frame came late"
            stored = (await client.get(f"/api/conversations/{cid}/events/")).json()["events"]
            assert ids[:-1] == [e["seq"] for e in stored if e["seq"] > after]
            assert stored[-1]["type"] == "turn.completed" and ids[-1] == stored[-1]["seq"]
            # An MCP session's requests all reach the process that holds it, each on a new
            # connection as a client may send them (without the proxy's stick table, balanced
            # over two processes, some would be answered 404).
            mcp_headers = {**headers, "Accept": ACCEPT}
            async with httpx.AsyncClient(
                base_url=url, verify=trusted, headers=mcp_headers, timeout=20
            ) as opening:
                session = await open_raw_session(opening)
            for number in range(8):
                async with httpx.AsyncClient(
                    base_url=url, verify=trusted, headers=mcp_headers, timeout=20
                ) as fresh:
                    listed = await fresh.post(
                        "/mcp/",
                        json={"jsonrpc": "2.0", "id": number + 2, "method": "tools/list"},
                        headers=session,
                    )
                assert rpc_result(listed)["tools"]
            # The operator's endpoint is not served through the proxy, however it is written.
            assert (await client.get("/metrics")).status_code == 404
            assert (await client.get("/%6Detrics")).status_code == 404
        # Plain http is redirected to https.
        plain = await asyncio.to_thread(
            httpx.get, f"http://127.0.0.1:{cluster.http_port}/api/workspaces/"
        )
        assert plain.status_code == 301
        assert plain.headers["location"].startswith("https://")
        # Without the local authority, the certificate is not trusted.
        with pytest.raises(httpx.ConnectError):
            await asyncio.to_thread(httpx.get, f"{url}/healthz")
    finally:
        code = cluster.stop()
    assert code == 0, cluster.text
    moved = re.search(r"cannot reach .*; its data is in (\S+)", cluster.text)
    if folder.name == "private" and os.geteuid() == 0:
        # As root, PostgreSQL runs as nobody, who cannot pass through a private folder.
        data = Path(moved.group(1))
        request.addfinalizer(lambda: shutil.rmtree(data, ignore_errors=True))
    else:
        assert moved is None, cluster.text
        data = folder
    assert (data / "postgres" / "PG_VERSION").exists()
    assert not (data / "postgres" / "postmaster.pid").exists()
    for port in [*cluster.ports, cluster.https_port, cluster.http_port]:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()


@pytest.fixture
def folder(tmp_path):
    """The cluster's folder, inside a private one (as a checkout in root's home is: pytest's own
    folders are for their owner only). test_deploy.py's cluster runs in one anyone may pass
    through."""
    return tmp_path / "private"
