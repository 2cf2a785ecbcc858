"""The REST API for workspaces, conversations, turns and events (thin: parse, call, answer)."""

from dataclasses import asdict

from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_serializer,
)
from rest_framework import serializers, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import (
    PooledApiView,
    StrictBooleanField,
    StrictCharField,
    StrictSlugField,
    error_responses,
)
from core.errors import ApplicationError

from . import seams, selectors, services
from .access import conversation_access, workspace_access
from .events import MAX_SEQ, check_seq_within, parse_seq
from .sse import tail_response

MAX_EVENTS_PAGE = 1000


def _whole_number(minimum: int = 0, maximum: int = MAX_SEQ) -> dict:
    """A query parameter's schema: a whole number from minimum to maximum."""
    return {"type": "integer", "minimum": minimum, "maximum": maximum}


def _query_seq(request, name: str, default: int = 0) -> int:
    """A whole number from the query string (at most a bigint); 400 ``invalid_<name>``."""
    raw = request.query_params.get(name)
    return default if raw is None else parse_seq(raw, name)


def _query_count(request, name: str, default: int, maximum: int) -> int:
    """A count from 1 to ``maximum`` from the query string; 400 ``invalid_<name>``."""
    count = _query_seq(request, name, default)
    if not 1 <= count <= maximum:
        raise ApplicationError(f"invalid_{name}", f"{name} must be from 1 to {maximum}.")
    return count


class StrictLimitOffsetPagination(LimitOffsetPagination):
    """``limit`` (1 to 1000) and ``offset`` read strictly: a bad one is refused with 400
    ``invalid_limit`` / ``invalid_offset`` rather than quietly replaced by the default."""

    max_limit = MAX_EVENTS_PAGE

    def get_limit(self, request):
        return _query_count(request, self.limit_query_param, self.default_limit, self.max_limit)

    def get_offset(self, request):
        return _query_seq(request, self.offset_query_param)

    def get_schema_operation_parameters(self, view):
        limit, offset = super().get_schema_operation_parameters(view)
        limit["schema"] = {**_whole_number(1, self.max_limit), "default": self.default_limit}
        limit["description"] = f"How many to give (1-{self.max_limit})"
        offset["schema"] = _whole_number()
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


class ConversationPermissionsSerializer(serializers.Serializer):
    rename = serializers.BooleanField()
    archive = serializers.BooleanField(help_text="Archive it, and bring it back")
    delete = serializers.BooleanField()


class ConversationOutputSerializer(serializers.Serializer):
    """A conversation as the caller sees it. The context gives ``user`` and, for a single
    conversation, ``role`` (a list's rows carry theirs)."""

    id = serializers.CharField()
    workspace = serializers.CharField(source="workspace.slug")
    title = serializers.CharField()
    agent = serializers.CharField()
    model = serializers.CharField(help_text="The model its agent uses ('' for its default)")
    created_by = PersonSerializer(allow_null=True)
    created_at = serializers.DateTimeField()
    last_activity_at = serializers.DateTimeField(
        help_text="When its newest event was stored (its creation, until it has one)"
    )
    archived = serializers.BooleanField(source="is_archived")
    archived_at = serializers.DateTimeField(allow_null=True)
    latest_seq = serializers.IntegerField(source="last_seq")
    active_turn = serializers.CharField(source="active_turn_id", allow_null=True)
    active_turn_status = serializers.CharField(allow_null=True)
    permissions = serializers.SerializerMethodField(help_text="What you may do to it")

    @extend_schema_field(ConversationPermissionsSerializer)
    def get_permissions(self, conversation) -> dict:
        role = self.context.get("role") or getattr(conversation, "role", None)
        rights = services.conversation_rights(
            conversation=conversation, user=self.context["user"], role=role
        )
        return asdict(rights)


def in_flight_payloads(conversations) -> list[dict]:
    """What a reconnecting client needs to know about each conversation's progress."""
    conversations = list(conversations)
    pending = seams.questions.get().pending_payloads(conversation_ids=[c.pk for c in conversations])
    return [in_flight_payload(c, pending[c.pk]) for c in conversations]


def in_flight_payload(conversation, pending_selections: list[dict]) -> dict:
    return {
        "conversation": conversation.pk,
        "in_flight": conversation.active_turn_id is not None,
        "turn": conversation.active_turn_id,
        "status": conversation.active_turn_status,
        # Every event is stored, so any conversation with events can be replayed or tailed.
        "has_buffer": conversation.last_seq > 0,
        "latest_seq": conversation.last_seq,
        "pending_selections": pending_selections,
    }


class InFlightOutputSerializer(serializers.Serializer):
    conversation = serializers.CharField()
    in_flight = serializers.BooleanField()
    turn = serializers.CharField(allow_null=True)
    status = serializers.CharField(allow_null=True)
    has_buffer = serializers.BooleanField()
    latest_seq = serializers.IntegerField()
    pending_selections = serializers.ListField(child=serializers.DictField())


