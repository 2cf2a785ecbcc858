"""Browser pages: the workspaces and conversations a person belongs to, and a conversation's
live page (a shell that static JavaScript fills from the event log and the socket)."""

from functools import wraps

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, JsonResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django.views.defaults import page_not_found, server_error

from . import selectors, services
from .access import conversation_access, workspace_access
from .agents import agent_models
from .events import TERMINAL_EVENT_TYPES
from .models import Membership, Turn
from .shared import ApplicationError, person


def content_security_policy(view):
    """Pages run only Parley's own scripts and styles: text that slips through as markup can
    load nothing and run nothing (agent output and people's input are shown as text anyway)."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        host = request.get_host()
        response.setdefault(
            "Content-Security-Policy",
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            f"connect-src 'self' ws://{host} wss://{host}; object-src 'none'; base-uri 'none'; "
            "form-action 'self'; frame-ancestors 'none'",
        )
        return response

    return wrapped


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


@login_required
@content_security_policy
def home(request):
    workspaces = list(selectors.workspaces_for_user(user=request.user))
    conversations = selectors.conversations_for_user(user=request.user)
    by_workspace = {workspace.pk: [] for workspace in workspaces}
    for conversation in conversations[:500]:
        by_workspace[conversation.workspace_id].append(conversation)
    for workspace in workspaces:
        workspace.recent = by_workspace[workspace.pk][:50]
        workspace.can_act = workspace.role in Membership.ACTING_ROLES
    return render(
        request, "home.html", {"workspaces": workspaces, "agent_choices": agent_choices()}
    )


@login_required
@require_POST
def conversation_new(request):
    """Start a conversation from the home page's form, then open it."""
    try:
        workspace, _ = workspace_access(
            user=request.user,
            slug=request.POST.get("workspace", ""),
            act=True,
            doing="start conversations",
        )
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
@content_security_policy
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


def _api_error(code: str, message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


def not_found(request, exception=None):
    """API paths answer in the API's error shape; pages get the usual page."""
    if request.path.startswith("/api/"):
        return _api_error("not_found", f"No API endpoint at {request.path}.", 404)
    return page_not_found(request, exception)


def internal_error(request):
    if request.path.startswith("/api/"):
        return _api_error("server_error", "Something went wrong on our side.", 500)
    return server_error(request)
