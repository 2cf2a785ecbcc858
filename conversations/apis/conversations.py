"""The REST API for workspaces and conversations: list, create, read, rename, archive, delete."""

from dataclasses import asdict

from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_serializer,
)
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import (
    StrictBooleanField,
    StrictCharField,
    StrictSlugField,
    error_responses,
)
from core.errors import ApplicationError
from core.throttles import ConversationRateThrottle

from .. import selectors, services
from ..access import conversation_access, workspace_access
from .common import (
    PersonSerializer,
    StrictLimitOffsetPagination,
)


class ConversationPermissionsSerializer(serializers.Serializer):
    rename = serializers.BooleanField()
    archive = serializers.BooleanField(help_text="Archive it, and bring it back")
    delete = serializers.BooleanField()


class ConversationOutputSerializer(serializers.Serializer):
    """A conversation as you see it: your role in its workspace, and what you may do to it."""

    # The context gives ``user`` and, for a single conversation, ``role`` (a list's rows carry
    # theirs).

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


class WorkspaceListApi(APIView):
    @extend_schema_serializer(component_name="Workspace")
    class OutputSerializer(serializers.Serializer):
        slug = serializers.CharField()
        name = serializers.CharField()
        role = serializers.CharField()

    @extend_schema(
        responses={200: OutputSerializer(many=True), **error_responses()},
        summary="Your workspaces and roles",
        description="The workspaces you belong to, each with its `slug` (how the rest of the API "
        "names it), its `name` and your `role` there: `owner`, `member` or `viewer`. Anyone "
        "signed in; an empty list if you belong to none.",
    )
    def get(self, request):
        workspaces = selectors.workspaces_for_user(user=request.user)
        return Response(self.OutputSerializer(workspaces, many=True).data)


class ConversationListCreateApi(APIView):
    pagination_class = StrictLimitOffsetPagination
    # PARLEY_CONVERSATION_RATE per person, on POST (429 with Retry-After past it).
    throttle_classes = [ConversationRateThrottle]

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
        description="The conversations of every workspace you belong to, whatever your role, a "
        "page at a time (`limit`, `offset`; the answer has `count`, `next` and `previous`). "
        "Each has its `latest_seq`, its active turn if one runs, your `role` and `permissions` "
        "(whether you may rename, archive or delete it).",
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
        responses={
            201: ConversationOutputSerializer,
            **error_responses(400, 403, 404, 429, body=True),
        },
        summary="Start a conversation",
        description="Owners and members of the workspace may start one (a viewer gets 403). "
        "`agent` names the agent that answers in it (Parley's default when left out; "
        "400 `unknown_agent` for one that does not exist) and `model` one of the models that "
        "agent offers. Answers 201 with the conversation; 429 `throttled` past your rate.",
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

    @extend_schema(
        responses={200: ConversationOutputSerializer, **error_responses(404)},
        summary="One conversation",
        description="Anyone in its workspace may read it. Answers the conversation: its "
        "`latest_seq` (the seq of its last event, to read or tail from), its last activity, "
        "whether it is archived, its active turn if one runs, your `role` and `permissions`. "
        "404 for no such conversation or one in a workspace you are not in.",
    )
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
        description="Owners may change any conversation of the workspace, members those they "
        "started, viewers none (403). Send `title`, `archived` or both; any other field is "
        "refused (400) and nothing changes. Answers the conversation as it now is.",
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
        description="Owners of its workspace only. Deletes the conversation with its turns, "
        "events and questions, and answers 204 with no body. 409 `turn_in_progress` while a "
        "turn is active: stop it first.",
    )
    def delete(self, request, conversation_id):
        conversation, membership = conversation_access(
            user=request.user, conversation_id=conversation_id
        )
        services.conversation_delete(
            conversation=conversation, user=request.user, role=membership.role
        )
        return Response(status=status.HTTP_204_NO_CONTENT)
