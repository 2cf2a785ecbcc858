"""Routes of the accounts app, mounted at the root: its pages and its REST API under /api/."""

from django.urls import path  # noqa: F401

urlpatterns = []
