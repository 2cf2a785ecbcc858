"""A workspace's settings page, for its owners: its Slack channel, and its webhook endpoints
(add one and see its secret once, enable, disable, test, delete) with their latest deliveries.
Plain forms posted to the page: it all works without JavaScript."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.cache import add_never_cache_headers

from core.decoding import check_text
from core.errors import ApplicationError

from . import selectors
from .access import page_refusal, webhook_endpoint_access, workspace_owner_access
from .models import EVENT_TYPES
from .outbox import slack_is_set_up
from .services.channels import workspace_slack_channel_set
from .services.webhooks import (
    ALL_EVENT_TYPES,
    webhook_endpoint_create,
    webhook_endpoint_delete,
    webhook_endpoint_test,
    webhook_endpoint_update,
)

# The latest deliveries the page shows of each endpoint (the API has them all).
RECENT_DELIVERIES = 5
# Where a new endpoint's secret waits, in the person's session, for the page that shows it
# once (the form redirects there, so that reloading the page adds nothing, nor shows it again).
NEW_SECRET = "reach_new_webhook_secret"


@login_required
def workspace_settings_page(request, slug):
    try:
        workspace = workspace_owner_access(user=request.user, slug=slug, doing="open its settings")
    except ApplicationError as error:
        raise page_refusal(error) from None
    context = {"form": {"event_types": ALL_EVENT_TYPES}}
    status = 200
    if request.method != "POST" and (new := request.session.pop(NEW_SECRET, None)):
        if new["workspace"] == workspace.pk:
            context["created"] = new
    if request.method == "POST":
        try:
            for value in request.POST.values():
                check_text(value, what="The form")
            done = _act(request, workspace)
        except ApplicationError as error:
            if error.status in (403, 404) and error.code in ("forbidden", "not_found"):
                raise page_refusal(error) from None
            # The page again, saying why, with what was typed.
            action = request.POST.get("action", "")
            context["error"] = {"action": action, "message": error.message}
            fields = {"add": ("url", "description"), "channel": ("slack_channel",)}
            context["form"].update(
                {name: request.POST.get(name, "") for name in fields.get(action, ())}
            )
            if action == "add":
                context["form"]["event_types"] = request.POST.getlist("event_types")
            status = 400
        else:
            if done:
                messages.success(request, done)
            return redirect("workspace-settings", slug=workspace.slug)
    response = render(
        request, "reach/workspace_settings.html", _page(workspace, context), status=status
    )
    # The secret of a new endpoint is on it, once: no cache keeps a copy.
    add_never_cache_headers(response)
    return response


def _act(request, workspace) -> str | None:
    """Do what the form asks; what to say on the page it redirects to."""
    action = request.POST.get("action", "")
    if action == "channel":
        slack_channel = request.POST.get("slack_channel", "")
        reach = workspace_slack_channel_set(workspace=workspace, slack_channel=slack_channel)
        if reach.slack_channel:
            return f"Questions for anyone are posted to Slack channel {reach.slack_channel}."
        return "No Slack channel: questions for anyone are not posted to Slack."
    if action == "add":
        endpoint = webhook_endpoint_create(
            workspace=workspace,
            user=request.user,
            url=request.POST.get("url", ""),
            description=request.POST.get("description", ""),
            event_types=request.POST.getlist("event_types"),
        )
        request.session[NEW_SECRET] = {
            "workspace": workspace.pk,
            "url": endpoint.url,
            "secret": endpoint.secret,
        }
        return None
    if action not in ("enable", "disable", "delete", "test"):
        raise ApplicationError("invalid", "The form asked for nothing this page does.")
    endpoint = webhook_endpoint_access(
        user=request.user, endpoint_id=request.POST.get("endpoint", "")
    )
    if endpoint.workspace_id != workspace.pk:
        raise ApplicationError("not_found", "Webhook endpoint was not found.", status=404)
    if action in ("enable", "disable"):
        webhook_endpoint_update(endpoint=endpoint, user=request.user, enabled=action == "enable")
        return f"{endpoint.url}: {action}d."
    if action == "test":
        result = webhook_endpoint_test(endpoint=endpoint)
        how = "delivered" if result.ok else "failed"
        return f"Test event to {endpoint.url}: {how} ({result.response})."
    webhook_endpoint_delete(endpoint=endpoint)
    return f"{endpoint.url}: deleted, with its delivery log."


def _page(workspace, context: dict) -> dict:
    endpoints = list(selectors.webhook_endpoints(workspace=workspace))
    for endpoint in endpoints:
        endpoint.recent = list(selectors.webhook_deliveries(endpoint=endpoint)[:RECENT_DELIVERIES])
        for delivery in endpoint.recent:
            delivery.event_type = EVENT_TYPES[delivery.cause]
            attempts = list(delivery.attempt_log.all())
            delivery.last_attempt = attempts[-1] if attempts else None
    slack_channel = selectors.workspace_slack_channel(workspace=workspace)
    context["form"].setdefault("slack_channel", slack_channel)
    return {
        "workspace": workspace,
        "slack_channel": slack_channel,
        "slack_set_up": slack_is_set_up(),
        "endpoints": endpoints,
        "event_types": ALL_EVENT_TYPES,
        **context,
    }
