"""Browser pages."""

from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import render
from django.views.defaults import page_not_found, server_error

from . import selectors


@login_required
def home(request):
    workspaces = selectors.workspaces_for_user(user=request.user)
    conversations = selectors.conversations_for_user(user=request.user)[:50]
    return render(request, "home.html", {"workspaces": workspaces, "conversations": conversations})


def _api_error(code: str, message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


def not_found(request, exception=None):
    """API paths answer in the API's error shape; pages get the usual page."""
    if request.path.startswith("/api/"):
        return _api_error("not_found", f"No API endpoint at {request.path}.", 404)
    return page_not_found(request, exception)


def internal_error(request):
    if request.path.startswith("/api/"):
        return _api_error("server_error", "Something went wrong on our side.", 500)
    return server_error(request)
