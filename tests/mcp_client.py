"""An outside agent for the tests: the official ``mcp`` client over real HTTP."""

import contextlib
from datetime import timedelta

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


@contextlib.asynccontextmanager
async def mcp_session(url: str, token: str, *, name: str = "test-agent", scheme: str = "Bearer"):
    """An initialized MCP session with Parley at ``url`` (a LiveServer's), as ``token``."""
    headers = {"Authorization": f"{scheme} {token}"}
    timeout = httpx.Timeout(30, read=300)
    async with httpx.AsyncClient(headers=headers, timeout=timeout) as http:
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
