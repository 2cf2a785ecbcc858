"""The conversation page in a real Chromium: questions answered in the page, several people
watching one turn, sockets cut mid-stream, reloads, Stop, viewers, and markup kept as text."""

import re

import httpx
import pytest
from playwright.sync_api import expect

from conversations import services
from conversations.agents.flood import markdown_answer
from tests.browser.conftest import PHONE, screenshot
from tests.conftest import all_events, wait_for_turn_end
from tests.helpers import send

pytestmark = pytest.mark.browser


def question(page):
    return page.locator(".question").last


@pytest.fixture
def flood(people):
    return services.conversation_create(
        workspace=people.workspace, user=people.alice.user, title="Fast", agent="flood"
    )


def test_alice_picks_a_file_in_the_path_picker_and_sees_the_summary_stream_in(
    browsing, conversation
):
    page = browsing.conversation("alice", conversation.pk)
    expect(page.locator("#transcript")).to_contain_text("Nothing here yet")
    send(page, "summarize")
    card = question(page)
    expect(card).to_contain_text("Which file should I summarize?")
    rows = card.locator(".picker-row")
    expect(rows).to_have_text(
        [re.compile(name) for name in ("data", "docs", "notes", "reports", "README.md")]
    )
    expect(page.locator("#turn-status")).to_have_text("The agent is waiting for an answer.")
    card.get_by_role("button", name="Open folder reports").click()
    expect(card.locator(".picker-crumbs [aria-current]")).to_have_text("reports")
    card.get_by_label("q4-plan.md").check()
    screenshot(page, "path-picker")
    card.get_by_role("button", name="Choose").click()
    expect(card.locator(".question-outcome")).to_have_text("Answered by Alice: reports/q4-plan.md")
    expect(card.get_by_role("button")).to_have_count(0)
    expect(page.locator(".turn-end")).to_have_text("Completed")
    reply = page.locator(".entry-agent .markdown").last
    expect(reply.locator("strong")).to_have_text("reports/q4-plan.md")
    expect(reply).to_contain_text("10 lines")
    tool = page.locator("details.tool").last
    expect(tool).to_have_attribute("data-state", "done")
    expect(tool.locator(".tool-args")).to_have_text("reports/q4-plan.md")
    tool.locator("summary").click()
    expect(tool.locator(".tool-arg-list dt")).to_have_text("path")
    expect(tool.locator(".tool-arg-list dd")).to_have_text("reports/q4-plan.md")
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    screenshot(page, "summary-streamed")


def test_bob_answers_and_alices_widget_shows_his_answer(browsing, conversation):
    alice = browsing.conversation("alice", conversation.pk)
    bob = browsing.conversation("bob", conversation.pk)
    expect(alice.locator("#presence")).to_contain_text("Bob")
    send(alice, "summarize")
    for page in (alice, bob):
        expect(question(page)).to_contain_text("Which file should I summarize?")
    bob_card = question(bob)
    bob_card.get_by_label("README.md").check()
    bob_card.get_by_role("button", name="Choose").click()
    for page in (alice, bob):
        expect(question(page).locator(".question-outcome")).to_have_text(
            "Answered by Bob: README.md"
        )
        expect(question(page).get_by_role("button")).to_have_count(0)
        expect(page.locator(".turn-end")).to_have_text("Completed")
        expect(page.locator(".entry-agent strong").last).to_have_text("README.md")
    screenshot(alice, "answered-by-bob")


