"""Pages in a real Chromium: code blocks highlighted with a working Copy button, Parley's own
404 page, and the Content-Security-Policy on every page (Parley's, the login, the admin, the
API's docs and browsable pages) with nothing on them breaking it."""

import json
import re

import httpx
import pytest
from django.contrib.admin.utils import quote
from playwright.sync_api import Page, expect

from conversations import services
from core.middleware import content_security_policy
from tests.browser.conftest import DESKTOP, screenshot
from tests.helpers import send

pytestmark = pytest.mark.browser

# Every violation of the page's policy, as the browser reports it to the page; recorded from
# before the page's first script runs (Playwright's init scripts are not subject to the policy).
WATCH_POLICY = """
window.policyViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.policyViolations.push(
    `${event.effectiveDirective} blocked ${event.blockedURI || "inline"} at ` +
    `${event.sourceFile}:${event.lineNumber}`
  );
});
"""

PYTHON = 'def greet(name):\n    return f"<b>{name}</b>"  # <img src=x onerror=alert(1)>'


def watched(page: Page) -> Page:
    """The page's later navigations record policy violations (see policy_kept)."""
    page.context.add_init_script(WATCH_POLICY)
    return page


def anonymous(browsing) -> Page:
    """A browser nobody is signed in to, its problems kept with the signed-in ones."""
    context = browsing.chromium.new_context(base_url=browsing.server.url, viewport=DESKTOP)
    browsing.contexts.append(context)
    page = context.new_page()
    page.on("pageerror", lambda error: browsing.problems.append(f"anonymous: {error}"))
    page.on("console", lambda message: browsing._console("anonymous", message))
    return watched(page)


def visit(page: Page, path: str, status: int = 200):
    """Open the path: it answers with the status and Parley's policy."""
    response = page.goto(path)
    assert response.status == status, path
    host = re.sub(r"^https?://", "", page.url).split("/")[0]
    assert response.headers.get("content-security-policy") == content_security_policy(host), path
    return response


def clipboard(browsing, page: Page) -> Page:
    """The page may write the clipboard, and the test read it."""
    page.context.grant_permissions(
        ["clipboard-read", "clipboard-write"], origin=browsing.server.url
    )
    return page


def live(page: Page, conversation_id: str) -> None:
    visit(page, f"/conversations/{conversation_id}/")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")


def policy_kept(page: Page) -> None:
    assert page.evaluate("window.policyViolations") == [], page.url


@pytest.fixture
def scripted(people):
    return services.conversation_create(
        workspace=people.workspace, user=people.alice.user, title="Code", agent="scripted"
    )


