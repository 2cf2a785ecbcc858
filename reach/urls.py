"""Routes of the reach app, mounted at the root: its REST API under /api/, its pages, and the
endpoints other services call (Slack's interactions)."""

from django.urls import path  # noqa: F401

urlpatterns = [
    # Slack (reach.slack): ...
    # Webhooks and a workspace's channels (reach.webhooks_api, reach.pages): ...
    # A person's choices and where a question went (reach.apis, reach.pages): ...
]
