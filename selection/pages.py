"""The "Waiting for you" page: every question the person may answer, across their workspaces,
answerable right there; the count every page's header shows (see people.js); and the small
page an answer link opens (see selection.links)."""

from django.contrib.auth.decorators import login_required
from django.middleware.csrf import get_token
from django.shortcuts import render
from django.urls import reverse
from django.utils.functional import SimpleLazyObject

from conversations.access import membership_of
from core.errors import ApplicationError
from core.people import person

from . import selectors
from .access import selection_access
from .links import LinkRefused, open_link


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
    """What an answer link opens: its question with its full widget, answered as the link's
    person with a POST (the API's, with the link), never by opening it. A settled question
    shows who settled it and how; a refused link says why, and shows nothing of the question."""
    token = request.GET.get("k", "")
    try:
        link = open_link(request, token=token, selection_id=selection_id)
        selection = selection_access(user=link.user, selection_id=selection_id)
    except LinkRefused as refused:
        return _link_refused(
            request, 403 if refused.status == 401 else refused.status, refused.message
        )
    except ApplicationError as error:
        if error.status == 429:
            return _link_refused(request, 429, error.message)
        return _link_refused(request, 403, "You may no longer see this question.")
    membership = membership_of(user=link.user, workspace_id=selection.conversation.workspace_id)
    config = {
        "selection": selection.to_payload(),
        "me": person(link.user),
        "role": membership.role,
        "can_act": membership.can_act,
        "link": token,
        "csrf": get_token(request),
    }
    response = render(
        request,
        "answer.html",
        {"selection": selection, "holder": person(link.user), "config": config},
    )
    return _private(response)


def _link_refused(request, status: int, message: str):
    response = render(request, "answer.html", {"refusal": message}, status=status)
    return _private(response)


def _private(response):
    # The page carries its link: no cache keeps it, and no request from it names it elsewhere.
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"
    return response