def test_code_blocks_are_highlighted_and_copy_puts_them_on_the_clipboard(
    browsing, scripted, conversation
):
    page = clipboard(browsing, watched(browsing.open("alice")))
    live(page, scripted.pk)
    hostile = "```<img src=x onerror=alert(1)>\n<script>window.pwned = 1</script>\n```"
    send(page, json.dumps([{"say": f"Here it is:\n\n```python\n{PYTHON}\n```\n\n{hostile}"}]))
    expect(page.locator(".turn-end")).to_have_text("Completed")
    block = page.locator(".entry-agent .code-block").first
    expect(block.locator(".code-language")).to_have_text("python")
    code = block.locator("pre code.language-python")
    expect(code.locator(".hljs-keyword").first).to_have_text("def")
    expect(code.locator(".hljs-title.function_")).to_have_text("greet")
    expect(code.locator(".hljs-string")).to_have_text('f"<b>{name}</b>"')
    expect(code.locator(".hljs-comment")).to_have_text("# <img src=x onerror=alert(1)>")
    # The markup is text, in the code and in a block's language alike: no element came of it.
    other = page.locator(".entry-agent .code-block").last
    expect(other.locator(".code-language")).to_have_text("<img")
    expect(other.locator("pre code")).to_have_text("<script>window.pwned = 1</script>\n")
    expect(page.locator("#transcript").locator("b, img, script")).to_have_count(0)
    assert page.evaluate("window.pwned") is None

    block.get_by_role("button", name="Copy", exact=True).click()
    expect(block.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == PYTHON
    expect(page.get_by_role("status").filter(has_text="Code copied")).to_be_attached()
    expect(block.get_by_role("button", name="Copy", exact=True)).to_be_visible()  # back again

    # A diff, from the builtin agent comparing two files, copied from the keyboard.
    live(page, conversation.pk)
    send(page, "compare reports/q3-summary.md reports/q4-plan.md")
    expect(page.locator(".turn-end")).to_have_text("Completed")
    block = page.locator(".entry-agent .code-block").last
    expect(block.locator(".code-language")).to_have_text("diff")
    diff = block.locator("pre code.language-diff")
    expect(diff.locator(".hljs-deletion").first).to_have_text("-# Q3 report")
    expect(diff.locator(".hljs-addition").first).to_have_text("+# Q4 plan")
    expect(diff.locator(".hljs-meta")).to_have_text("@@ -1,8 +1,10 @@")
    added = diff.locator(".hljs-addition").first.evaluate("e => getComputedStyle(e).color")
    removed = diff.locator(".hljs-deletion").first.evaluate("e => getComputedStyle(e).color")
    plain = diff.evaluate("e => getComputedStyle(e).color")
    assert len({added, removed, plain}) == 3, (added, removed, plain)
    block.get_by_role("button", name="Copy", exact=True).focus()
    page.keyboard.press("Enter")
    expect(block.get_by_role("button", name="Copied")).to_be_visible()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("--- reports/q3-summary.md\n+++ reports/q4-plan.md\n@@ -1,8")
    assert copied == diff.text_content().removesuffix("\n")
    block.scroll_into_view_if_needed()
    screenshot(page, "code-highlighted")
    policy_kept(page)


def test_the_not_found_page_is_parleys_with_a_way_home(browsing, people):
    page = watched(browsing.open("alice"))
    visit(page, "/no/such/page/", status=404)
    expect(page).to_have_title("Page not found · Parley")
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
    expect(page.locator("main")).to_contain_text("There is nothing at /no/such/page/")
    expect(page.locator(".site-user-name")).to_have_text("Alice")  # the usual header
    screenshot(page, "not-found")
    policy_kept(page)
    page.get_by_role("link", name="Back to your workspaces").click()
    expect(page.get_by_role("heading", name="Your workspaces")).to_be_visible()
    # A conversation that does not exist (or is not theirs) gets the same page.
    visit(page, "/conversations/c_0000000000000000/", status=404)
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()

    stranger = anonymous(browsing)
    visit(stranger, "/no/such/page/", status=404)
    expect(stranger.get_by_role("heading", name="Page not found")).to_be_visible()
    expect(stranger.locator(".site-user")).to_have_count(0)
    policy_kept(stranger)
    stranger.get_by_role("link", name="Go to Parley's home page").click()
    expect(stranger.get_by_role("heading", name="Log in to Parley")).to_be_visible()


def test_every_page_sends_the_policy_and_nothing_on_them_breaks_it(browsing, people, conversation):
    people.alice.user.is_staff = people.alice.user.is_superuser = True
    people.alice.user.save()

    stranger = anonymous(browsing)
    visit(stranger, "/login/")
    expect(stranger.get_by_role("heading", name="Log in to Parley")).to_be_visible()
    policy_kept(stranger)
    visit(stranger, "/admin/login/")
    expect(stranger.get_by_role("button", name="Log in")).to_be_visible()
    policy_kept(stranger)

    page = watched(browsing.open("alice"))
    visit(page, "/")
    expect(page.get_by_role("heading", name="Your workspaces")).to_be_visible()
    policy_kept(page)
    live(page, conversation.pk)
    policy_kept(page)

    visit(page, "/admin/")
    expect(page.get_by_role("heading", name="Site administration")).to_be_visible()
    policy_kept(page)
    visit(page, f"/admin/conversations/conversation/{quote(conversation.pk)}/change/")
    expect(page.get_by_label("Title:")).to_have_value("Plans")
    # The admin's own scripts run under the policy (its autocomplete widgets), and it saves.
    expect(page.locator(".field-workspace .select2-container")).to_be_visible()
    page.get_by_label("Title:").fill("Plans, renamed")
    page.get_by_role("button", name="Save and continue editing").click()
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    expect(page.get_by_label("Title:")).to_have_value("Plans, renamed")
    policy_kept(page)

    # The API's documentation: Swagger UI, served from here, its start-up script a file.
    visit(page, "/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Parley API")
    expect(page.locator('.opblock-summary-path[data-path="/api/workspaces/"]')).to_be_visible()
    page.locator('.opblock-summary-path[data-path="/api/workspaces/"]').click()
    page.get_by_role("button", name="Try it out").click()
    page.get_by_role("button", name="Execute").click()
    answer = page.locator(".live-responses-table .response")
    expect(answer.locator(".response-col_status")).to_have_text("200")
    expect(answer.locator(".response-col_description")).to_contain_text('"slug": "team"')
    screenshot(page, "api-docs")
    policy_kept(page)
    # The REST framework's browsable API, its scripts working (OPTIONS is sent by one of them).
    visit(page, "/api/conversations/")
    page.get_by_role("button", name="OPTIONS").click()
    expect(page.locator(".response-info")).to_contain_text("Allow: GET, POST, HEAD, OPTIONS")
    policy_kept(page)

    # ReDoc's page fetched fonts from elsewhere and ran an inline script: it is gone, rather
    # than half-working.
    with httpx.Client(base_url=browsing.server.url) as client:
        gone = client.get("/api/redoc/")
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "not_found"