def test_an_answer_that_lost_the_race_shows_the_winners_answer(
    browsing, conversation, people, proxy
):
    browsing.allow_network_noise = True
    # Alice's page goes through a proxy that lets her API calls through but holds back her
    # socket, so her widget is still open when Bob's answer has already won.
    alice = browsing.conversation("alice", conversation.pk, base_url=proxy.url)
    send(alice, "choose")
    card = question(alice)
    expect(card).to_contain_text("Which of these did you mean?")
    proxy.refuse_websockets = True
    proxy.cut_websockets()
    expect(alice.locator("#connection")).not_to_have_attribute("data-state", "live")
    with httpx.Client(base_url=browsing.server.url, headers=people.bob.headers) as bob:
        pending = bob.get(f"/api/selections/?conversation={conversation.pk}").json()
        won = bob.post(f"/api/selections/{pending[0]['id']}/reply/", json={"answer": "help"})
        assert won.status_code == 200
    card.get_by_role("button", name=re.compile("^List")).click()
    expect(card.locator(".question-outcome")).to_have_text("Answered by Bob: Help")
    expect(card.locator(".question-error")).to_be_hidden()
    proxy.refuse_websockets = False
    alice.locator("#connection").get_by_role("button", name="Reconnect now").click()
    expect(alice.locator("#connection")).to_have_attribute("data-state", "live")
    expect(alice.locator(".turn-end")).to_have_text("Completed")
    expect(alice.locator(".entry-agent").last).to_contain_text("Here is what I can do")


@pytest.mark.parametrize("how", ["cut by the network", "browser offline"])
def test_a_socket_lost_mid_stream_leaves_the_whole_text_exactly_once(
    browsing, flood, proxy, people, how
):
    browsing.allow_network_noise = True
    page = browsing.conversation("alice", flood.pk, base_url=proxy.url)
    words = 2500
    send(page, f"{words} text every 1")
    for seen in ("w200 ", "w900 ", "w1600 "):
        expect(page.locator(".entry-agent").last).to_contain_text(seen)
        connections = page.evaluate("window.parleyStream.stats.connections")
        if how == "browser offline":
            page.context.set_offline(True)
            page.wait_for_timeout(200)
            page.context.set_offline(False)
        else:
            # The conversation's socket, and the person's own (the header's count) if it is
            # back from the last cut.
            assert proxy.cut_websockets() >= 1
        page.wait_for_function(
            "(before) => window.parleyStream.stats.connections > before", arg=connections
        )
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    expect(page.locator(".turn-end")).to_have_text("Completed", timeout=40_000)
    expected = " ".join(f"w{n}" for n in range(1, words + 1))
    expect(page.locator(".entry-agent .markdown")).to_have_text(expected)
    assert page.locator(".entry-agent").count() == 1
    assert page.locator(".entry-input").count() == 1
    assert proxy.websocket_connections >= 4
    with httpx.Client(base_url=browsing.server.url, headers=people.alice.headers) as client:
        latest = wait_for_turn_end(client, flood.pk)["latest_seq"]
    expect(page.locator("body")).to_have_attribute("data-last-seq", str(latest))


def test_reloading_mid_turn_shows_the_same_transcript_and_goes_on_live(browsing, flood, people):
    page = browsing.conversation("alice", flood.pk)
    send(page, "4000 text every 2")
    expect(page.locator(".entry-agent").last).to_contain_text("w300 ")
    page.reload()
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    expect(page.locator(".entry-input")).to_have_text(re.compile("4000 text every 2"))
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    expect(page.locator(".turn-end")).to_have_text("Completed", timeout=60_000)
    expected = " ".join(f"w{n}" for n in range(1, 4001))
    expect(page.locator(".entry-agent .markdown")).to_have_text(expected)
    assert page.locator(".entry-agent").count() == 1


def test_stop_while_a_question_is_pending(browsing, conversation, people):
    page = browsing.conversation("alice", conversation.pk)
    send(page, "rename")
    card = question(page)
    expect(card).to_contain_text("Which file should I rename?")
    expect(page.get_by_role("button", name="Steer")).to_be_visible()
    page.get_by_role("button", name="Stop").click()
    expect(card.locator(".question-outcome")).to_have_text("Cancelled")
    expect(page.locator(".turn-end")).to_have_text("Stopped by Alice")
    expect(page.locator("#turn-status")).to_have_text("Stopped by Alice")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    screenshot(page, "stopped-while-asking")


