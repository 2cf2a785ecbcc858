"""The main job done with the keyboard alone, in a real Chromium: sign in, start a conversation
and a turn, answer each kind of question the builtin agent asks (file picker, choice, several
choices, text, confirmation, form), and Stop a running turn. Only ``page.keyboard`` is used: no
clicks, no filling of fields, no mouse; at each step the focus is where the next step begins,
and it shows (a focus ring)."""

import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import screenshot

pytestmark = pytest.mark.browser

# What has the focus, and whether it is drawn: an outline or a box-shadow on it.
FOCUS = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const style = getComputedStyle(el);
  const ring = (style.outlineStyle !== "none" && parseFloat(style.outlineWidth) > 0)
    || style.boxShadow !== "none";
  const label = el.labels && el.labels[0];
  const name = el.getAttribute("aria-label") || (label && label.textContent) || el.textContent
    || el.id;
  return { tag: el.tagName.toLowerCase(), type: el.type || "", id: el.id, ring,
           name: name.trim().replace(/\\s+/g, " ").slice(0, 80),
           question: !!el.closest(".question") };
}"""


def focused(page: Page) -> dict:
    """The focused element (and that its focus ring shows)."""
    now = page.evaluate(FOCUS)
    assert now is not None, "nothing has the focus"
    assert now["ring"], f"the focus on {now} does not show"
    return now


def has_focus(locator) -> bool:
    return locator.evaluate("element => element === document.activeElement")


def wait_for_focus(locator) -> dict:
    """The focus comes to ``locator`` by itself (the page moved it there)."""
    expect(locator).to_be_focused()
    return focused(locator.page)


def tab_to(locator, *, back: bool = False, most: int = 40) -> dict:
    """Tab (or Shift+Tab) until ``locator`` has the focus, checking the ring at each stop."""
    page = locator.page
    for _ in range(most):
        if has_focus(locator):
            return focused(page)
        page.keyboard.press("Shift+Tab" if back else "Tab")
        if page.evaluate("document.activeElement !== document.body"):
            focused(page)
    raise AssertionError(f"{most} presses of Tab did not reach {locator}")


def arrow_to(locator, *, most: int = 20) -> dict:
    """ArrowDown (as in a group of radio buttons) until ``locator`` has the focus."""
    page = locator.page
    for _ in range(most):
        if has_focus(locator):
            return focused(page)
        page.keyboard.press("ArrowDown")
    raise AssertionError(f"{most} presses of ArrowDown did not reach {locator}")


def latest_question(page: Page):
    return page.locator(".question").last


def go_to_question(page: Page) -> dict:
    """From the composer, which points to the question that came, Enter goes to it: the focus
    is on its first control."""
    composer = page.locator("#composer-input")
    expect(page.locator("#composer-question")).to_be_visible()
    assert has_focus(composer), "the focus stays where the person was typing"
    page.keyboard.press("Enter")
    now = focused(page)
    assert now["question"], now
    return now


def ask(page: Page, command: str, prompt: str):
    """Type ``command`` in the composer (which has the focus) and send it with Enter: the
    question the turn asks, once it shows ``prompt``."""
    page.keyboard.type(command)
    page.keyboard.press("Enter")
    card = latest_question(page)
    expect(card).to_contain_text(prompt)
    return card


def carried_on(page: Page, card, outcome: str) -> None:
    """The question is answered with ``outcome``, the turn completes, and the focus is back in
    the composer for the next step."""
    expect(card.locator(".question-outcome")).to_contain_text(outcome)
    expect(page.locator(".turn-end").last).to_have_text("Completed")
    wait_for_focus(page.locator("#composer-input"))


def test_the_main_job_is_done_with_the_keyboard_alone(browsing, people):
    page = browsing.signed_out("/login/", who="alice")
    keys = page.keyboard

    # Sign in: the username, the password, Enter.
    tab_to(page.get_by_label("Username"))
    keys.type("alice")
    keys.press("Tab")
    assert focused(page)["id"] == "id_password"
    keys.type("alice-pw")
    keys.press("Enter")
    expect(page.get_by_role("heading", name="Your workspaces")).to_be_visible()

    # Start a conversation from the home page; on its page, the first Tab offers Skip to
    # content, and the composer is the next stop after the conversation's own controls.
    tab_to(page.get_by_role("textbox", name="New conversation").first)
    keys.type("By keyboard")
    keys.press("Enter")
    expect(page.get_by_role("heading", name="By keyboard")).to_be_visible()
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    keys.press("Tab")
    wait_for_focus(page.get_by_role("link", name="Skip to content"))
    keys.press("Enter")
    composer = page.locator("#composer-input")
    tab_to(composer)

    # A file picker: open a folder, pick a file in it, choose.
    card = ask(page, "summarize", "Which file should I summarize?")
    go_to_question(page)
    tab_to(card.get_by_role("button", name="Open folder reports"))
    keys.press("Enter")
    expect(card.locator(".picker-crumbs [aria-current]")).to_have_text("reports")
    assert focused(page)["question"], "opening a folder keeps the focus in the picker"
    # The files are a group of radio buttons: the arrows move through them, and choose.
    tab_to(card.locator(".picker-list input").first)
    arrow_to(card.get_by_label("q4-plan.md"))
    expect(card.get_by_label("q4-plan.md")).to_be_checked()
    screenshot(page, "keyboard-focus")
    tab_to(card.get_by_role("button", name="Choose"))
    keys.press("Enter")
    carried_on(page, card, "reports/q4-plan.md")

    # A choice (what was meant): Tab to one of its options, Enter picks it.
    card = ask(page, "what can you do", "Which of these did you mean?")
    go_to_question(page)
    tab_to(card.get_by_role("button", name=re.compile("^Help")))
    keys.press("Enter")
    carried_on(page, card, "Help")

    # Several choices: Space ticks, the submit button sends.
    card = ask(page, "tidy", "List large files")
    go_to_question(page)
    tab_to(card.get_by_label("List large files"))
    keys.press("Space")
    tab_to(card.get_by_role("button", name=re.compile("^(Choose|Send)")))
    keys.press("Enter")
    carried_on(page, card, "List large files")

    # Text, answered from the composer (which says so), then a confirmation, whose button the
    # focus goes to when it comes.
    card = ask(page, "rename notes/ideas.md", "be called?")
    expect(page.locator("#composer-question")).to_be_visible()
    wait_for_focus(composer)
    keys.type("ideas-2.md")
    keys.press("Enter")
    expect(card.locator(".question-outcome")).to_contain_text("ideas-2.md")
    card = latest_question(page)
    expect(card.get_by_role("button", name="Confirm")).to_be_visible()
    wait_for_focus(card.get_by_role("button", name="Confirm"))
    keys.press("Enter")
    expect(card.locator(".question-outcome")).to_have_text("Answered by Alice: yes")
    expect(page.locator(".turn-end").last).to_have_text("Completed")
    wait_for_focus(composer)

    # A form: its first field has the focus; Tab between fields, Space for the checkbox.
    card = ask(page, "note", "Tell me about the note.")
    go_to_question(page)
    title = card.get_by_role("textbox", name="Title")
    wait_for_focus(title)
    keys.type("Keyboard notes")
    tab_to(card.get_by_role("textbox", name="Tags"))
    keys.type("a11y")
    tab_to(card.get_by_role("checkbox", name="Pinned"))
    keys.press("Space")
    tab_to(card.get_by_role("button", name=re.compile("^(Send|Submit)")))
    keys.press("Enter")
    carried_on(page, card, "Keyboard notes")

    # Stop a running turn (one waiting on its question): Tab to Stop, Enter; the composer is
    # next.
    card = ask(page, "summarize", "Which file should I summarize?")
    tab_to(page.get_by_role("button", name="Stop"))
    keys.press("Enter")
    expect(page.locator(".turn-end").last).to_contain_text("Stopped")
    wait_for_focus(composer)
