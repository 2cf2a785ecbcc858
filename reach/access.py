"""Who may manage a workspace's channels and webhook endpoints: its owners. The rule is
conversations.access's, asked again on every request: a stranger learns nothing (404), a member
or a viewer is refused (403), and a membership revoked counts at once."""

from django.core.exceptions import PermissionDenied
from django.http import Http404

from conversations.access import membership_of, workspace_access
from conversations.models import Membership, Workspace
from core.errors import ApplicationError, forbidden, not_found

from .models import WebhookEndpoint


def _owner(membership: Membership, doing: str) -> None:
    if membership.role != Membership.Role.OWNER:
        raise forbidden(f"Only the workspace's owners may {doing}.")


def workspace_owner_access(*, user, slug: str, doing: str = "manage its channels") -> Workspace:
    """The workspace, if ``user`` owns it; ApplicationError 404 for strangers, 403 for others."""
    workspace, membership = workspace_access(user=user, slug=slug)
    _owner(membership, doing)
    return workspace


def page_refusal(error: ApplicationError) -> Exception:
    """An access refusal as the pages give it: 404 for strangers, 403 for the others."""
    if error.status == 404:
        return Http404(error.message)
    return PermissionDenied(error.message)


def webhook_endpoint_access(*, user, endpoint_id: str) -> WebhookEndpoint:
    """The endpoint, if ``user`` owns its workspace; 404 for strangers and unknown ids alike,
    403 for the workspace's members and viewers."""
    endpoint = (
        WebhookEndpoint.objects.select_related("workspace", "created_by")
        .filter(pk=endpoint_id)
        .first()
    )
    membership = membership_of(user=user, workspace_id=endpoint.workspace_id) if endpoint else None
    if membership is None:
        raise not_found("Webhook endpoint")
    _owner(membership, "manage its webhooks")
    return endpoint
