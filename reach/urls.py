"""Routes of the reach app, mounted at the root: its REST API under /api/, its pages, and the
endpoints other services call (Slack's interactions)."""

from django.urls import path

from . import apis, settings_page, slack, webhooks_api, workspace_pages

urlpatterns = [
    # Slack (reach.slack): clicks on a question's buttons, signed by the Slack app.
    path("integrations/slack/interactions/", slack.slack_interactions, name="slack-interactions"),
    # Webhooks and a workspace's channels (reach.webhooks_api, reach.workspace_pages).
    path(
        "api/workspaces/<slug:slug>/webhooks/",
        webhooks_api.WebhookEndpointListCreateApi.as_view(),
        name="api-webhooks",
    ),
    path(
        "api/webhooks/<str:endpoint_id>/",
        webhooks_api.WebhookEndpointDetailApi.as_view(),
        name="api-webhook",
    ),
    path(
        "api/webhooks/<str:endpoint_id>/deliveries/",
        webhooks_api.WebhookDeliveryListApi.as_view(),
        name="api-webhook-deliveries",
    ),
    path(
        "api/webhooks/<str:endpoint_id>/test/",
        webhooks_api.WebhookEndpointTestApi.as_view(),
        name="api-webhook-test",
    ),
    path(
        "api/workspaces/<slug:slug>/channels/",
        webhooks_api.WorkspaceChannelsApi.as_view(),
        name="api-workspace-channels",
    ),
    path(
        "workspaces/<slug:slug>/settings/",
        workspace_pages.workspace_settings_page,
        name="workspace-settings",
    ),
    # A person's choices and where a question went (reach.apis, reach.settings_page).
    path("api/me/notifications/", apis.NotificationsApi.as_view(), name="api-notifications"),
    path(
        "api/selections/<str:selection_id>/deliveries/",
        apis.SelectionDeliveriesApi.as_view(),
        name="api-selection-deliveries",
    ),
    path(
        "settings/notifications/",
        settings_page.notification_settings,
        name="notification-settings",
    ),
]
