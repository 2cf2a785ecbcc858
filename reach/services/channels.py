"""A workspace's own channels, set by its owners: the Slack channel where its questions for
anyone go."""

import re

from django.db import transaction

from conversations.models import Workspace
from core.errors import ApplicationError

from ..models import WorkspaceReach

# A Slack channel's id, as Slack shows it ("C0123ABC"; private ones begin with G).
SLACK_CHANNEL = re.compile(r"[CG][A-Z0-9]{6,40}")


def workspace_slack_channel_set(*, workspace: Workspace, slack_channel: str) -> WorkspaceReach:
    """Set (or with '' clear) the workspace's Slack channel. Raises ApplicationError
    ``invalid`` for what is not a channel's id, changing nothing."""
    slack_channel = slack_channel.strip()
    if slack_channel and not SLACK_CHANNEL.fullmatch(slack_channel):
        raise ApplicationError(
            "invalid",
            "slack_channel: a Slack channel's id, such as C0123ABC (in Slack: the channel's "
            "details, at the bottom), or '' for none.",
        )
    with transaction.atomic():
        reach, _ = WorkspaceReach.objects.select_for_update().get_or_create(workspace=workspace)
        reach.slack_channel = slack_channel
        reach.save(update_fields=["slack_channel", "updated_at"])
    return reach