class WorkspaceListApi(APIView):
    @extend_schema_serializer(component_name="Workspace")
    class OutputSerializer(serializers.Serializer):
        slug = serializers.CharField()
        name = serializers.CharField()
        role = serializers.CharField()

    @extend_schema(
        responses={200: OutputSerializer(many=True), **error_responses()},
        summary="Your workspaces and roles",
    )
    def get(self, request):
        workspaces = selectors.workspaces_for_user(user=request.user)
        return Response(self.OutputSerializer(workspaces, many=True).data)


class ConversationListCreateApi(APIView):
    pagination_class = StrictLimitOffsetPagination

    @extend_schema_serializer(component_name="ConversationCreate")
    class InputSerializer(serializers.Serializer):
        workspace = StrictSlugField()
        title = StrictCharField(max_length=200)
        agent = StrictCharField(max_length=50, required=False)
        model = StrictCharField(
            max_length=100,
            required=False,
            allow_blank=True,
            help_text="One of the models the agent offers (see PARLEY_LLM_MODELS)",
        )

    @extend_schema(
        parameters=[
            OpenApiParameter("workspace", str, description="Only this workspace (slug)"),
            OpenApiParameter(
                "q", str, description="Only those whose title contains this (any case)"
            ),
            OpenApiParameter(
                "archived",
                str,
                enum=["false", "true", "all"],
                description="false: not archived (the default without q); true: only "
                "archived; all: both (the default with q, as the home page searches)",
            ),
        ],
        responses={200: ConversationOutputSerializer(many=True), **error_responses(400)},
        summary="Conversations in your workspaces, latest activity first",
    )
    def get(self, request):
        search = request.query_params.get("q", "").strip()
        conversations = selectors.conversations_for_user(
            user=request.user,
            workspace_slug=request.query_params.get("workspace"),
            search=search,
            archived=_archived_filter(request.query_params.get("archived"), search),
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(conversations, request, view=self)
        output = ConversationOutputSerializer(page, many=True, context={"user": request.user})
        return paginator.get_paginated_response(output.data)

    @extend_schema(
        request=InputSerializer,
        responses={201: ConversationOutputSerializer, **error_responses(400, 403, 404, body=True)},
        summary="Start a conversation",
    )
    def post(self, request):
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        workspace, membership = workspace_access(
            user=request.user,
            slug=payload.validated_data["workspace"],
            act=True,
            doing="start conversations",
        )
        conversation = services.conversation_create(
            workspace=workspace,
            user=request.user,
            title=payload.validated_data["title"],
            agent=payload.validated_data.get("agent"),
            model=payload.validated_data.get("model", ""),
        )
        conversation = selectors.conversation_with_state(conversation_id=conversation.pk)
        output = ConversationOutputSerializer(
            conversation, context={"user": request.user, "role": membership.role}
        )
        return Response(output.data, status=status.HTTP_201_CREATED)


def _archived_filter(raw: str | None, search: str) -> bool | None:
    """The list's ``archived`` parameter: None keeps both. Without it, a search finds archived
    conversations too and a plain list leaves them out, as on the home page."""
    if raw is None:
        return None if search else False
    choices = {"true": True, "false": False, "all": None}
    if raw not in choices:
        raise ApplicationError("invalid", "archived: must be true, false or all.")
    return choices[raw]


class ConversationDetailApi(APIView):
    @extend_schema_serializer(component_name="ConversationChange")
    class InputSerializer(serializers.Serializer):
        title = StrictCharField(max_length=200, required=False)
        archived = StrictBooleanField(
            required=False, help_text="true archives it, false brings it back"
        )

        def validate(self, attrs):
            # A field it does not know would otherwise be dropped in silence, and the caller
            # left to think that it changed.
            unknown = sorted(set(self.initial_data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    f"{', '.join(unknown)}: cannot be changed; title and archived can."
                )
            return attrs

    @extend_schema(responses={200: ConversationOutputSerializer, **error_responses(404)})
    def get(self, request, conversation_id):
        conversation, membership = conversation_access(
            user=request.user, conversation_id=conversation_id
        )
        output = ConversationOutputSerializer(
            conversation, context={"user": request.user, "role": membership.role}
        )
        return Response(output.data)

    @extend_schema(
        request=InputSerializer,
        responses={
            200: ConversationOutputSerializer,
            **error_responses(400, 403, 404, body=True),
        },
        summary="Rename, archive or unarchive a conversation (owners, and members theirs)",
    )
    def patch(self, request, conversation_id):
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        conversation, membership = conversation_access(
            user=request.user, conversation_id=conversation_id
        )
        conversation = services.conversation_update(
            conversation=conversation,
            user=request.user,
            role=membership.role,
            **payload.validated_data,
        )
        output = ConversationOutputSerializer(
            conversation, context={"user": request.user, "role": membership.role}
        )
        return Response(output.data)

    @extend_schema(
        request=None,
        responses={204: None, **error_responses(403, 404, 409)},
        summary="Delete a conversation and everything in it (owners; 409 while a turn runs)",
    )
    def delete(self, request, conversation_id):
        conversation, membership = conversation_access(
            user=request.user, conversation_id=conversation_id
        )
        services.conversation_delete(
            conversation=conversation, user=request.user, role=membership.role
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class TurnStartApi(PooledApiView):
    @extend_schema_serializer(component_name="TurnStart")
    class InputSerializer(serializers.Serializer):
        input = StrictCharField(trim_whitespace=True)
        interactive = StrictBooleanField(default=True)
        confirm_writes = StrictBooleanField(
            default=True, help_text="false: the agent writes and renames files without asking"
        )

    @extend_schema_serializer(component_name="TurnStarted")
    class OutputSerializer(serializers.Serializer):
        turn = serializers.CharField()
        conversation = serializers.CharField()
        seq = serializers.IntegerField(help_text="The seq of the turn.started event")

    @extend_schema(
        request=InputSerializer,
        responses={202: OutputSerializer, **error_responses(400, 403, 404, 409, body=True)},
        summary="Start a turn (returns at once; the turn is tailable from that moment)",
    )
    def post(self, request, conversation_id):
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        conversation, _ = conversation_access(
            user=request.user, conversation_id=conversation_id, act=True, doing="start turns"
        )
        turn, started = services.turn_start(
            conversation=conversation,
            user=request.user,
            input=payload.validated_data["input"],
            interactive=payload.validated_data["interactive"],
            confirm_writes=payload.validated_data["confirm_writes"],
        )
        body = {"turn": turn.pk, "conversation": conversation.pk, "seq": started.seq}
        return Response(self.OutputSerializer(body).data, status=status.HTTP_202_ACCEPTED)


class TurnSteerApi(PooledApiView):
    @extend_schema_serializer(component_name="TurnSteer")
    class InputSerializer(serializers.Serializer):
        expected_turn_id = StrictCharField(help_text="The turn you mean to steer")
        input = StrictCharField(trim_whitespace=True)

    @extend_schema_serializer(component_name="TurnSteered")
    class OutputSerializer(serializers.Serializer):
        turn = serializers.CharField()
        seq = serializers.IntegerField(help_text="The seq of the turn.steered event")

    @extend_schema(
        request=InputSerializer,
        responses={202: OutputSerializer, **error_responses(400, 403, 404, 409, body=True)},
        summary="Add input to the active turn (409 no_active_turn / turn_mismatch)",
    )
    def post(self, request, conversation_id):
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        conversation, _ = conversation_access(
            user=request.user, conversation_id=conversation_id, act=True, doing="steer turns"
        )
        steered = services.turn_steer(
            conversation=conversation,
            user=request.user,
            expected_turn_id=payload.validated_data["expected_turn_id"],
            input=payload.validated_data["input"],
        )
        body = {"turn": steered.turn_id, "seq": steered.seq}
        return Response(self.OutputSerializer(body).data, status=status.HTTP_202_ACCEPTED)


class TurnCancelApi(PooledApiView):
    @extend_schema_serializer(component_name="TurnCancel")
    class InputSerializer(serializers.Serializer):
        turn_id = StrictCharField(help_text="The turn you mean to stop")

    @extend_schema_serializer(component_name="TurnCancelling")
    class OutputSerializer(serializers.Serializer):
        turn = serializers.CharField()
        status = serializers.CharField(help_text="Its status now; turn.cancelled follows")

    @extend_schema(
        request=InputSerializer,
        responses={202: OutputSerializer, **error_responses(400, 403, 404, 409, body=True)},
        summary="Stop the active turn (it ends with turn.cancelled)",
    )
    def post(self, request, conversation_id):
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        conversation, _ = conversation_access(
            user=request.user, conversation_id=conversation_id, act=True, doing="stop turns"
        )
        turn = services.turn_cancel(
            conversation=conversation, user=request.user, turn_id=payload.validated_data["turn_id"]
        )
        body = {"turn": turn.pk, "status": turn.status}
        return Response(self.OutputSerializer(body).data, status=status.HTTP_202_ACCEPTED)


class ConversationInFlightApi(PooledApiView):
    @extend_schema(responses={200: InFlightOutputSerializer, **error_responses(404)})
    def get(self, request, conversation_id):
        conversation, _ = conversation_access(user=request.user, conversation_id=conversation_id)
        (payload,) = in_flight_payloads([conversation])
        return Response(InFlightOutputSerializer(payload).data)


class InFlightListApi(PooledApiView):
    @extend_schema(
        responses={200: InFlightOutputSerializer(many=True), **error_responses()},
        summary="Every conversation you can see that has a turn in flight",
    )
    def get(self, request):
        payloads = in_flight_payloads(selectors.in_flight_for_user(user=request.user))
        return Response(InFlightOutputSerializer(payloads, many=True).data)


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
                "after_seq", _whole_number(), description="Events with a greater seq (default 0)"
            ),
            OpenApiParameter(
                "limit",
                _whole_number(1, MAX_EVENTS_PAGE),
                description=f"At most this many (1-{MAX_EVENTS_PAGE}, default 100)",
            ),
        ],
        responses={200: OutputSerializer, **error_responses(400, 404)},
        summary="A page of a conversation's events, in seq order",
    )
    def get(self, request, conversation_id):
        conversation, _ = conversation_access(user=request.user, conversation_id=conversation_id)
        after_seq = _query_seq(request, "after_seq")
        check_seq_within(after_seq, conversation.last_seq, "after_seq")
        limit = _query_count(request, "limit", 100, MAX_EVENTS_PAGE)
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
                _whole_number(1, MAX_HISTORY_TURNS),
                description=f"How many turns (1-{MAX_HISTORY_TURNS}, default 20)",
            ),
            OpenApiParameter(
                "events",
                _whole_number(1, MAX_HISTORY_EVENTS),
                description=f"About how many events at most (1-{MAX_HISTORY_EVENTS}, default "
                f"{MAX_EVENTS_PAGE}): fewer turns when they are long, but always one",
            ),
            OpenApiParameter("before_turn", str, description="Turns before this one"),
        ],
        responses={200: OutputSerializer, **error_responses(400, 404)},
        summary="The latest turns, whole, the newest last (a page reads history backwards)",
        description="Every event of each turn in seq order, except the text deltas of turns "
        "that ended (their `message.completed` carries the whole text).",
    )
    def get(self, request, conversation_id):
        conversation, _ = conversation_access(user=request.user, conversation_id=conversation_id)
        turns = _query_count(request, "turns", 20, MAX_HISTORY_TURNS)
        before_turn = None
        if (before := request.query_params.get("before_turn")) is not None:
            before_turn = selectors.turn_of(conversation_id=conversation.pk, turn_id=before)
            if before_turn is None:
                raise ApplicationError(
                    "invalid_before_turn", "before_turn: no such turn in this conversation."
                )
        events = _query_count(request, "events", MAX_EVENTS_PAGE, MAX_HISTORY_EVENTS)
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


