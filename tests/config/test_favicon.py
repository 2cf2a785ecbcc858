"""No page's icon is missing: each page names Parley's icon, or the browser's fallback,
/favicon.ico, answers with it (the admin's pages, the API's browsable pages and Swagger UI name
their own or none)."""

import re
from urllib.parse import urljoin

import httpx
import pytest

from tests.conftest import log_in

pytestmark = pytest.mark.once

ICON = re.compile(r'<link rel="(?:shortcut )?icon"[^>]*href="([^"]*)"')
PAGES = ("/", "/waiting/", "/admin/", "/admin/conversations/turn/", "/api/docs/", "/nope/")


def icon_of(client: httpx.Client, path: str) -> httpx.Response | None:
    """The icon a browser would fetch for the page at ``path`` (None for an inline one)."""
    page = client.get(path, headers={"Accept": "text/html"})
    named = ICON.search(page.text)
    href = named.group(1) if named else "/favicon.ico"
    if href.startswith("data:"):
        return None
    return client.get(urljoin(str(page.url), href), follow_redirects=True)


def test_every_page_has_an_icon(server, people):
    signed_out = httpx.Client(base_url=server.url, timeout=20)
    alice = log_in(server, "alice")
    for client, path in [(signed_out, "/login/"), (signed_out, "/admin/login/")] + [
        (alice, path) for path in (*PAGES, "/api/conversations/")
    ]:
        icon = icon_of(client, path)
        assert icon is not None, f"{path} names no icon of Parley's"
        assert icon.status_code == 200, (path, icon.url, icon.status_code)
        assert icon.headers["content-type"].startswith("image/"), (path, icon.headers)
    fallback = signed_out.get("/favicon.ico", follow_redirects=True)
    assert fallback.headers["content-type"] == "image/svg+xml"
    assert "<title>Parley</title>" in fallback.text
