"""The decoding gate: every socket frame and every request body is decoded here, once, and
every request's URL checked, before any other code of Parley's sees it.

What passes is plain JSON of bounded size and depth whose numbers are of sane length and
finite, and whose strings (keys included) are text every database stores: no lone surrogate
(not encodable as UTF-8) and no NUL (PostgreSQL refuses it in text and jsonb alike, so it is
refused on every backend, and a payload means the same wherever it is stored). Anything else
is an ApplicationError with a code of its own, answered as a 400 or a ``ws.error``.
"""

import json
import math

from django.conf import settings
from django.core.exceptions import TooManyFieldsSent
from django.http import JsonResponse
from django.views.defaults import bad_request
from rest_framework.parsers import JSONParser

from core.errors import ApplicationError
from core.middleware import OnTheLoop

# Deeper than any payload of Parley's (a form answer is 3 levels inside its frame).
MAX_DEPTH = 32
# Longer than any number of Parley's: a seq or a count fits in 19 digits.
MAX_NUMBER_CHARS = 40


def decode_json(raw: str | bytes, *, limit: int, what: str = "The body"):
    """The JSON value in ``raw`` (text, or UTF-8 bytes) of at most ``limit`` bytes, checked as
    the module says; ApplicationError otherwise."""
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ApplicationError("too_large", f"{what} may be at most {limit} bytes.", status=413)
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ApplicationError("invalid_encoding", f"{what} is not UTF-8 text.") from None
    try:
        value = json.loads(
            raw,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_refuse_constant,
        )
    except RecursionError:
        raise _too_deep(what) from None
    except ValueError as error:
        # json's own words say where: "Expecting ',' delimiter: line 1 column 9 (char 8)".
        raise ApplicationError("invalid_json", f"{what} is not valid JSON: {error}.") from None
    check_value(value, what=what)
    return value


def check_value(value, *, what: str = "The body") -> None:
    """Depth and strings of an already decoded value (iteratively: no depth can overflow)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            check_text(item, what=what)
        elif isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                raise _too_deep(what)
            if isinstance(item, dict):
                for key, inner in item.items():
                    check_text(key, what=what)
                    pending.append((inner, depth + 1))
            else:
                pending.extend((inner, depth + 1) for inner in item)


def check_text(text: str, *, what: str = "The body") -> None:
    """Text every database stores: no NUL, no lone surrogate."""
    if "\x00" in text:
        raise ApplicationError("invalid_text", f"{what} contains a NUL character (\\u0000).")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ApplicationError(
            "invalid_text", f"{what} contains a lone surrogate (\\ud800 to \\udfff)."
        ) from None


def _parse_int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise _number_too_long()
    return int(text)


def _parse_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _number_too_long()
    number = float(text)
    if not math.isfinite(number):
        raise ApplicationError("invalid_number", f"{text} is too large a number.")
    return number


def _refuse_constant(name: str):
    raise ApplicationError("invalid_number", f"{name} is not a JSON number.")


def _number_too_long() -> ApplicationError:
    return ApplicationError(
        "invalid_number", f"Numbers may be at most {MAX_NUMBER_CHARS} characters long."
    )


def _too_deep(what: str) -> ApplicationError:
    return ApplicationError("too_deep", f"{what} is nested more than {MAX_DEPTH} levels deep.")


class GatedJSONParser(JSONParser):
    """DRF's JSON parser, through the gate: the one parser of Parley's API."""

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        if not raw:
            return {}
        return decode_json(raw, limit=settings.DATA_UPLOAD_MAX_MEMORY_SIZE)


class GatedUrlMiddleware(OnTheLoop):
    """Every request's path and query string through the gate, before any view reads them: a
    NUL (%00) in an id or a search would otherwise reach the database, which PostgreSQL
    refuses (a 500). The API answers 400 ``invalid_text`` in its error shape, pages with the
    400 page. (A URL can hold no lone surrogate: Django decodes it with replacement.)"""

    def process_request(self, request):
        try:
            _check_url(request)
        except ApplicationError as error:
            if request.path_info.startswith("/api/"):
                return JsonResponse({"error": error.as_dict()}, status=error.status)
            return bad_request(request, error)
        return None


def _check_url(request) -> None:
    try:
        query = request.GET
    except TooManyFieldsSent:
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
        raise ApplicationError(
            "too_many_parameters", f"The URL may have at most {limit} query parameters."
        ) from None
    check_text(request.path_info, what="The URL")
    for name, values in query.lists():
        for text in (name, *values):
            check_text(text, what="The URL")
