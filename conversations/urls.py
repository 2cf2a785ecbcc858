"""API routes of the conversations app (mounted under /api/)."""

from django.urls import path

from . import apis

urlpatterns = [
    path("workspaces/", apis.WorkspaceListApi.as_view(), name="api-workspaces"),
    path("conversations/", apis.ConversationListCreateApi.as_view(), name="api-conversations"),
    path(
        "conversations/<str:conversation_id>/",
        apis.ConversationDetailApi.as_view(),
        name="api-conversation",
    ),
    path(
        "conversations/<str:conversation_id>/turns/",
        apis.TurnStartApi.as_view(),
        name="api-turn-start",
    ),
    path(
        "conversations/<str:conversation_id>/steer/",
        apis.TurnSteerApi.as_view(),
        name="api-turn-steer",
    ),
    path(
        "conversations/<str:conversation_id>/cancel/",
        apis.TurnCancelApi.as_view(),
        name="api-turn-cancel",
    ),
    path(
        "conversations/<str:conversation_id>/in-flight/",
        apis.ConversationInFlightApi.as_view(),
        name="api-conversation-in-flight",
    ),
    path(
        "conversations/<str:conversation_id>/history/",
        apis.ConversationHistoryApi.as_view(),
        name="api-conversation-history",
    ),
    path(
        "conversations/<str:conversation_id>/events/",
        apis.ConversationEventsApi.as_view(),
        name="api-conversation-events",
    ),
    path(
        "conversations/<str:conversation_id>/tail/",
        apis.ConversationTailApi.as_view(),
        name="api-conversation-tail",
    ),
    path("in-flight/", apis.InFlightListApi.as_view(), name="api-in-flight"),
]
