"""A conversation with a model, in a real Chromium: picked from the home page's Agent menu, named
in the page's header, its answer streamed after a retry the page shows as it happens, and the
tokens it used at the turn's end; the server's API key never reaches the page."""

import re

import pytest
from playwright.sync_api import expect

from conversations.models import Conversation
from tests import llm_server as llm
from tests.browser.conftest import screenshot
from tests.conftest import LLM_KEY as KEY

pytestmark = pytest.mark.browser


@pytest.fixture
def server(start_parley):
    """Parley with a model behind its openai agent (the browsing fixture's server)."""
    return start_parley(PARLEY_LLM_MODELS="gpt-other")


def test_a_conversation_with_another_model_streams_its_answer_after_a_retry_and_counts_tokens(
    browsing, model, people
):
    page = browsing.open("alice")
    agent = page.get_by_label("Agent", exact=True)
    expect(agent).to_have_value("builtin")  # the default agent, until someone picks another
    offered = agent.locator("option")
    expect(offered.filter(has_text="Builtin helper")).to_have_attribute("value", "builtin")
    expect(offered.filter(has_text="Model (gpt-test)")).to_have_attribute("value", "openai")
    expect(offered.filter(has_text="Model (gpt-other)")).to_have_attribute(
        "value", "openai:gpt-other"
    )
    page.get_by_label("New conversation").fill("Ask the other model")
    agent.select_option(label="Model (gpt-other)")
    screenshot(page, "new-conversation-with-a-model")
    page.get_by_role("button", name="Start a conversation").click()

    expect(page.get_by_role("heading", name="Ask the other model")).to_be_visible()
    expect(page.locator(".conversation-agent")).to_have_text("Agent: Model (gpt-other)")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    stored = Conversation.objects.get(title="Ask the other model")
    assert (stored.agent, stored.model) == ("openai", "gpt-other")

    answer = llm.gated(
        "Hello from ", llm.text("**the other model**, after a short wait.", usage=(1200, 34))
    )
    model.script(
        llm.rate_limited(),
        answer,
    )
    box = page.get_by_role("textbox", name="Message the agent")
    box.fill("Say hello")
    box.press("Enter")

    turn = page.locator(".turn").last
    notice = turn.locator(".turn-body .entry-notice")
    expect(notice).to_have_attribute("role", "status")
    expect(notice).to_have_attribute("data-kind", "retry")
    expect(notice).to_contain_text("answered 429 (too many requests); trying again in 1 s")
    # The first words stream in while the model still holds its reply open.
    streaming = turn.locator(".entry-agent.streaming .markdown")
    expect(streaming).to_have_text("Hello from")
    expect(page.locator("#turn-status")).to_have_text("The agent is working…")
    expect(turn.locator(".turn-end")).to_be_hidden()
    screenshot(page, "model-turn-streaming")
    answer.release()

    for _ in range(2):  # as it happened, then as a reload shows it from the event log
        expect(turn.locator(".turn-end")).to_have_text("Completed · 1,234 tokens")
        expect(turn.locator(".turn-end .turn-tokens")).to_have_attribute(
            "title", "1,200 prompt + 34 completion tokens"
        )
        expect(turn.locator(".entry-agent .markdown")).to_have_text(
            "Hello from the other model, after a short wait."
        )
        expect(turn.locator(".entry-agent strong")).to_have_text("the other model")
        expect(page.locator(".streaming")).to_have_count(0)
        # The notice where it happened: before the answer, once.
        order = turn.locator(".turn-body > *").evaluate_all(
            """(entries) => entries.map((entry) =>
              entry.classList.contains("entry-notice") ? "notice"
                : entry.classList.contains("entry-agent") ? "agent" : entry.className)"""
        )
        assert order == ["notice", "agent"]
        expect(turn.locator(".entry-notice")).to_contain_text(re.compile(r"attempt 2 of \d+"))
        page.reload()
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    expect(page.locator("#turn-status")).to_have_text("Completed")
    screenshot(page, "model-turn-completed")

    requests = model.wait_requests(2)
    assert len(requests) == 2  # the refused one, and the one tried again after the retry-after
    assert [request["model"] for request in requests] == ["gpt-other", "gpt-other"]
    assert requests[1]["messages"][-1] == {"role": "user", "content": "Say hello"}
    assert all(headers["authorization"] == f"Bearer {KEY}" for headers in model.headers)
    # The key goes to the model server and nowhere else: not into any page people see.
    assert KEY not in page.content()
    page.goto("/")
    expect(page.get_by_role("main").get_by_role("link", name="Ask the other model")).to_be_visible()
    assert KEY not in page.content()


def test_a_model_the_server_no_longer_offers_is_refused_with_the_reason(browsing, people):
    page = browsing.open("alice")
    page.get_by_label("New conversation").fill("Stale choice")
    # A page loaded before the server was set up with other models still offers the old one.
    page.get_by_label("Agent", exact=True).evaluate(
        """(menu) => {
          menu.querySelector('option[value="openai:gpt-other"]').value = "openai:gpt-gone";
          menu.value = "openai:gpt-gone";
        }"""
    )
    page.get_by_role("button", name="Start a conversation").click()
    expect(page.locator(".flash-error")).to_have_text(
        "model: the agent 'openai' offers no model 'gpt-gone'; it offers gpt-test, gpt-other."
    )
    expect(page.get_by_role("heading", name="Your workspaces")).to_be_visible()
    assert not Conversation.objects.filter(title="Stale choice").exists()
