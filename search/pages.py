"""The search page, ``/search/?q=``: results of the same selector as the API, rendered on the
server (a plain form and links: it works without JavaScript)."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils.dateparse import parse_datetime
from django.utils.http import urlencode
from django.utils.safestring import mark_safe

from core.errors import ApplicationError

from .apis import MAX_PAGE
from .query import MAX_QUERY_CHARS
from .selectors import search_entries

TYPE_WORDS = {
    "turn.started": "asked",
    "turn.steered": "steered",
    "message.completed": "replied",
    "selection.requested": "asked a question",
    "selection.resolved": "answered",
}


@login_required
def search_page(request):
    query = request.GET.get("q", "").strip()
    context = {"query": query, "results": [], "error": None, "most": MAX_QUERY_CHARS}
    try:
        page = max(1, min(MAX_PAGE, int(request.GET.get("page", "1"))))
    except ValueError:
        page = 1
    if query:
        try:
            found = search_entries(user=request.user, query=query, page=page)
        except ApplicationError as error:
            context["error"] = error.message
        else:
            context["results"] = [_shown(result) for result in found["results"]]
            context["page"] = page
            if found["has_next"]:
                context["next_url"] = "?" + urlencode({"q": query, "page": page + 1})
            if page > 1:
                context["previous_url"] = "?" + urlencode({"q": query, "page": page - 1})
    status = 400 if context["error"] else 200
    return render(request, "search.html", context, status=status)


def _shown(result: dict) -> dict:
    return {
        **result,
        # Escaped by search.snippets, but for the <mark> elements it adds.
        "snippet_html": mark_safe(result["snippet"]["html"]),
        "who_words": result["who"] or "Agent",
        "when": parse_datetime(result["ts"]),
        "did": TYPE_WORDS.get(result["type"], ""),
    }
