"""The official MCP Python SDK's current major (2.x, in .venv-clients) against a live Parley:
initialize, the tools, `post`, an `ask` waited for with progress while `pending` lists it, and
`pending` once it is answered (by the test, over REST). One JSON object a line.

    PARLEY_URL=… PARLEY_TOKEN=… .venv-clients/bin/python tests/clients/mcp2_client.py
"""

import asyncio
import json
import os

import httpx2
from mcp import ClientSession, Implementation
from mcp.client.streamable_http import streamable_http_client

URL = os.environ.get("PARLEY_URL", "http://127.0.0.1:8000") + "/mcp/"
HEADERS = {"Authorization": "Bearer " + os.environ["PARLEY_TOKEN"]}


def say(event: str, **fields) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


async def main() -> None:
    timeout = httpx2.Timeout(30, read=300)
    info = Implementation(name="mcp-python-2", version="1.0")
    async with (
        httpx2.AsyncClient(headers=HEADERS, timeout=timeout) as http,
        streamable_http_client(URL, http_client=http) as (read, write),
        ClientSession(read, write, read_timeout_seconds=120, client_info=info) as mcp,
    ):
        initialized = await mcp.initialize()
        say(
            "initialized",
            protocol_version=initialized.protocol_version,
            server=initialized.server_info.name,
        )
        tools = (await mcp.list_tools()).tools
        say(
            "tools",
            tools={
                tool.name: {
                    "required": tool.input_schema.get("required", []),
                    "task_support": tool.execution.task_support if tool.execution else None,
                }
                for tool in tools
            },
        )
        posted = await mcp.call_tool("post", {"text": "Hello from mcp 2."})
        say("posted", result=posted.structured_content, is_error=posted.is_error)

        heard = asyncio.Event()

        async def on_progress(progress, total, message):
            heard.set()

        question = {"kind": "choice", "prompt": "Which region?", "options": [{"label": "eu"}]}
        asking = asyncio.create_task(mcp.call_tool("ask", question, progress_callback=on_progress))
        await asyncio.wait_for(heard.wait(), 60)  # the question is asked, and waits
        pending = await mcp.call_tool("pending", {})
        say("waiting", pending=pending.structured_content["pending"])
        result = await asking
        say("answered", result=result.structured_content, text=result.content[0].text)
        pending = await mcp.call_tool("pending", {})
        say("pending", pending=pending.structured_content["pending"])


asyncio.run(main())
