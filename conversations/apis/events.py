"""The REST API for a conversation's events: a page of them, a turn-by-turn history, and the
tail as Server-Sent Events."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_serializer,
)
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from core import slots
from core.api import (
    PooledApiView,
    error_responses,
)
from core.errors import ApplicationError, too_many
from core.lockout import api_token_id

from .. import revocation, selectors
from ..access import conversation_access
from ..events import check_seq_within, parse_seq
from ..sse import tail_finished, tail_finished_response, tail_response
from .common import (
    MAX_EVENTS_PAGE,
    EventSerializer,
    query_count,
    query_seq,
    whole_number,
)


class ConversationEventsApi(PooledApiView):
    @extend_schema_serializer(component_name="EventsPage")
    class OutputSerializer(serializers.Serializer):
        events = EventSerializer(many=True)
        latest_seq = serializers.IntegerField()
        next_after_seq = serializers.IntegerField()
        has_more = serializers.BooleanField()

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "after_seq", whole_number(), description="Events with a greater seq (default 0)"
            ),
            OpenApiParameter(
                "limit",
                whole_number(1, MAX_EVENTS_PAGE),
                description=f"At most this many (1-{MAX_EVENTS_PAGE}, default 100)",
            ),
        ],
        responses={200: OutputSerializer, **error_responses(400, 404)},
        summary="A page of a conversation's events, in seq order",
        description="Anyone in its workspace may read them. Answers the events with a seq "
        "greater than `after_seq`, oldest first, each the event envelope, with `latest_seq`, "
        "`next_after_seq` (the `after_seq` of the next page) and `has_more`. 400 for an "
        "`after_seq` past the conversation's latest.",
    )
    def get(self, request, conversation_id):
        conversation, _ = conversation_access(user=request.user, conversation_id=conversation_id)
        after_seq = query_seq(request, "after_seq")
        check_seq_within(after_seq, conversation.last_seq, "after_seq")
        limit = query_count(request, "limit", 100, MAX_EVENTS_PAGE)
        events = selectors.events_page(
            conversation_id=conversation.pk, after_seq=after_seq, limit=limit
        )
        next_after = events[-1].seq if events else after_seq
        body = {
            "events": events,
            "latest_seq": conversation.last_seq,
            "next_after_seq": next_after,
            "has_more": next_after < conversation.last_seq,
        }
        return Response(self.OutputSerializer(body).data)


MAX_HISTORY_TURNS = 100
MAX_HISTORY_EVENTS = 10_000


class ConversationHistoryApi(PooledApiView):
    @extend_schema_serializer(component_name="HistoryPage")
    class OutputSerializer(serializers.Serializer):
        events = EventSerializer(many=True)
        latest_seq = serializers.IntegerField(help_text="The conversation's, to go on from live")
        first_turn = serializers.CharField(
            allow_null=True, help_text="The earliest turn given: `before_turn` for the next page"
        )
        has_earlier = serializers.BooleanField()

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "turns",
                whole_number(1, MAX_HISTORY_TURNS),
                description=f"How many turns (1-{MAX_HISTORY_TURNS}, default 20)",
            ),
            OpenApiParameter(
                "events",
                whole_number(1, MAX_HISTORY_EVENTS),
                description=f"About how many events at most (1-{MAX_HISTORY_EVENTS}, default "
                f"{MAX_EVENTS_PAGE}): fewer turns when they are long, but always one",
            ),
            OpenApiParameter("before_turn", str, description="Turns before this one"),
        ],
        responses={200: OutputSerializer, **error_responses(400, 404)},
        summary="The latest turns, whole, the newest last (a page reads history backwards)",
        description="Anyone in its workspace may read them. Every event of each turn in seq "
        "order, except the text deltas of turns that ended (their `message.completed` carries "
        "the whole text); with the conversation's `latest_seq`, to go on live from, and "
        "`first_turn` and `has_earlier` to page further back.",
    )
    def get(self, request, conversation_id):
        conversation, _ = conversation_access(user=request.user, conversation_id=conversation_id)
        turns = query_count(request, "turns", 20, MAX_HISTORY_TURNS)
        before_turn = None
        if (before := request.query_params.get("before_turn")) is not None:
            before_turn = selectors.turn_of(conversation_id=conversation.pk, turn_id=before)
            if before_turn is None:
                raise ApplicationError(
                    "invalid_before_turn", "before_turn: no such turn in this conversation."
                )
        events = query_count(request, "events", MAX_EVENTS_PAGE, MAX_HISTORY_EVENTS)
        page = selectors.history_page(
            conversation=conversation, turns=turns, events=events, before_turn=before_turn
        )
        body = {
            "events": page.events,
            "latest_seq": page.latest_seq,
            "first_turn": page.first_turn,
            "has_earlier": page.has_earlier,
        }
        return Response(self.OutputSerializer(body).data)


# The stream as the schema declares it: text (generated clients read it whole, or stream it
# themselves), each frame's shape in words, its data the event envelope (the `Event` component).
TAIL_STREAM = OpenApiResponse(
    response=OpenApiTypes.STR,
    description=(
        "A stream of Server-Sent Events (text, not one JSON document), frames separated by a "
        "blank line. Each stored event is a frame `id: <seq>` + `data: <the event envelope as "
        "JSON>` (the `Event` schema), with no `event:` name, so an EventSource's `onmessage` sees "
        "them all; the first frame also carries `retry:` (milliseconds before reconnecting). "
        'The stream ends with `id: N`, `event: done` and `data: {"latest_seq": N}`, or, if it ends '
        'early, `event: error` and `data: {"error": {"code", "message"}}` (`access_removed`, '
        "or `fell_behind` with `last_event_id`: reconnect with Last-Event-ID). A `: keep-alive` "
        "comment comes every 15 s while nothing happens."
    ),
)


class ConversationTailApi(PooledApiView):
    renderer_classes = [JSONRenderer]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "from_seq", whole_number(), description="Replay events after this seq"
            ),
            OpenApiParameter(
                "Last-Event-ID",
                whole_number(),
                location=OpenApiParameter.HEADER,
                description="The last `id` you have, as a reconnecting EventSource sends it; "
                "wins over from_seq. At the conversation's latest seq while no turn runs: 204; "
                "past it: 400.",
            ),
        ],
        responses={
            (200, "text/event-stream"): TAIL_STREAM,
            204: OpenApiResponse(
                description="Nothing more will come: a reconnect whose Last-Event-ID is the "
                "conversation's latest seq while no turn is running (a newer turn since is given "
                "as a 200 stream). An EventSource stops reconnecting."
            ),
            **{
                (status, "application/json"): body
                for status, body in error_responses(400, 404, 429).items()
            },
        },
        summary="Tail a conversation as Server-Sent Events",
        description=(
            "Every stored event with seq > from_seq (or > Last-Event-ID), then live events until "
            "the turn that was active when you connected ends, then `event: done`; with no turn "
            "active it replays what is stored and ends. Anyone in the conversation's workspace "
            "may tail it, viewers too. A turn is tailable the moment starting it returns. The "
            "answer is `text/event-stream`: read it as a stream (or whole, once it ends), not as "
            "JSON. 429 `too_many_tails` (with Retry-After) when you have as many tails open as "
            "you may; errors are JSON."
        ),
    )
    def get(self, request, conversation_id):
        conversation, membership = conversation_access(
            user=request.user, conversation_id=conversation_id
        )
        # Both are checked: a bad from_seq is refused even beside a Last-Event-ID, which wins.
        after_seq = query_seq(request, "from_seq")
        last_event_id = request.headers.get("Last-Event-ID")
        if last_event_id is not None:
            after_seq = parse_seq(last_event_id, "Last-Event-ID")
        check_seq_within(
            after_seq,
            conversation.last_seq,
            "from_seq" if last_event_id is None else "Last-Event-ID",
        )
        # A reconnect whose tail ended (its `done` has an id, so an EventSource sends one): 204
        # stops the EventSource rather than giving it `done` again, every retry, for ever.
        if last_event_id is not None and tail_finished(conversation, after_seq=after_seq):
            return tail_finished_response()
        slot = slots.acquire_blocking(slots.TAILS, request.user.pk)
        if slot is None:
            most = slots.limit(slots.TAILS)
            raise too_many(
                "too_many_tails",
                f"You have {most} tails open, as many as you may; close one first.",
                retry_after=slots.RETRY_AFTER_SECONDS,
            )
        return tail_response(
            conversation,
            after_seq=after_seq,
            membership=membership,
            # The tail ends should the token be revoked, or the browser session signed out.
            held_with=revocation.request_credentials(request, api_token_id(request)),
            # Daphne's (see core.streaming): the tail waits for a client that stops reading.
            flow_factory=getattr(request._request, "scope", {}).get("parley.response_flow"),
            slot=slot,
        )

    def perform_content_negotiation(self, request, force=False):
        # Errors are JSON whatever the client accepts (an EventSource accepts only
        # text/event-stream); success is the event stream itself, not a rendered body.
        renderer = JSONRenderer()
        return renderer, renderer.media_type
