"""The one application error kind, and the DRF handler that gives every API error one shape."""

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions as drf_exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler


class ApplicationError(Exception):
    """A request the domain refuses: a stable code, a message for people, an HTTP status."""

    def __init__(self, code: str, message: str, *, status: int = 400, extra: dict | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.extra = extra or {}

    def as_dict(self) -> dict:
        return {"code": self.code, "message": self.message, **self.extra}


def not_found(what: str) -> ApplicationError:
    return ApplicationError("not_found", f"{what} was not found.", status=404)


def forbidden(message: str) -> ApplicationError:
    return ApplicationError("forbidden", message, status=403)


def _validation_message(detail, prefix: str = "") -> str:
    """Flatten DRF's nested validation detail into one readable sentence."""
    if isinstance(detail, dict):
        parts = [_validation_message(value, f"{prefix}{key}.") for key, value in detail.items()]
        return "; ".join(parts)
    if isinstance(detail, list):
        return "; ".join(_validation_message(item, prefix) for item in detail)
    label = prefix.rstrip(".")
    if label in ("", "non_field_errors"):
        return str(detail)
    return f"{label}: {detail}"


_DRF_CODES = {
    drf_exceptions.NotAuthenticated: "not_authenticated",
    drf_exceptions.AuthenticationFailed: "authentication_failed",
    drf_exceptions.PermissionDenied: "forbidden",
    drf_exceptions.NotFound: "not_found",
    drf_exceptions.MethodNotAllowed: "method_not_allowed",
    drf_exceptions.NotAcceptable: "not_acceptable",
    drf_exceptions.UnsupportedMediaType: "unsupported_media_type",
    drf_exceptions.Throttled: "throttled",
    drf_exceptions.ParseError: "invalid_json",
    drf_exceptions.ValidationError: "invalid",
}


def api_exception_handler(exc, context):
    """Render every API error as ``{"error": {"code": ..., "message": ...}}``."""
    if isinstance(exc, ApplicationError):
        return Response({"error": exc.as_dict()}, status=exc.status)
    if isinstance(exc, Http404):
        exc = drf_exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = drf_exceptions.PermissionDenied()
    response = exception_handler(exc, context)
    if response is None:
        return None
    code = next((c for cls, c in _DRF_CODES.items() if isinstance(exc, cls)), "error")
    if isinstance(exc, drf_exceptions.ValidationError):
        message = _validation_message(exc.detail)
    else:
        message = str(exc.detail)
    response.data = {"error": {"code": code, "message": message}}
    return response
