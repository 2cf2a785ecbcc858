"""What the API's views share: query parameters read strictly, pagination, and the person and
event serializers."""

from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination

from core.errors import ApplicationError

from ..events import MAX_SEQ, parse_seq

MAX_EVENTS_PAGE = 1000


def whole_number(minimum: int = 0, maximum: int = MAX_SEQ) -> dict:
    """A query parameter's schema: a whole number from minimum to maximum."""
    return {"type": "integer", "minimum": minimum, "maximum": maximum}


def query_seq(request, name: str, default: int = 0) -> int:
    """A whole number from the query string (at most a bigint); 400 ``invalid_<name>``."""
    raw = request.query_params.get(name)
    return default if raw is None else parse_seq(raw, name)


def query_count(request, name: str, default: int, maximum: int) -> int:
    """A count from 1 to ``maximum`` from the query string; 400 ``invalid_<name>``."""
    count = query_seq(request, name, default)
    if not 1 <= count <= maximum:
        raise ApplicationError(f"invalid_{name}", f"{name} must be from 1 to {maximum}.")
    return count


class StrictLimitOffsetPagination(LimitOffsetPagination):
    """``limit`` (1 to 1000) and ``offset`` read strictly: a bad one is refused with 400
    ``invalid_limit`` / ``invalid_offset`` rather than quietly replaced by the default."""

    max_limit = MAX_EVENTS_PAGE

    def get_limit(self, request):
        return query_count(request, self.limit_query_param, self.default_limit, self.max_limit)

    def get_offset(self, request):
        return query_seq(request, self.offset_query_param)

    def get_schema_operation_parameters(self, view):
        limit, offset = super().get_schema_operation_parameters(view)
        limit["schema"] = {**whole_number(1, self.max_limit), "default": self.default_limit}
        limit["description"] = f"How many to give (1-{self.max_limit})"
        offset["schema"] = whole_number()
        return [limit, offset]


class PersonSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    username = serializers.CharField(source="get_username")
    name = serializers.SerializerMethodField()

    def get_name(self, user) -> str:
        return user.get_full_name() or user.get_username()


class EventSerializer(serializers.Serializer):
    """The event envelope (see the contract): the same shape on every channel."""

    seq = serializers.IntegerField()
    type = serializers.CharField()
    conversation = serializers.CharField()
    turn = serializers.CharField()
    ts = serializers.CharField()
    data = serializers.JSONField()

    def to_representation(self, instance):
        return instance.to_envelope()
