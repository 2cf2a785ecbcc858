"""The REST API of search: what was said, across the workspaces a person is a member of."""

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.response import Response

from conversations.apis.common import query_count, whole_number
from core.api import PooledApiView, error_responses

from .query import MAX_QUERY_CHARS
from .query import __doc__ as QUERY_SYNTAX
from .selectors import MAX_PER_PAGE, PER_PAGE, search_entries
from .text import SEARCHED_TYPES

MAX_PAGE = 100


class SnippetSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="Part of what was said, around the first match")
    highlights = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField(), min_length=2, max_length=2),
        help_text="Each match as [start, end) character offsets into `text`",
    )
    html = serializers.CharField(help_text="`text` escaped as HTML, each match in <mark>")


@extend_schema_serializer(component_name="SearchResult")
class ResultSerializer(serializers.Serializer):
    conversation = serializers.CharField()
    conversation_title = serializers.CharField()
    workspace = serializers.CharField(help_text="The workspace's slug")
    seq = serializers.IntegerField(help_text="The event's seq in its conversation")
    type = serializers.ChoiceField(choices=sorted(SEARCHED_TYPES))
    who = serializers.CharField(allow_null=True, help_text="A person's name; null: the agent")
    ts = serializers.CharField(help_text="When it was said")
    snippet = SnippetSerializer()
    url = serializers.CharField(help_text="The event's place: its conversation's page")


class SearchApi(PooledApiView):
    @extend_schema_serializer(component_name="SearchPage")
    class OutputSerializer(serializers.Serializer):
        query = serializers.CharField()
        page = serializers.IntegerField()
        results = ResultSerializer(many=True)
        has_next = serializers.BooleanField()

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "q", str, required=True, description=f"What to look for (at most {MAX_QUERY_CHARS})"
            ),
            OpenApiParameter("page", whole_number(1, MAX_PAGE), description="From 1 (default)"),
            OpenApiParameter(
                "per_page",
                whole_number(1, MAX_PER_PAGE),
                description=f"Results a page (default {PER_PAGE})",
            ),
        ],
        responses={200: OutputSerializer, **error_responses(400)},
        summary="Search what was said: inputs, steering, the agent's messages, questions, answers",
        description="Anyone signed in; only the workspaces they are a member of now. Newest "
        "first, a page at a time; each result names its conversation, the event's `seq` and "
        "`type`, `who` said it, when, a `snippet` with the matches' offsets (and as escaped "
        "HTML with `<mark>`), and `url`, the conversation's page opened at that event. 400 "
        "`invalid_query` for an empty or unusable query.\n\n" + (QUERY_SYNTAX or ""),
    )
    def get(self, request):
        query = request.query_params.get("q", "")
        page = query_count(request, "page", 1, MAX_PAGE)
        per_page = query_count(request, "per_page", PER_PAGE, MAX_PER_PAGE)
        found = search_entries(user=request.user, query=query, page=page, per_page=per_page)
        return Response(self.OutputSerializer({"query": query, "page": page, **found}).data)
