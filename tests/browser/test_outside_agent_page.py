"""An outside agent's question, asked through MCP, answered by a person in a real Chromium."""

import asyncio
import re
import threading

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import screenshot
from tests.helpers import CHOICE
from tests.mcp_client import mcp_session

pytestmark = pytest.mark.browser


def test_bob_answers_an_outside_agents_question_in_the_page(browsing, conversation, people):
    done = {}

    async def outside_agent():
        async with mcp_session(browsing.server.url, people.alice.token, name="Claude Code") as mcp:
            where = {"conversation": conversation.pk}
            await mcp.call_tool("post", {"text": "I need a hand with the database.", **where})
            done["result"] = await mcp.call_tool("ask", {**CHOICE, **where})

    agent = threading.Thread(target=asyncio.run, args=(outside_agent(),))
    agent.start()
    bob = browsing.conversation("bob", conversation.pk)
    expect(bob.locator(".entry-agent").last).to_contain_text("I need a hand with the database.")
    card = bob.locator(".question").last
    expect(card).to_contain_text("Which database?")
    # Nobody typed the turn's start: it is a quiet line saying whose agent began, not a message.
    expect(bob.locator(".entry-input")).to_have_count(0)
    expect(bob.locator(".entry-outside-agent")).to_contain_text(
        "Alice's outside agent (Claude Code) started working here through MCP"
    )
    # The ask's row reads as words, the options by their labels; opened, each argument whole.
    ask = bob.locator("details.tool[data-tool='ask']")
    expect(ask.locator(".tool-args")).to_have_text(
        "kind: choice · prompt: Which database? · options: SQLite, PostgreSQL"
    )
    ask.locator("summary").click()
    expect(ask.locator(".tool-arg-list dt")).to_have_text(["kind", "prompt", "options"])
    expect(ask.locator(".tool-arg-list dd").last).to_contain_text(
        '"description": "The `postgres` one"'
    )
    screenshot(bob, "outside-agent-asks")
    card.get_by_role("button", name=re.compile("^PostgreSQL")).click()
    expect(card.locator(".question-outcome")).to_have_text("Answered by Bob: PostgreSQL")
    agent.join(timeout=60)
    assert not agent.is_alive()
    assert done["result"].structuredContent["answer"] == "pg"
    assert done["result"].structuredContent["answered_by"] == "bob"
    # The session ended with the agent: so did its turn.
    expect(bob.locator(".turn-end").last).to_have_text("Completed")
    expect(bob.get_by_role("button", name="Send")).to_be_visible()
