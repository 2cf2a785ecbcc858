"""An outside agent's sessions count among its person's limits: past
PARLEY_MAX_MCP_SESSIONS_PER_PERSON open sessions, or PARLEY_TURN_RATE (opening a session starts
a turn), the initialize is answered 429 with Retry-After; an ended session frees its place."""

import asyncio

import httpx

from conversations.models import Conversation
from selection.models import Selection
from tests.helpers import pending_question, reply_to, samples
from tests.mcp_client import ACCEPT, INITIALIZE, mcp_session, open_raw_session


async def _initialize(http):
    return await http.post("/mcp/", json=INITIALIZE)


def _client(server, person) -> httpx.AsyncClient:
    headers = {"Accept": ACCEPT, "Authorization": f"Bearer {person.token}"}
    return httpx.AsyncClient(base_url=server.url, headers=headers, timeout=20)


async def test_sessions_past_the_limit_or_the_rate_are_refused_with_429(make_server, people):
    server = make_server(PARLEY_MAX_MCP_SESSIONS_PER_PERSON="2", PARLEY_TURN_RATE="3/hour")
    async with _client(server, people.bob) as http:
        first = await open_raw_session(http)
        await open_raw_session(http)
        refused = await _initialize(http)
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "5"
        assert refused.json() == {
            "error": {
                "code": "too_many_sessions",
                "message": "You have 2 MCP sessions open, as many as you may; end one "
                "(DELETE) first.",
                "retry_after": 5,
            }
        }
        # The open sessions still answer.
        listed = await http.post(
            "/mcp/",
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers=first,
        )
        assert listed.status_code == 200
        # Another person is not held back.
        async with _client(server, people.alice) as alice:
            assert (await _initialize(alice)).status_code == 200
        # Ending one frees its place: the third session of the hour opens.
        assert (await http.delete("/mcp/", headers=first)).status_code == 200
        async with asyncio.timeout(30):
            while True:
                opened = await _initialize(http)
                if opened.status_code == 200:
                    break
                assert opened.json()["error"]["code"] == "too_many_sessions"
                await asyncio.sleep(0.05)
        # A fourth opening in the hour is past the turn rate, whatever is open.
        closing = {"mcp-session-id": opened.headers["mcp-session-id"]}
        assert (await http.delete("/mcp/", headers=closing)).status_code == 200
        async with asyncio.timeout(30):
            while True:
                refused = await _initialize(http)
                if refused.json()["error"]["code"] == "throttled":
                    break
                await asyncio.sleep(0.05)
        assert refused.status_code == 429
        assert 3000 < int(refused.headers["retry-after"]) <= 3600
        assert "You have started too many turns" in refused.json()["error"]["message"]
        metrics = samples((await http.get("/metrics")).text)
    assert metrics[("parley_limit_refusals_total", (("limit", "mcp_sessions"),))] >= 1
    assert metrics[("parley_limit_refusals_total", (("limit", "turns"),))] >= 1


async def test_a_session_past_the_conversation_or_question_rate_asks_and_creates_nothing(
    make_server, people
):
    server = make_server(PARLEY_CONVERSATION_RATE="1/hour", PARLEY_QUESTION_RATE="1/hour")
    async with mcp_session(server.url, people.bob.token) as mcp:
        # The first session creates its conversation, and asks its one question of the hour.
        posted = await mcp.call_tool("post", {"text": "Starting."})
        assert not posted.isError, posted
        async with server.async_client(people.alice) as rest:
            asking = asyncio.create_task(mcp.call_tool("ask", {"kind": "text", "prompt": "A?"}))
            await reply_to(rest, await pending_question(rest), answer="yes")
            assert (await asyncio.wait_for(asking, 30)).structuredContent["answer"] == "yes"
            again = await mcp.call_tool("ask", {"kind": "text", "prompt": "B?"})
            assert again.structuredContent["status"] == "rate_limited"
            assert "too many questions" in again.content[0].text
    async with mcp_session(server.url, people.bob.token) as mcp:
        refused = await mcp.call_tool("post", {"text": "Another conversation"})
        assert refused.isError and "too many" in refused.content[0].text, refused
    assert await Conversation.objects.acount() == 1
    assert await Selection.objects.acount() == 1
