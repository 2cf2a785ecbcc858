"""Reads of the reach app: a workspace's webhook endpoints and channels, and an endpoint's
delivery log."""

from django.db.models import QuerySet

from conversations.models import Workspace

from .models import Channel, Delivery, WebhookEndpoint, WorkspaceReach


def webhook_endpoints(*, workspace: Workspace) -> QuerySet[WebhookEndpoint]:
    return WebhookEndpoint.objects.filter(workspace=workspace).select_related(
        "workspace", "created_by"
    )


def webhook_deliveries(*, endpoint: WebhookEndpoint) -> QuerySet[Delivery]:
    """The endpoint's delivery log, newest first, each delivery with its attempts."""
    return (
        Delivery.objects.filter(endpoint=endpoint, channel=Channel.WEBHOOK)
        .select_related("selection")
        .prefetch_related("attempt_log")
        .order_by("-created_at", "-pk")
    )


def workspace_slack_channel(*, workspace: Workspace) -> str:
    """The Slack channel a workspace's questions for anyone go to ('' for none)."""
    return (
        WorkspaceReach.objects.filter(workspace=workspace)
        .values_list("slack_channel", flat=True)
        .first()
        or ""
    )
