"""Login throttling as a person meets it in a real Chromium: after too many wrong passwords the
login page, and the admin's, says that signing in is paused and until when, and then refuses the
right password too."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import DESKTOP, screenshot

pytestmark = pytest.mark.browser

PAUSED = re.compile(
    r"Too many failed sign-ins to this account from your address: try again in 1[45] minutes"
)


def fresh_page(chromium, server, problems: list):
    context = chromium.new_context(base_url=server.url, viewport=DESKTOP)
    context.set_default_timeout(20_000)
    page = context.new_page()
    page.on("pageerror", lambda error: problems.append(str(error)))
    return context, page


def log_in(page, path: str, username: str, password: str, button: str) -> None:
    page.goto(path)
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name=button).click()


def test_wrong_passwords_pause_signing_in_on_the_login_page(chromium, server, people):
    problems = []
    context, page = fresh_page(chromium, server, problems)
    try:
        for _ in range(4):
            log_in(page, "/login/", "bob", "not-it", "Log in")
            expect(page.get_by_role("alert")).to_have_text(
                "Your username and password didn't match. Please try again."
            )
        log_in(page, "/login/", "bob", "not-it", "Log in")
        expect(page.get_by_role("heading", name="Signing in is paused")).to_be_visible()
        expect(page.get_by_role("alert")).to_have_text(PAUSED)
        # The right password now gets the same answer, and no session.
        page.get_by_role("link", name="Back to the login page").click()
        log_in(page, "/login/", "bob", "bob-pw", "Log in")
        expect(page.get_by_role("heading", name="Signing in is paused")).to_be_visible()
        expect(page.get_by_role("alert")).to_have_text(PAUSED)
        expect(page.locator("time")).to_have_text(re.compile(r"^\d\d:\d\d UTC$"))
        screenshot(page, "login-locked-out")
        page.goto("/")
        expect(page).to_have_url(re.compile(r"/login/\?next=/$"))
    finally:
        context.close()
    assert problems == []


def test_wrong_passwords_pause_signing_in_to_the_admin(chromium, server, people):
    people.alice.user.is_staff = people.alice.user.is_superuser = True
    people.alice.user.save()
    problems = []
    context, page = fresh_page(chromium, server, problems)
    try:
        for _ in range(4):
            log_in(page, "/admin/login/", "alice", "not-it", "Log in")
            expect(page.locator(".errornote")).to_be_visible()
        log_in(page, "/admin/login/", "alice", "not-it", "Log in")
        expect(page.get_by_role("alert")).to_have_text(PAUSED)
        log_in(page, "/admin/login/", "alice", "alice-pw", "Log in")
        expect(page.get_by_role("heading", name="Signing in is paused")).to_be_visible()
        expect(page.get_by_role("alert")).to_have_text(PAUSED)
        page.goto("/admin/")
        expect(page).to_have_url(re.compile(r"/admin/login/\?next=/admin/$"))
    finally:
        context.close()
    assert problems == []