def test_steering_a_running_turn_from_the_composer(browsing, conversation):
    page = browsing.conversation("bob", conversation.pk)
    send(page, "summarize")
    expect(question(page)).to_contain_text("Which file should I summarize?")
    # While a question waits, the composer leads to it; steering is a choice made plainly.
    page.get_by_role("button", name="Steer instead").click()
    send(page, "keep it short")
    steer = page.locator(".entry-steer")
    expect(steer).to_contain_text("Bob")
    expect(steer).to_contain_text("steered the turn")
    expect(steer).to_contain_text("keep it short")
    card = question(page)
    card.get_by_label("README.md").check()
    card.get_by_role("button", name="Choose").click()
    expect(page.locator(".turn-end")).to_have_text("Completed")
    expect(page.locator(".entry-agent").first).to_have_text(
        re.compile("Noted while I worked: “keep it short”")
    )


def test_carol_the_viewer_sees_everything_but_no_controls(browsing, conversation, people):
    alice = browsing.conversation("alice", conversation.pk)
    carol = browsing.conversation("carol", conversation.pk)
    expect(alice.locator("#presence")).to_contain_text("Carol")
    send(alice, "summarize")
    card = question(carol)
    expect(card).to_contain_text("Which file should I summarize?")
    expect(card).to_contain_text("Waiting for a member to answer.")
    expect(card.get_by_role("button")).to_have_count(0)
    expect(card.get_by_role("radio")).to_have_count(0)
    expect(carol.get_by_role("textbox")).to_have_count(0)
    expect(carol.get_by_role("button", name="Stop")).to_have_count(0)
    expect(carol.locator(".viewer-note")).to_be_visible()
    screenshot(carol, "viewer")
    alice_card = question(alice)
    alice_card.get_by_label("README.md").check()
    alice_card.get_by_role("button", name="Choose").click()
    expect(card.locator(".question-outcome")).to_have_text("Answered by Alice: README.md")
    expect(carol.locator(".turn-end")).to_have_text("Completed")


def test_markup_in_inputs_and_agent_output_is_shown_as_text(browsing, conversation, files_root):
    (files_root / "notes" / "evil.md").write_text(
        "<script>window.pwned = 'script'</script>\n"
        "<img src=x onerror=\"window.pwned = 'img'\">\n"
        "[click me](javascript:window.pwned='link')\n"
    )
    page = browsing.conversation("alice", conversation.pk)
    typed = "<img src=x onerror=\"window.pwned = 'input'\"> <b>bold?</b>"
    send(page, typed)
    expect(page.locator(".entry-input .entry-text")).to_have_text(typed)
    expect(page.locator(".entry-agent").first).to_contain_text(
        f"I'm not sure what you mean by “{typed}”"
    )
    question(page).get_by_role("button", name="Dismiss").click()
    expect(page.locator(".turn-end")).to_have_text("Completed")
    send(page, "summarize notes/evil.md")
    # Its own end (the first turn's is already there): the next input must start a turn, not
    # steer this one while it is still streaming.
    expect(page.locator(".turn-end")).to_have_count(2)
    expect(page.locator(".turn-end").last).to_have_text("Completed")
    reply = page.locator(".entry-agent .markdown").last
    expect(reply).to_contain_text("<script>window.pwned = 'script'</script>")
    expect(reply).to_contain_text("<img src=x onerror=")
    # File names with markup, echoed in a question's prompt (itself rendered as Markdown).
    for name in ("<b>one.md", "<b>two.md"):
        (files_root / "notes" / name).write_text("x\n")
    send(page, "summarize <b>")
    card = question(page)
    expect(card.locator(".question-prompt")).to_have_text(
        "Several files match “<b>”: which one should I summarize?"
    )
    expect(card.get_by_label("<b>one.md")).to_be_visible()
    card.get_by_role("button", name="Dismiss").click()
    expect(page.locator(".turn-end")).to_have_count(3)
    expect(page.locator(".turn-end").last).to_have_text("Completed")
    transcript = page.locator("#transcript")
    expect(transcript.locator("img, script, b")).to_have_count(0)
    expect(transcript.locator("a[href^='javascript']")).to_have_count(0)
    assert page.evaluate("window.pwned") is None
    screenshot(page, "markup-as-text")


