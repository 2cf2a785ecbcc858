"""The DRF glue: the API's one error shape and its exception handler, strict input fields,
``PooledApiView``, a DRF view served whole from the runtime's database threads, and the views of
the API's schema and documentation (the API's token authentication is core.lockout's: DRF
imports it while its views are still loading)."""

import threading

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404, HttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework import exceptions as drf_exceptions
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView, exception_handler

from core.dbthreads import run_db
from core.errors import ApplicationError
from core.throttles import throttled


class ErrorSerializer(serializers.Serializer):
    """The body of every error answer: `code`, for programs to tell errors apart, and
    `message`, for people (some errors add fields beside them)."""

    error = inline_serializer(
        "ErrorBody", {"code": serializers.CharField(), "message": serializers.CharField()}
    )


def error_responses(*statuses: int, body: bool = False) -> dict:
    """An operation's error answers for the schema: those given, 401 (every endpoint needs a
    person) and 429 (a token from an address locked out); with ``body``, 413 and 415 too (too
    large, or not JSON)."""
    return {
        status: OpenApiResponse(ErrorSerializer, description=ERRORS[status])
        for status in sorted({*statuses, 401, 429, *((413, 415) if body else ())})
    }


# What each error status means, for the schema's readers.
ERRORS = {
    400: "Bad input: the message names the problem; nothing changed",
    401: "No credentials, or credentials that are not good",
    403: "You may see this but not do it (a viewer acting, an answer not yours to give)",
    404: "No such thing, or one in a workspace you are not in",
    409: "It conflicts with the state it is in (the code says how)",
    410: "The question expired",
    413: "The body is too large",
    415: "The body is not JSON",
    429: "Past one of your limits: come back after Retry-After seconds",
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


class StrictIntegerField(serializers.IntegerField):
    """A whole number that must be a JSON number (not "30", not true, not 1.5)."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


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
    drf_exceptions.ParseError: "invalid_json",
    drf_exceptions.ValidationError: "invalid",
}


def api_exception_handler(exc, context):
    """Render every API error as ``{"error": {"code": ..., "message": ...}}``."""
    if isinstance(exc, RequestDataTooBig):
        # Django refuses the body by its Content-Length before the parser's gate can.
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        exc = ApplicationError("too_large", f"The body may be at most {limit} bytes.", status=413)
    if isinstance(exc, drf_exceptions.Throttled):
        # A throttle of Parley's (core.throttles) refused it: the same answer as a rate checked
        # anywhere else.
        exc = throttled(exc.wait or 1)
    if isinstance(exc, ApplicationError):
        response = Response({"error": exc.as_dict()}, status=exc.status)
        if retry_after := getattr(exc, "retry_after", None):
            response["Retry-After"] = str(retry_after)
        return response
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


# Views served from the database threads ------------------------------------------------------


class PooledApiView(APIView):
    """A DRF view that Django awaits, its work done in the runtime's database threads.

    Under ASGI Django runs a sync view in a thread made for the request (which opens a
    database connection of its own, or takes one from the pool), then renders DRF's response
    in that thread in a second hop. A view built on this one is async to Django: DRF's
    dispatch as it is (authentication, permissions, parsing, the handler, its errors, the
    rendering) runs as one call in :mod:`core.dbthreads`, whose few threads live as
    long as the process, keep their connections, and bound how much of it requests may take
    at once. Its handlers stay DRF's sync methods, so serializers, authentication and the
    OpenAPI schema are as everywhere else in the API.

    For the requests people and bots make while turns run (answer, start, steer, stop, what is
    in flight, a page of events): what the pool does for them is the same kind of short work
    it does for turns. The rest of the API keeps Django's thread per request.
    """

    # Django marks the view a coroutine function (View.as_view) and awaits it.
    view_is_async = True

    async def dispatch(self, request, *args, **kwargs):
        return await run_db(self._dispatch_rendered, request, args, kwargs)

    def _dispatch_rendered(self, request, args, kwargs) -> HttpResponse:
        response = super().dispatch(request, *args, **kwargs)
        if not callable(getattr(response, "render", None)):
            return response
        # Rendered here, and handed on as the plain response it now is: Django would otherwise
        # render a template response in a thread of its own.
        response.render()
        return HttpResponse(response.content, status=response.status_code, headers=response.headers)


# The schema and its documentation ---------------------------------------------------------------

_one_schema_at_a_time = threading.Lock()


class SchemaView(SpectacularAPIView):
    """drf-spectacular's schema, made one request at a time: its generator is not safe across
    threads (it loads its extensions lazily, into class attributes shared by all), and Django
    runs each request's sync view in a thread of its own, so two first requests at once could
    fail with a 500 (drf-spectacular's issues 1122 and 1368)."""

    @extend_schema(exclude=True)
    def get(self, request, *args, **kwargs):
        with _one_schema_at_a_time:
            return super().get(request, *args, **kwargs)


class DocsView(SpectacularSwaggerSplitView):
    """Swagger UI's page, for GET (and HEAD) only: DRF would answer OPTIONS by rendering the
    page's template with none of what it shows (a 500); it is 405 instead."""

    http_method_names = ["get", "head"]


# Serializer fields from JSON schemas ---------------------------------------------------------


def field_for(schema: dict, *, name: str, **options) -> serializers.Field:
    """A DRF field for a value that ``schema`` (a JSON schema) describes, with its type and
    limits, so that what a JSON schema defines once is also what the OpenAPI schema says: a
    string (an enum: a choice), a boolean, an integer, a number, an array of such, or an object
    with properties (a serializer named ``name``, each property a field named after it)."""
    if description := schema.get("description"):
        options.setdefault("help_text", description)
    kind = schema.get("type")
    limits = {
        "minimum": "min_value",
        "maximum": "max_value",
        "minLength": "min_length",
        "maxLength": "max_length",
        "minItems": "min_length",
        "maxItems": "max_length",
    }
    bounds = {limits[key]: value for key, value in schema.items() if key in limits}
    if "enum" in schema:
        return serializers.ChoiceField(choices=schema["enum"], **options)
    if kind == "string":
        return serializers.CharField(**bounds, allow_blank=not bounds.get("min_length"), **options)
    if kind == "boolean":
        return serializers.BooleanField(**options)
    if kind in ("integer", "number"):
        field = serializers.IntegerField if kind == "integer" else serializers.FloatField
        return field(**bounds, **options)
    if kind == "array":
        child = field_for(schema.get("items", {}), name=name)
        return serializers.ListField(child=child, **bounds, **options)
    if kind == "object" and "properties" in schema:
        required = set(schema.get("required", ()))
        fields = {
            key: field_for(value, name=f"{name}{key.title()}", required=key in required)
            for key, value in schema["properties"].items()
        }
        return type(f"{name}Serializer", (serializers.Serializer,), fields)(**options)
    return serializers.JSONField(**options)
