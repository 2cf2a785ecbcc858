"""Browser tests: Playwright driving Debian's Chromium (nothing is downloaded) against a real
Daphne on loopback. Screenshots of the main states go to test-artifacts/screenshots/."""

import os
import re
import shutil
import weakref
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from tests.browser import axe
from tests.browser.proxy import CuttableProxy
from tests.conftest import ROOT, wait_until

SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM = os.environ.get("PARLEY_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# As the machine's own check runs it: no sandbox as root, and no calls home, which a closed
# network would refuse many times a second.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
DESKTOP = axe.DESKTOP
# A shared, busy machine: give the page time before calling it broken.
expect.set_options(timeout=15_000)
PHONE = axe.PHONE
# Console lines that are the network's doing, not the page's: Chromium reports every refused
# API call (which the page handles and explains), and, in a test that cuts sockets, the failed
# reconnects.
REFUSED_CALL = re.compile(r"Failed to load resource: the server responded with a status of 4\d\d")
NETWORK_NOISE = re.compile(r"WebSocket connection to .* failed|net::ERR_")


@pytest.fixture(scope="module")
def chromium():
    # Playwright's sync API keeps an event loop running in this thread, which Django takes for
    # async code and refuses the ORM calls the tests' own fixtures make (as pytest-django and
    # Playwright both advise, the check is lifted while the browser is up).
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
            yield browser
            browser.close()
    finally:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]


# Which Browsing each of its pages belongs to (what axe finds on a page goes to its problems).
BROWSING = weakref.WeakKeyDictionary()


class Browsing:
    """People's browser sessions against one server; each page's errors and warnings are kept,
    and so is what axe finds wrong with each page at each screenshot and at the end of the test
    (tests/browser/axe.py): the test fails if there is any."""

    def __init__(self, chromium, server, people):
        self.chromium = chromium
        self.server = server
        self.people = people
        self.contexts = []
        self.problems: list[str] = []
        self.allow_network_noise = False

    def _page(self, who: str, *, base_url=None, viewport=None) -> Page:
        context = self.chromium.new_context(
            base_url=base_url or self.server.url, viewport=viewport or DESKTOP
        )
        context.set_default_timeout(20_000)
        self.contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: self.problems.append(f"{who}: {error}"))
        page.on("console", lambda message: self._console(who, message))
        BROWSING[page] = self
        return page

    def signed_out(self, url: str, *, who: str = "nobody") -> Page:
        """A browser where nobody is signed in to Parley, opening ``url`` (a link from an
        email)."""
        page = self._page(who)
        page.goto(url)
        return page

    def open(self, who: str, path: str = "/", *, base_url=None, viewport=None) -> Page:
        page = self._page(who, base_url=base_url, viewport=viewport)
        page.goto("/login/")
        self.accessibility(page, "the login page")
        page.get_by_label("Username").fill(who)
        page.get_by_label("Password").fill(f"{who}-pw")
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("heading", name="Your workspaces")).to_be_visible()
        if path != "/":
            page.goto(path)
        return page

    def conversation(self, who: str, conversation_id: str, **kwargs) -> Page:
        page = self.open(who, f"/conversations/{conversation_id}/", **kwargs)
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")
        return page

    def _console(self, who, message) -> None:
        if message.type not in ("error", "warning") or REFUSED_CALL.search(message.text):
            return
        if self.allow_network_noise and NETWORK_NOISE.search(message.text):
            return
        self.problems.append(f"{who}: console {message.type}: {message.text}")

    def accessibility(self, page: Page, where: str, *, both_sizes: bool = False) -> None:
        """What axe finds on ``page`` now goes to the problems, each violation once."""
        for problem in axe.check(page, where, both_sizes=both_sizes):
            what = problem.split(" at ", 1)[1]  # the same violation seen again is not news
            if not any(known.endswith(what) for known in self.problems):
                self.problems.append(problem)

    def close(self) -> None:
        for context in self.contexts:
            for page in context.pages:
                self.accessibility(page, f"the end of the test ({page.url})", both_sizes=True)
            context.close()


@pytest.fixture
def browsing(chromium, server, people):
    browsing = Browsing(chromium, server, people)
    yield browsing
    browsing.close()
    assert not browsing.problems, "\n".join(browsing.problems)


@pytest.fixture
def proxy(server):
    proxy = CuttableProxy(server.port)
    yield proxy
    proxy.close()


class HeldReplies:
    """Replies to questions sent by ``page`` reach the server at once, but their responses are
    held back until ``release()`` (as on a slow network): what else the page learns meanwhile,
    over its socket, comes first for certain."""

    def __init__(self, page: Page):
        self.page = page
        self.held = []
        page.route("**/reply/", lambda route: self.held.append((route, route.fetch())))

    def release(self) -> None:
        assert self.held, "no reply was sent"
        for route, response in self.held:
            route.fulfill(response=response)
        self.page.unroute("**/reply/")


# Notifications are recorded as the page makes them (Chromium's headless shell shows none), and
# the tab can be told it is hidden, as a tab in the background is: both only in tabs opened with
# them (the page's own code is untouched).
NOTIFICATIONS = """
window.__notifications = [];
const Shown = window.Notification;
window.Notification = class extends EventTarget {
  static get permission() { return Shown.permission; }
  static requestPermission() { return Shown.requestPermission(); }
  constructor(title, options) {
    super();
    this.title = title;
    this.body = options && options.body;
    this.tag = options && options.tag;
    window.__notifications.push(this);
  }
  close() {}
};
"""
HIDDEN = """
Object.defineProperty(document, "visibilityState", { get: () => "hidden" });
Object.defineProperty(document, "hidden", { get: () => true });
"""


def hidden_tab(browsing, who: str, path: str = "/", *, allowed: bool = True) -> Page:
    """A tab of ``who``'s in the background, allowed to show notifications (unless not)."""
    page = browsing.open(who, path)
    if allowed:
        page.context.grant_permissions(["notifications"])
    page.context.add_init_script(NOTIFICATIONS + HIDDEN)
    page.reload()
    return page


def notifications(page: Page) -> list[dict]:
    """What the page showed as notifications (people.js keeps a record of them)."""
    return page.evaluate("window.parleyPeople.notified")


def wait_for_notification(page: Page, title_start: str) -> dict:
    def shown():
        return [n for n in notifications(page) if n["title"].startswith(title_start)]

    wait_until(shown, what=f"a notification starting {title_start!r}")
    return shown()[0]


def screenshot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=path)
    browsing = BROWSING.get(page)
    if browsing is not None:
        browsing.accessibility(page, f"screenshot {name}")
    else:
        problems = axe.check(page, f"screenshot {name}", both_sizes=False)
        assert problems == [], "\n".join(problems)
    return path
