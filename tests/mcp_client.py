"""An outside agent for the tests: the official ``mcp`` client over real HTTP."""

import contextlib
from datetime import timedelta

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


@contextlib.asynccontextmanager
async def mcp_session(
    url: str, token: str, *, name: str = "test-agent", scheme: str = "Bearer", verify=True
):
    """An initialized MCP session with Parley at ``url`` (a LiveServer's, or a proxy's, whose
    authority ``verify`` trusts), as ``token``."""
    headers = {"Authorization": f"{scheme} {token}"}
    timeout = httpx.Timeout(30, read=300)
    async with httpx.AsyncClient(headers=headers, timeout=timeout, verify=verify) as http:
        async with streamable_http_client(f"{url}/mcp/", http_client=http) as (read, write, _):
            info = {"name": name, "version": "1.0"}
            async with ClientSession(
                read,
                write,
                client_info=_implementation(info),
                read_timeout_seconds=timedelta(seconds=120),
            ) as session:
                await session.initialize()
                yield session


def _implementation(info):
    from mcp import types

    return types.Implementation(**info)


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "plain-http", "version": "1"},
    },
}
ACCEPT = "application/json, text/event-stream"


async def open_raw_session(http) -> dict:
    """Initialize a session by hand over ``http`` (an httpx.AsyncClient carrying the token and
    ``Accept``): the headers its later requests need. For a client that vanishes or whose
    server goes away, which the SDK's client does not let a test do."""
    opened = await http.post("/mcp/", json=INITIALIZE)
    assert opened.status_code == 200, opened.text
    headers = {
        "mcp-session-id": opened.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-11-25",
    }
    notified = await http.post(
        "/mcp/", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
    )
    assert notified.status_code == 202, notified.text
    return headers


def tool_call(request_id: int, name: str, arguments: dict, **params) -> dict:
    """A JSON-RPC ``tools/call`` request, for raw HTTP (``params``: e.g. ``task={"ttl": ms}``)."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, **params},
    }


def rpc_result(response) -> dict:
    """The JSON-RPC result in a response sent as JSON or as a stream of Server-Sent Events."""
    import json

    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("application/json"):
        return response.json()["result"]
    for line in response.text.splitlines():
        if line.startswith("data:") and '"result"' in line:
            return json.loads(line.removeprefix("data:"))["result"]
    raise AssertionError(f"no result in {response.text!r}")
