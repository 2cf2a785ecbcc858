"""Django's error handlers, named in config/urls.py. API paths answer in the API's error shape;
pages get Parley's page (templates/404.html and the others), with the policy every page gets
from core.middleware."""

from django.http import JsonResponse
from django.views.defaults import bad_request, page_not_found, permission_denied, server_error


def _api_error(code: str, message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message}}, status=status)


def not_found(request, exception=None):
    if request.path.startswith("/api/"):
        return _api_error("not_found", f"No API endpoint at {request.path}.", 404)
    return page_not_found(request, exception)


def internal_error(request):
    """500.html is rendered with no context at all (no context processors, so no database):
    it shows even when the database is what failed."""
    if request.path.startswith("/api/"):
        return _api_error("server_error", "Something went wrong on our side.", 500)
    return server_error(request)


def forbidden(request, exception=None):
    if request.path.startswith("/api/"):
        return _api_error("forbidden", "You may not do that.", 403)
    return permission_denied(request, exception)


def invalid_request(request, exception=None):
    if request.path.startswith("/api/"):
        return _api_error("bad_request", "The request could not be understood.", 400)
    return bad_request(request, exception)