class TailEventSerializer(serializers.Serializer):
    """One event of the stream: a stored event (its envelope), or `done` at the end."""

    id = serializers.CharField(required=False, help_text="The event's seq (none on `done`)")
    event = serializers.ChoiceField(
        choices=["message", "done"], help_text="`done` last, once the stream ends"
    )
    data = serializers.CharField(
        help_text='The event\'s envelope as JSON; on `done`, {"latest_seq": N}'
    )


class ConversationTailApi(PooledApiView):
    renderer_classes = [JSONRenderer]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "from_seq", _whole_number(), description="Replay events after this seq"
            ),
            OpenApiParameter(
                "Last-Event-ID",
                _whole_number(),
                location=OpenApiParameter.HEADER,
                description="Sent by reconnecting EventSource clients; wins over from_seq",
            ),
        ],
        responses={
            (200, "text/event-stream"): TailEventSerializer,
            **{
                (status, "application/json"): body
                for status, body in error_responses(400, 404).items()
            },
        },
        summary="Tail a conversation as Server-Sent Events",
        description=(
            "Every event with seq > from_seq, then live events until the turn that was active "
            "when you connected ends, then an `event: done`. Each frame carries `id: <seq>`; "
            "a `: keep-alive` comment comes every 15 s."
        ),
    )
    def get(self, request, conversation_id):
        conversation, membership = conversation_access(
            user=request.user, conversation_id=conversation_id
        )
        # Both are checked: a bad from_seq is refused even beside a Last-Event-ID, which wins.
        after_seq = _query_seq(request, "from_seq")
        if (last_event_id := request.headers.get("Last-Event-ID")) is not None:
            after_seq = parse_seq(last_event_id, "Last-Event-ID")
        check_seq_within(after_seq, conversation.last_seq)
        return tail_response(conversation, after_seq=after_seq, membership=membership)

    def perform_content_negotiation(self, request, force=False):
        # Errors are JSON whatever the client accepts (an EventSource accepts only
        # text/event-stream); success is the event stream itself, not a rendered body.
        renderer = JSONRenderer()
        return renderer, renderer.media_type
