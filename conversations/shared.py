"""What both apps share: the one application error and its API shape, public ids, and how a
person appears in events and payloads.

It imports nothing of Parley's, so any module of either app may use it.
"""

import secrets

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404
from drf_spectacular.utils import inline_serializer
from rest_framework import exceptions as drf_exceptions
from rest_framework import serializers
from rest_framework.response import Response

# Errors --------------------------------------------------------------------------------------


class SaidToPeople(Exception):
    """An exception whose message is written for people: a failure it causes is shown to
    watchers as it is (see conversations.runtime.failures), where any other is summed up."""


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


class ErrorSerializer(serializers.Serializer):
    """The error body every API answers with (for the OpenAPI schema)."""

    error = inline_serializer(
        "ErrorBody", {"code": serializers.CharField(), "message": serializers.CharField()}
    )


def error_responses(*statuses: int, body: bool = False) -> dict:
    """An operation's error answers for the schema: those given, and 401 (every endpoint
    needs a person); with ``body``, 413 and 415 too (too large, or not JSON)."""
    return {
        status: ErrorSerializer
        for status in sorted({*statuses, 401, *((413, 415) if body else ())})
    }


# Strict input fields: DRF's own coerce ("true" and 1 are true, 123 is "123"); the API takes
# each value as the JSON type its schema gives, or refuses it.


class StrictCharField(serializers.CharField):
    """A string that must be a JSON string."""

    default_error_messages = {"invalid": "must be a string."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictSlugField(StrictCharField, serializers.SlugField):
    """A slug that must be a JSON string."""


class StrictBooleanField(serializers.BooleanField):
    """A boolean that must be a JSON boolean, true or false."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


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
    # Imported here: DRF's views read the parser setting, whose parser imports this module.
    from rest_framework.views import exception_handler

    if isinstance(exc, RequestDataTooBig):
        # Django refuses the body by its Content-Length before the parser's gate can.
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        exc = ApplicationError("too_large", f"The body may be at most {limit} bytes.", status=413)
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


# Ids -----------------------------------------------------------------------------------------
# Public ids are a short type prefix and 16 random hex digits, e.g. ``c_9f2c4e1a7b3d5c60``.


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def new_conversation_id() -> str:
    return _new_id("c")


def new_turn_id() -> str:
    return _new_id("t")


def new_selection_id() -> str:
    return _new_id("s")


# People --------------------------------------------------------------------------------------


def person(user) -> dict | None:
    """How a person appears in events and payloads: who started, steered, stopped, answered."""
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    return {
        "id": user.pk,
        "username": user.get_username(),
        "name": user.get_full_name() or user.get_username(),
    }
