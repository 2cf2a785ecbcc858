"""API routes of the selection app (mounted under /api/)."""

from django.urls import path

from . import apis

urlpatterns = [
    path("waiting/", apis.WaitingApi.as_view(), name="api-waiting"),
    path("selections/", apis.SelectionListApi.as_view(), name="api-selections"),
    path("selections/<str:selection_id>/", apis.SelectionDetailApi.as_view(), name="api-selection"),
    path(
        "selections/<str:selection_id>/reply/",
        apis.SelectionReplyApi.as_view(),
        name="api-selection-reply",
    ),
    path(
        "selections/<str:selection_id>/link/",
        apis.SelectionLinkApi.as_view(),
        name="api-selection-link",
    ),
    path(
        "selections/<str:selection_id>/browse/",
        apis.SelectionBrowseApi.as_view(),
        name="api-selection-browse",
    ),
]