def test_input_holding_a_code_fence_is_quoted_as_one_code_block_exactly(browsing, conversation):
    page = browsing.conversation("alice", conversation.pk)
    typed = 'What is this?\n```python\nprint("hi `there`")\n````\nmore ``` after'
    send(page, typed)
    card = question(page)
    expect(card).to_contain_text("Which of these did you mean?")
    said = page.locator(".entry-agent .markdown").first
    expect(said).to_contain_text("I'm not sure what you mean by this:")
    expect(said.locator("pre")).to_have_count(1)
    assert said.locator("pre code").evaluate("code => code.textContent") == typed + "\n"
    # Nothing of the quote spills out of its block: no stray fence or closing words after it.
    assert said.evaluate("m => m.lastElementChild.classList.contains('code-block')")
    card.get_by_role("button", name="Dismiss").click()
    expect(page.locator(".turn-end")).to_have_text("Completed")


def test_text_confirm_and_form_questions_in_the_page(browsing, conversation, files_root):
    page = browsing.conversation("alice", conversation.pk)
    send(page, "rename notes/ideas.md")
    card = page.locator(".question").nth(0)
    card.get_by_label("Your answer").fill("ideas-2026.md")
    card.get_by_role("button", name="Send answer").click()
    expect(card.locator(".question-outcome")).to_have_text("Answered by Alice: “ideas-2026.md”")
    confirm = page.locator(".question").nth(1)
    expect(confirm.locator(".question-prompt")).to_have_text(
        "Rename notes/ideas.md to notes/ideas-2026.md?"
    )
    expect(confirm.locator(".question-prompt code")).to_have_text(
        ["notes/ideas.md", "notes/ideas-2026.md"]
    )
    confirm.get_by_role("button", name="Confirm").click()
    expect(confirm.locator(".question-outcome")).to_have_text("Answered by Alice: yes")
    expect(page.locator(".turn-end")).to_have_text("Completed")
    assert (files_root / "notes" / "ideas-2026.md").is_file()

    send(page, "note Ship it on Monday")
    form = page.locator(".question").nth(2)
    # What follows `note` is the title it suggests.
    expect(form.get_by_label("Title")).to_have_value("Ship it on Monday")
    form.get_by_label("Title").fill("")
    form.get_by_role("button", name="Send").click()
    expect(form.locator(".question-error")).to_have_text("Title is required.")
    form.get_by_label("Title").fill("Launch plan")
    form.get_by_label("Tags").fill("q4, launch")
    form.get_by_label("Pinned").check()
    screenshot(page, "form-question")
    form.get_by_role("button", name="Send").click()
    expect(form.locator(".question-outcome")).to_have_text(
        "Answered by Alice: Title: Launch plan; Tags: q4, launch; Pinned: yes"
    )
    expect(page.locator(".entry-agent .markdown").last).to_have_text("Wrote notes/launch-plan.md.")
    assert (files_root / "notes" / "launch-plan.md").is_file()


def test_a_refused_answer_is_explained_and_the_question_stays_open(browsing, conversation):
    page = browsing.conversation("alice", conversation.pk)
    send(page, "tidy")
    card = question(page)
    card.get_by_role("button", name="Send").click()
    expect(card.locator(".question-error")).to_have_text("Choose 1 to 4.")
    expect(card).to_have_attribute("data-status", "pending")
    card.get_by_role("button", name="Dismiss").click()
    expect(card.locator(".question-outcome")).to_have_text("Dismissed by Alice")
    expect(page.locator(".turn-end")).to_have_text("Completed")


