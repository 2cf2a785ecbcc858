"""API routes of the conversations app (mounted under /api/)."""

from django.urls import path

from .apis import conversations, events, turns

urlpatterns = [
    path("workspaces/", conversations.WorkspaceListApi.as_view(), name="api-workspaces"),
    path(
        "conversations/",
        conversations.ConversationListCreateApi.as_view(),
        name="api-conversations",
    ),
    path(
        "conversations/<str:conversation_id>/",
        conversations.ConversationDetailApi.as_view(),
        name="api-conversation",
    ),
    path(
        "conversations/<str:conversation_id>/turns/",
        turns.TurnStartApi.as_view(),
        name="api-turn-start",
    ),
    path(
        "conversations/<str:conversation_id>/steer/",
        turns.TurnSteerApi.as_view(),
        name="api-turn-steer",
    ),
    path(
        "conversations/<str:conversation_id>/cancel/",
        turns.TurnCancelApi.as_view(),
        name="api-turn-cancel",
    ),
    path(
        "conversations/<str:conversation_id>/in-flight/",
        turns.ConversationInFlightApi.as_view(),
        name="api-conversation-in-flight",
    ),
    path(
        "conversations/<str:conversation_id>/history/",
        events.ConversationHistoryApi.as_view(),
        name="api-conversation-history",
    ),
    path(
        "conversations/<str:conversation_id>/events/",
        events.ConversationEventsApi.as_view(),
        name="api-conversation-events",
    ),
    path(
        "conversations/<str:conversation_id>/tail/",
        events.ConversationTailApi.as_view(),
        name="api-conversation-tail",
    ),
    path("in-flight/", turns.InFlightListApi.as_view(), name="api-in-flight"),
]
