"""No request is a server error, through a real Daphne: a form refused by its CSRF check
gets its 403 page, signed in or not; the first requests for the schema and MCP, all at once,
are served; nothing is logged at ERROR."""

import asyncio
import re

from conversations.models import Conversation
from tests.conftest import log_in


def test_a_form_left_open_across_a_new_login_is_refused_with_parleys_page(server, people):
    """Log in, open the home page (its form carries the token of the moment), log in again in
    another tab (a new session, a new token), then send the first tab's form."""
    browser = log_in(server, "bob")
    try:
        home = browser.get("/")
        stale = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', home.text).group(1)
        page = browser.get("/login/")
        fresh = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        again = browser.post(
            "/login/", data={"username": "bob", "password": "bob-pw", "csrfmiddlewaretoken": fresh}
        )
        assert again.status_code == 302
        refused = browser.post(
            "/conversations/new/",
            data={"csrfmiddlewaretoken": stale, "workspace": "team", "title": "Plans"},
            headers={"Origin": server.url, "Referer": f"{server.url}/"},
        )
        assert refused.status_code == 403
        assert "That form had expired" in refused.text
        # The page knows who is signed in (read from the database, off the event loop).
        assert "Back to your workspaces" in refused.text
        assert "Bob" in refused.text
        assert not Conversation.objects.filter(title="Plans").exists()
    finally:
        browser.close()


def test_logging_out_without_the_forms_token_is_refused_and_keeps_the_session(server, people):
    browser = log_in(server, "bob")
    try:
        refused = browser.post("/logout/")
        assert refused.status_code == 403
        assert "That form had expired" in refused.text
        assert browser.get("/").status_code == 200  # still signed in
        logged_out = browser.post(
            "/logout/", data={"csrfmiddlewaretoken": browser.cookies["csrftoken"]}
        )
        assert logged_out.status_code == 302
        assert browser.get("/").status_code == 302  # to the login page
    finally:
        browser.close()


async def test_the_first_requests_for_the_schema_and_mcp_come_at_once_and_are_served(server):
    """The first requests after a start find the schema's generator and the MCP endpoint not
    yet loaded: several at once wait for the one loading rather than failing."""
    async with server.async_client() as client:
        answers = await asyncio.gather(
            *(client.get("/api/schema/") for _ in range(6)),
            *(client.post("/mcp/", json={}) for _ in range(6)),
        )
    assert [answer.status_code for answer in answers] == [200] * 6 + [401] * 6
    _assert_no_error_logged(server)


def _assert_no_error_logged(server) -> None:
    log = server.log_text()
    errors = [line for line in log.splitlines() if " ERROR " in line]
    assert not errors, "\n".join(errors[:20])
    assert "Exception inside application" not in log
