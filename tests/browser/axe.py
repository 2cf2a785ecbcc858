"""Accessibility checked by a machine: axe-core (the npm package pinned in
tests/clients/package.json) run on a page in the browser tests, reporting every serious or
critical violation: at each screenshot and sign-in at the page's size, and on every page still
open at the end of a test at the desktop and the phone size both.

axe's source goes in through Playwright's ``evaluate`` (the DevTools protocol), which the
page's Content-Security-Policy does not govern: the policy stays as Parley sends it. A page
state already checked (the same DOM at the same size) is not checked again."""

from pathlib import Path
from urllib.parse import urlsplit

from playwright.sync_api import Error, Page

AXE = Path(__file__).parents[1] / "clients" / "node_modules" / "axe-core" / "axe.min.js"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
BLOCKING = ("serious", "critical")
# Pages made by others' code that Parley serves as they come: Swagger UI (/api/docs/) and the
# REST framework's browsable API (/api/...). Their own markup has violations (nested buttons in
# Swagger UI's operations, a format button named only by a tooltip) that Parley cannot fix
# without rewriting them: not checked.
THIRD_PARTY = ("/api/",)
# How many of a violation's elements a report names.
SHOWN = 5

# A cheap fingerprint of what axe would look at: the DOM (with the per-request CSRF token
# left out, so that the same form twice is the same state) and the size.
STATE = """() => {
  const html = document.documentElement.outerHTML
    .replace(/name="csrfmiddlewaretoken" value="[^"]*"/g, "");
  let hash = 2166136261;
  for (let i = 0; i < html.length; i++) {
    hash ^= html.charCodeAt(i);
    hash = Math.imul(hash, 16777619);
  }
  return `${hash >>> 0}:${html.length}:${innerWidth}x${innerHeight}`;
}"""
RUN = """async (blocking) => {
  const results = await axe.run(document, { resultTypes: ["violations"] });
  return results.violations
    .filter((v) => blocking.includes(v.impact))
    .map((v) => ({
      id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,
      nodes: v.nodes.map((n) => ({
        target: n.target.flat().join(" "),
        message: (n.any.concat(n.all, n.none)[0] || {}).message || "",
      })),
    }));
}"""

_source: str | None = None
# Page states already checked, in this test session.
_checked: set[str] = set()


def _axe_source() -> str:
    global _source
    if _source is None:
        if not AXE.exists():
            raise AssertionError(f"{AXE} is missing: run `make clients` (npm ci in tests/clients)")
        _source = AXE.read_text()
    return _source


def _run(page: Page, where: str) -> list[str]:
    state = page.evaluate(STATE)
    if state in _checked:
        return []
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.evaluate(_axe_source())
    size = "{width}x{height}".format(**page.viewport_size)
    problems = []
    for violation in page.evaluate(RUN, list(BLOCKING)):
        nodes = violation["nodes"]
        targets = ", ".join(node["target"] for node in nodes[:SHOWN])
        more = f" and {len(nodes) - SHOWN} more" if len(nodes) > SHOWN else ""
        problems.append(
            f"{where} at {size}: axe {violation['id']} ({violation['impact']}): "
            f"{violation['help']}: {targets}{more} ({nodes[0]['message']}) {violation['helpUrl']}"
        )
    _checked.add(state)
    return problems


def check(page: Page, where: str, *, both_sizes: bool = True) -> list[str]:
    """axe's serious and critical violations on ``page`` as it is now, one line each: at its
    own size, and (``both_sizes``) at the desktop and the phone size, the page put back to its
    own size after. Mid-test, a page is checked at its own size only: a page that answers a
    change of size (the sidebar turning into a drawer, the transcript following its end) would
    not be the page the test goes on with."""
    if page.is_closed() or urlsplit(page.url).path.startswith(THIRD_PARTY):
        return []
    # With its scripts off (a test of the pages without JavaScript), axe's timers never fire:
    # not checked (the same pages are, with scripts on). Playwright's own expect reads the
    # context's options the same way.
    if page.context._impl_obj._options.get("javaScriptEnabled") is False:
        return []
    own = page.viewport_size
    sizes = [own] + [size for size in (DESKTOP, PHONE) if size != own and both_sizes]
    problems: list[str] = []
    try:
        for size in sizes:
            if page.viewport_size != size:
                page.set_viewport_size(size)
            problems += _run(page, where)
    except Error as error:
        # The page went elsewhere (or closed) under the check: what it was is gone, and what it
        # is now is checked when it is looked at next.
        if not any(
            gone in str(error) for gone in ("Execution context was destroyed", "closed", "navigat")
        ):
            raise
    finally:
        if not page.is_closed() and page.viewport_size != own:
            page.set_viewport_size(own)
    return problems
