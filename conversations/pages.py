"""Browser pages: the workspaces and conversations a person belongs to, and a conversation's
live page (a shell that static JavaScript fills from the event log and the socket)."""

from datetime import datetime
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404
from django.middleware.csrf import get_token
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.views.decorators.http import require_POST

from core.decoding import check_text
from core.errors import ApplicationError
from core.people import person
from core.throttles import rate_check

from . import selectors, services
from .access import conversation_access, workspace_access
from .agents import agent_models
from .events import TERMINAL_EVENT_TYPES
from .models import Membership, Turn

# What the agents are called on the pages; one not named here goes by its configured name.
AGENT_LABELS = {"builtin": "Builtin helper", "openai": "Model"}


def agent_label(agent: str, model: str = "") -> str:
    """An agent in words, with its model when it offers several: "Model (gpt-4.1-mini)". With
    no model picked, the one named is its default (the first it offers)."""
    label = AGENT_LABELS.get(agent, agent)
    model = model or next(iter(agent_models(agent)), "")
    return f"{label} ({model})" if model else label


def agent_choices() -> list[dict]:
    """The home page's Agent menu: each agent, and each model of one that offers several, as
    its own option (so the form needs no script). The value is the agent's name, or
    ``agent:model`` for a model other than its default; conversation_new splits it."""
    choices = []
    for agent in settings.PARLEY_AGENTS:
        default = agent == settings.PARLEY_DEFAULT_AGENT
        models = agent_models(agent)
        choices.append({"value": agent, "label": agent_label(agent), "selected": default})
        choices += [
            {"value": f"{agent}:{model}", "label": agent_label(agent, model), "selected": False}
            for model in models[1:]
        ]
    return choices


# Conversations per workspace on one page of the home list.
HOME_PAGE_SIZE = 50


def activity_words(moment: datetime, now: datetime) -> str:
    """How long ago, in words: "just now", "5 minutes ago", "3 days ago", then the date
    (home.js keeps the words current with the same rules)."""
    seconds = (now - moment).total_seconds()
    if seconds < 60:
        return "just now"
    for unit, size, limit in (("minute", 60, 60), ("hour", 3600, 24), ("day", 86400, 30)):
        count = int(seconds // size)
        if count < limit:
            return f"{count} {unit}{'' if count == 1 else 's'} ago"
    return date_format(timezone.localtime(moment), "j M Y")


def _home_url(**params) -> str:
    kept = {name: value for name, value in params.items() if value}
    return f"{reverse('home')}?{urlencode(kept)}" if kept else reverse("home")


@login_required
def home(request):
    """The person's workspaces, each with its conversations, latest activity first, a page of
    HOME_PAGE_SIZE at a time: ``?q=`` searches titles (archived ones too), ``?archived=1``
    lists only the archived ones, and ``?workspace=<slug>&page=N`` pages through one workspace.
    Plain links and a GET form: it all works without JavaScript (home.js adds in-place
    rename, archive and delete)."""
    search = request.GET.get("q", "").strip()[:200]
    archived_view = request.GET.get("archived") == "1"
    workspaces = list(selectors.workspaces_for_user(user=request.user))
    # One workspace, to page through it; a slug that is not one of theirs shows them all.
    only = request.GET.get("workspace", "")
    if any(workspace.slug == only for workspace in workspaces):
        workspaces = [workspace for workspace in workspaces if workspace.slug == only]
    else:
        only = ""
    archived = True if archived_view else (None if search else False)
    view = {"q": search, "archived": "1" if archived_view else ""}
    now = timezone.now()
    for workspace in workspaces:
        workspace.can_act = workspace.role in Membership.ACTING_ROLES
        conversations = selectors.conversations_for_user(
            user=request.user, workspace_slug=workspace.slug, search=search, archived=archived
        )
        page = Paginator(conversations, HOME_PAGE_SIZE).get_page(
            request.GET.get("page") if only else 1
        )
        for conversation in page:
            conversation.rights = services.conversation_rights(
                conversation=conversation, user=request.user, role=workspace.role
            )
            conversation.activity_words = activity_words(conversation.last_activity_at, now)
        workspace.page = page
        here = {**view, "workspace": workspace.slug}
        if page.has_previous():
            workspace.newer_url = _home_url(**here, page=page.previous_page_number())
        if page.has_next():
            workspace.older_url = _home_url(**here, page=page.next_page_number())
    return render(
        request,
        "home.html",
        {
            "workspaces": workspaces,
            "agent_choices": agent_choices(),
            "search": search,
            "archived_view": archived_view,
            "only": only,
            "all_url": _home_url(**view),
            "list_url": _home_url(q=search),
            "archived_url": _home_url(q=search, archived="1"),
            "csrf": get_token(request),
        },
    )


@login_required
@require_POST
def conversation_new(request):
    """Start a conversation from the home page's form, then open it."""
    try:
        # The form's fields through the gate, as a body's: no NUL reaches the database.
        for value in request.POST.values():
            check_text(value, what="The form")
        workspace, _ = workspace_access(
            user=request.user,
            slug=request.POST.get("workspace", ""),
            act=True,
            doing="start conversations",
        )
        # As over REST: PARLEY_CONVERSATION_RATE per person.
        rate_check("conversations", request.user)
        # At the first colon only: model names may hold colons (Ollama's "llama3.1:8b").
        agent, _, model = request.POST.get("agent", "").partition(":")
        conversation = services.conversation_create(
            workspace=workspace,
            user=request.user,
            title=request.POST.get("title", ""),
            agent=agent or None,
            model=model,
        )
    except ApplicationError as error:
        messages.error(request, error.message)
        return redirect("home")
    return redirect("conversation", conversation_id=conversation.pk)


@login_required
def conversation_page(request, conversation_id):
    try:
        conversation, membership = conversation_access(
            user=request.user, conversation_id=conversation_id
        )
    except ApplicationError:
        raise Http404("No such conversation.") from None
    config = {
        "conversation": conversation.pk,
        "me": person(request.user),
        "role": membership.role,
        "can_act": membership.can_act,
        # The builtin agent answers "help"; the page suggests it only for that one.
        "hint": " (try “help”)" if conversation.agent == "builtin" else "",
        # What ends a turn, from the one definition in Python: the page keeps no copy.
        "terminal_types": sorted(TERMINAL_EVENT_TYPES),
        "ended_statuses": list(Turn.ENDED_STATUSES),
        "csrf": get_token(request),
        "login_url": f"{reverse('login')}?next={request.path}",
    }
    return render(
        request,
        "conversation.html",
        {
            "conversation": conversation,
            "agent_label": agent_label(conversation.agent, conversation.model),
            "membership": membership,
            "config": config,
        },
    )
