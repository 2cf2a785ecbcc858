"""fastmcp's client (in .venv-clients) against a live Parley: a Bearer token, the tools, `post`,
a malformed `ask` (a ToolError) and an `ask` the test answers over REST. One JSON object a line.

    PARLEY_URL=… PARLEY_TOKEN=… .venv-clients/bin/python tests/clients/fastmcp_client.py
"""

import asyncio
import json
import os

from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp.exceptions import ToolError

URL = os.environ.get("PARLEY_URL", "http://127.0.0.1:8000") + "/mcp/"


def say(event: str, **fields) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


async def main() -> None:
    transport = StreamableHttpTransport(URL, auth=os.environ["PARLEY_TOKEN"])  # Bearer
    async with Client(transport, name="fastmcp", timeout=120) as client:
        tools = await client.list_tools()
        say("tools", tools=sorted(tool.name for tool in tools))
        posted = await client.call_tool("post", {"text": "Hello from fastmcp."})
        say("posted", result=posted.structured_content)
        try:
            await client.call_tool("ask", {"kind": "poll", "prompt": "?"})
        except ToolError as error:
            say("refused", error=str(error))
        asked = await client.call_tool("ask", {"kind": "text", "prompt": "Who reviews this?"})
        say("answered", result=asked.structured_content, data=asked.data)


asyncio.run(main())
