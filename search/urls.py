"""API routes of the search app (mounted under /api/)."""

from django.urls import path

from . import apis

urlpatterns = [path("search/", apis.SearchApi.as_view(), name="api-search")]
