"""The "Waiting for you" page: every question the person may answer, across their workspaces,
answerable right there; the count every page's header shows (see people.js); and the small
page an answer link opens (see selection.links)."""

from django.contrib.auth.decorators import login_required
from django.middleware.csrf import get_token
from django.shortcuts import render
from django.urls import reverse
from django.utils.functional import SimpleLazyObject

from core.people import person

from . import selectors


@login_required
def waiting_page(request):
    config = {
        "me": person(request.user),
        "csrf": get_token(request),
        "login_url": f"{reverse('login')}?next={request.path}",
    }
    return render(request, "waiting.html", {"config": config})


def waiting(request) -> dict:
    """A context processor: ``waiting`` (count and for_me) for the header, read only if the
    page shows it (signed in), at most once per page."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"waiting": SimpleLazyObject(lambda: selectors.waiting_count(user=user))}


def answer_link_page(request, selection_id):
    """What an answer link opens: a page that reads the link's signature from its fragment
    (never sent here) and asks the API, with it, for the question with its full widget; the
    answer is a POST (the API's), never the opening. See selection.links."""
    config = {"selection": selection_id, "csrf": get_token(request)}
    response = render(request, "answer.html", {"config": config})
    # No cache keeps the page, and nothing it asks for names it elsewhere.
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"
    return response
