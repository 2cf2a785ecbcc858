"""Routes of the reach app, mounted at the root: its REST API under /api/, its pages, and the
endpoints other services call (Slack's interactions)."""

from django.urls import path

from . import slack

urlpatterns = [
    # Slack (reach.slack): clicks on a question's buttons, signed by the Slack app.
    path("integrations/slack/interactions/", slack.slack_interactions, name="slack-interactions"),
    # Webhooks and a workspace's channels (reach.webhooks_api, reach.pages): ...
    # A person's choices and where a question went (reach.apis, reach.pages): ...
]
