"""Outside agents ask the team through Parley's MCP endpoint, with the official mcp client over
real HTTP against a real Daphne."""

import asyncio

import httpx

from tests.mcp_client import mcp_session


async def pending_question(rest: httpx.AsyncClient, timeout: float = 20) -> dict:
    async with asyncio.timeout(timeout):
        while True:
            found = (await rest.get("/api/selections/", params={"status": "pending"})).json()
            results = found["results"] if isinstance(found, dict) else found
            if results:
                return results[0]
            await asyncio.sleep(0.05)


async def test_an_outside_agent_asks_and_gets_the_answer_given_over_rest(server, people):
    async with (
        mcp_session(server.url, people.bob.token) as mcp,
        httpx.AsyncClient(base_url=server.url, headers=people.alice.headers) as rest,
    ):
        tools = await mcp.list_tools()
        assert {tool.name for tool in tools.tools} == {"ask", "post", "list_conversations", "pending"}
        asking = asyncio.create_task(
            mcp.call_tool(
                "ask",
                {
                    "kind": "choice",
                    "prompt": "Which database?",
                    "options": [{"label": "SQLite", "value": "sqlite"}, {"label": "PostgreSQL", "value": "pg"}],
                },
            )
        )
        question = await pending_question(rest)
        assert question["prompt"] == "Which database?"
        answered = await rest.post(f"/api/selections/{question['id']}/reply/", json={"answer": "pg"})
        assert answered.status_code == 200, answered.text
        result = await asyncio.wait_for(asking, 30)
    assert result.structuredContent["status"] == "answered"
    assert result.structuredContent["answer"] == "pg"
    assert result.structuredContent["answered_by"] == "alice"
