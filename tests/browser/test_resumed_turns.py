"""Turns resumed by another process, in a real Chromium: the marker where the turn was taken
over, a message that goes on after it, and a server stopping (its sockets closed with 1012) met
by reconnecting at once."""

import re

import pytest
from playwright.sync_api import expect

from conversations.models import Turn
from tests.browser.conftest import screenshot
from tests.helpers import message_events, started, store, stored_turn

pytestmark = pytest.mark.browser


def resumed(reason: str, process: str = "web-2:88:bb", previous: str = "") -> tuple[str, dict]:
    return ("turn.resumed", {"process": process, "previous": previous, "reason": reason})


def body_of(page, turn: Turn):
    return page.locator(f'.turn[data-turn="{turn.pk}"] .turn-body')


def entries(page, turn: Turn) -> list[str]:
    """What the turn's body shows, in order: "agent: <its text>", "resumed: <reason>", …"""
    return body_of(page, turn).evaluate(
        """(body) => [...body.children].map((entry) =>
          entry.classList.contains("entry-resumed")
            ? `resumed: ${entry.dataset.reason}`
            : entry.classList.contains("entry-agent")
              ? `agent: ${entry.querySelector(".markdown").textContent.trim()}`
              : entry.className)"""
    )


def test_a_resumed_turn_shows_its_marker_in_place_and_the_message_going_on(
    browsing, conversation, people
):
    alice = people.alice.user
    turn = stored_turn(conversation, alice, "summarize reports/q4-plan.md")
    whole = "Looking at **q4-plan.md**: it has 10 lines and 3 headings."
    store(
        turn,
        [
            started(turn),
            ("message.delta", {"text": "Looking at **q4-plan.md**: "}),
            ("message.delta", {"text": "it has 10 lines"}),
            resumed("process_stopped", previous="web-1:77:aa"),
            ("message.delta", {"text": " and 3 headings."}),
            ("message.completed", {"text": whole}),
            ("turn.completed", {}),
        ],
    )
    # One turn for each other reason, each resumed between two messages.
    others = {
        "handed_back": "Resumed after the server restarted",
        "question_settled": "Carried on",  # no outcome stored before it: none is made up
        "restart": "Resumed after a restart",
    }
    later = []
    for reason in others:
        other = stored_turn(conversation, alice, f"go on ({reason})")
        store(
            other,
            [
                started(other),
                *message_events("Before."),
                resumed(reason),
                *message_events("After."),
                ("turn.completed", {}),
            ],
        )
        later.append(other)

    page = browsing.conversation("alice", conversation.pk)
    expect(page.locator(".turn-end")).to_have_count(4)
    marker = body_of(page, turn).locator(".entry-resumed")
    expect(marker).to_have_text(re.compile(r"^Resumed after its server stopped"))
    expect(marker.locator(".icon-retry")).to_have_count(1)  # drawn: no glyph font needed
    expect(marker).to_have_attribute("title", "Taken over by web-2:88:bb from web-1:77:aa")
    expect(marker).to_have_attribute("data-reason", "process_stopped")
    expect(marker).not_to_contain_text("web-")  # the processes stay in the tooltip
    assert entries(page, turn) == [
        "agent: Looking at q4-plan.md: it has 10 lines",
        "resumed: process_stopped",
        "agent: and 3 headings.",
    ]
    # The text before the marker is Markdown still, and nothing is shown twice or streaming.
    expect(body_of(page, turn).locator(".entry-agent strong")).to_have_text("q4-plan.md")
    assert page.locator("#transcript").inner_text().count("10 lines") == 1
    expect(page.locator(".streaming")).to_have_count(0)
    for other, words in zip(later, others.values(), strict=True):
        expect(body_of(page, other).locator(".entry-resumed")).to_contain_text(words)
        expect(body_of(page, other).locator(".entry-agent .markdown")).to_have_text(
            ["Before.", "After."]
        )
    expect(page.locator(".turn-end").first).to_have_text("Completed")
    marker.scroll_into_view_if_needed()
    screenshot(page, "resumed-turn")


def test_a_page_reconnects_at_once_when_its_server_stops_and_the_message_goes_on(
    browsing, conversation, people, make_server, proxy
):
    browsing.allow_network_noise = True
    turn = stored_turn(conversation, people.alice.user, "write it up")
    store(turn, [started(turn), ("message.delta", {"text": "The first half, "})])
    page = browsing.conversation("alice", conversation.pk, base_url=proxy.url)
    expect(body_of(page, turn).locator(".streaming .markdown")).to_have_text("The first half,")
    # What the turn's new process wrote while this page was still on the old one.
    store(
        turn,
        [
            resumed("handed_back", previous="web-1:77:aa"),
            ("message.delta", {"text": "and the second."}),
            ("message.completed", {"text": "The first half, and the second."}),
            ("turn.completed", {}),
        ],
    )
    page.evaluate(
        """() => {
          window.seenStates = [];
          new MutationObserver(() => window.seenStates.push(
            document.getElementById("connection").dataset.state,
          )).observe(document.getElementById("connection"), { attributes: true });
        }"""
    )
    before = page.evaluate("window.parleyStream.stats.connections")
    # Behind the balancer (the proxy) another process serves; the page's own gets SIGTERM and
    # closes its socket with 1012.
    other = make_server()
    proxy.target_port = other.port
    browsing.server.stop()
    page.wait_for_function("(before) => window.parleyStream.stats.connections > before", arg=before)
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    # No backoff: straight from live to connecting, never "reconnecting in N s".
    assert page.evaluate("window.seenStates") == ["connecting", "live"]
    expect(page.locator(".turn-end")).to_have_text("Completed")
    assert page.evaluate("window.parleyStream.stats.duplicates") == 0
    for _ in range(2):  # as it went on live, then as a reload shows it
        expect(body_of(page, turn).locator(".entry-agent .markdown")).to_have_text(
            ["The first half,", "and the second."]
        )
        expect(body_of(page, turn).locator(".entry-resumed")).to_contain_text(
            "Resumed after the server restarted"
        )
        assert entries(page, turn) == [
            "agent: The first half,",
            "resumed: handed_back",
            "agent: and the second.",
        ]
        expect(page.locator(".streaming")).to_have_count(0)
        page.reload()
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