def test_keyboard_only_at_phone_width(browsing, conversation):
    page = browsing.conversation("alice", conversation.pk, viewport=PHONE)
    page.keyboard.press("Tab")  # the skip link comes first
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    box = page.get_by_role("textbox", name="Message the agent")
    box.focus()
    page.keyboard.type("tidy")
    page.keyboard.press("Enter")
    card = question(page)
    large = card.get_by_role("checkbox", name=re.compile("List large files"))
    expect(large).to_be_visible()
    large.focus()
    page.keyboard.press("Space")
    expect(large).to_be_checked()
    page.keyboard.press("Tab")
    expect(card.get_by_role("button", name="Send")).to_be_focused()
    screenshot(page, "phone-question")
    page.keyboard.press("Enter")
    expect(card.locator(".question-outcome")).to_have_text("Answered by Alice: List large files")
    expect(page.locator(".turn-end")).to_have_text("Completed")
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    screenshot(page, "phone-answered")


def test_who_is_here_comes_and_goes_live(browsing, conversation):
    alice = browsing.conversation("alice", conversation.pk)
    expect(alice.locator("#presence")).to_have_text(re.compile("Alice \\(you\\)"))
    bob = browsing.conversation("bob", conversation.pk)
    expect(alice.locator("#presence li")).to_have_count(2)
    expect(alice.locator("#presence")).to_contain_text("Bob")
    expect(bob.locator("#presence")).to_contain_text("Alice")
    bob.close()
    expect(alice.locator("#presence li")).to_have_count(1)
    expect(alice.locator("#presence")).not_to_contain_text("Bob")


def test_home_lists_workspaces_and_starts_a_conversation(browsing, conversation, people):
    page = browsing.open("alice")
    expect(page.get_by_role("heading", name="The Team")).to_be_visible()
    expect(page.get_by_role("link", name="Plans")).to_be_visible()
    page.get_by_label("New conversation").fill("Launch week")
    page.get_by_role("button", name="Start a conversation").click()
    expect(page.get_by_role("heading", name="Launch week")).to_be_visible()
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    screenshot(page, "new-conversation")
    carol = browsing.open("carol")
    expect(carol.get_by_role("link", name="Plans")).to_be_visible()
    expect(carol.get_by_role("button", name="Start a conversation")).to_have_count(0)
    stranger = browsing.open("dave", f"/conversations/{conversation.pk}/")
    expect(stranger.get_by_role("heading", name="Not Found")).to_be_visible()


def test_the_transcript_matches_the_event_log(browsing, conversation, people):
    page = browsing.conversation("alice", conversation.pk)
    send(page, "list docs")
    expect(page.locator(".turn-end")).to_have_text("Completed")
    with httpx.Client(base_url=browsing.server.url, headers=people.alice.headers) as client:
        events = all_events(client, conversation.pk)
    said = next(e["data"]["text"] for e in events if e["type"] == "message.completed")
    assert said.startswith("`docs` holds 2 entries")
    expect(page.locator(".entry-agent .markdown code").first).to_have_text("docs")
    expect(page.locator("body")).to_have_attribute("data-last-seq", str(events[-1]["seq"]))


def test_a_failed_turn_shows_its_error(browsing, people):
    broken = services.conversation_create(
        workspace=people.workspace, user=people.alice.user, title="Broken", agent="broken"
    )
    page = browsing.conversation("bob", broken.pk)
    send(page, "go")
    ending = page.locator(".turn-end")
    expect(ending).to_have_text(
        "Failed: Something went wrong inside Parley; an admin can see the details."
    )
    expect(ending).to_have_attribute("role", "alert")
    expect(page.locator("details.tool")).to_have_attribute("data-state", "failed")
    expect(page.locator(".entry-agent .markdown")).to_have_text("Starting,")
    expect(page.get_by_role("button", name="Send")).to_be_visible()


