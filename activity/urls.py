"""API routes of the activity app (mounted under /api/)."""

from django.urls import path

from . import apis

urlpatterns = [
    path("me/conversations/", apis.RecentConversationsApi.as_view(), name="api-me-conversations"),
    path(
        "conversations/<str:conversation_id>/seen/",
        apis.ConversationSeenApi.as_view(),
        name="api-conversation-seen",
    ),
]