def test_steering_mid_message_shows_every_word_once_live_and_after_a_reload(browsing, flood):
    page = browsing.conversation("bob", flood.pk)
    send(page, "3000 text every 2")
    expect(page.locator(".entry-agent").last).to_contain_text("w300 ")
    box = page.get_by_role("textbox", name="Steer the running turn")
    box.fill("faster, please")
    box.press("Enter")
    box.press("Enter")  # a second press while the first is on its way sends nothing more
    expect(page.locator(".turn-end")).to_have_text("Completed", timeout=60_000)
    expected = " ".join(f"w{n}" for n in range(1, 3001))
    for _ in range(2):
        expect(page.locator(".entry-steer")).to_have_count(1)
        expect(page.locator(".entry-steer .entry-text")).to_have_text("faster, please")
        parts = page.locator(".entry-agent .markdown")
        expect(parts).to_have_count(2)  # before the steering, and after it
        first, rest = (text.strip() for text in parts.all_inner_texts())
        assert first and rest and f"{first} {rest}" == expected
        page.reload()
        expect(page.locator(".turn-end")).to_have_text("Completed")


SPLIT_DOCUMENTS = [
    "# Plan\n\nFirst a paragraph with **bold** and `code`.\n\nThen another.\n\n## Next\n\nDone.",
    "Steps:\n\n1. one\n2. two\n\n3. three after a blank line\n\nAfter the list.\n\n- a\n\n- b\n",
    "Code:\n\n```py\ndef f():\n\n    return 1\n\n\nprint(f())\n```\n\nOn.\n\n~~~\nx\n\ny\n~~~\n",
    "> quoted\n\n> still quoted\n\nplain\n\n| a | b |\n| - | - |\n| 1 | 2 |\n\nafter\n",
    "Title\n\n===\n\nindented:\n\n    code line\n\n    more code\n\nend [link](http://x)\n",
]


def test_a_streaming_message_splits_only_where_the_rendering_stays_the_same(browsing, flood):
    """Every prefix of these answers, rendered as the page renders a message still streaming
    (its settled blocks, then the rest), is the same HTML as rendered whole."""
    page = browsing.conversation("alice", flood.pk)
    differences = page.evaluate(
        """async (documents) => {
            const { settledEnd } = await import("/static/parley/transcript.js");
            const { renderMarkdown } = await import("/static/parley/markdown.js");
            const found = [];
            for (const text of documents) {
                for (let length = 0; length <= text.length; length++) {
                    const prefix = text.slice(0, length);
                    let settled = 0;
                    // As the page does: from the last end found, frame after frame.
                    for (const step of [Math.floor(length / 2), length]) {
                        settled = settledEnd(prefix.slice(0, step), settled);
                    }
                    const split = renderMarkdown(prefix.slice(0, settled))
                        + renderMarkdown(prefix.slice(settled));
                    if (split !== renderMarkdown(prefix)) found.push({ prefix, settled });
                }
            }
            return found;
        }""",
        SPLIT_DOCUMENTS,
    )
    assert differences == []


def test_a_long_answer_streams_rendering_only_its_last_block_again(browsing, flood):
    page = browsing.conversation("alice", flood.pk)
    send(page, "6000 markdown every 20")
    message = page.locator(".entry-agent.streaming .markdown")
    expect(message.locator("h2").first).to_have_text("Step 1")
    expect(message.locator("h2").nth(2)).to_have_text("Step 3")
    # The first heading, settled, is the same node from then on: it is not rendered again.
    message.locator("h2").first.evaluate("(heading) => { heading.dataset.kept = 'yes'; }")
    expect(message.locator("h2").nth(6)).to_have_text("Step 7")
    expect(message.locator("h2").first).to_have_attribute("data-kept", "yes")
    expect(page.locator(".turn-end")).to_have_text("Completed", timeout=60_000)
    whole = page.locator(".entry-agent .markdown")
    steps = whole.locator("h2")
    expect(steps.first).to_have_text("Step 1")
    expect(whole.locator("pre code").first).to_have_text(
        "def step_1(plan):\n    return plan.check(1)\n"
    )
    expect(steps).to_have_count(markdown_answer(6000).count("## Step "))
    assert page.locator(".entry-agent").count() == 1
