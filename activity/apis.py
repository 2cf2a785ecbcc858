"""The REST API of the sidebar: your conversations by latest activity with what is new in each,
and marking one seen."""

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.access import conversation_access
from conversations.apis.common import query_count
from conversations.events import MAX_SEQ
from core.api import StrictIntegerField, error_responses

from . import selectors, services
from .selectors import UNREAD_CAP

MAX_LIST = 200


@extend_schema_serializer(component_name="RecentConversation")
class RecentConversationSerializer(serializers.Serializer):
    id = serializers.CharField()
    workspace = serializers.CharField(source="workspace.slug")
    workspace_name = serializers.CharField(source="workspace.name")
    title = serializers.CharField()
    last_activity_at = serializers.DateTimeField()
    latest_seq = serializers.IntegerField(source="last_seq")
    active_turn_status = serializers.CharField(
        allow_null=True, help_text="queued, running or awaiting_input; null when no turn is active"
    )
    running = serializers.SerializerMethodField(help_text="A turn is active")
    waiting = serializers.SerializerMethodField(help_text="Its turn waits on a question")
    seen_seq = serializers.IntegerField(help_text="How far you have seen it (0: never)")
    unread = serializers.IntegerField(
        help_text="Messages since you last saw it: inputs, the agent's completed messages, "
        f"questions and answers; counted up to {UNREAD_CAP} ({UNREAD_CAP} means that many or more)"
    )

    def get_running(self, conversation) -> bool:
        return conversation.active_turn_status is not None

    def get_waiting(self, conversation) -> bool:
        return conversation.active_turn_status == "awaiting_input"


class RecentConversationsApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "limit", int, description=f"How many to give (1-{MAX_LIST}, default 50)"
            )
        ],
        responses={200: RecentConversationSerializer(many=True), **error_responses(400)},
        summary="Your conversations by latest activity, with unread counts",
        description="The conversations (not archived) of every workspace you belong to, latest "
        "activity first: what the sidebar shows. Each says whether a turn runs in it "
        "(`running`), whether that turn waits on a question (`waiting`), how far you have seen "
        "it (`seen_seq`) and how many messages came after that (`unread`).",
    )
    def get(self, request):
        limit = query_count(request, "limit", 50, MAX_LIST)
        conversations = selectors.recent_conversations(user=request.user, limit=limit)
        return Response(RecentConversationSerializer(conversations, many=True).data)


class ConversationSeenApi(APIView):
    @extend_schema_serializer(component_name="ConversationSeenInput")
    class InputSerializer(serializers.Serializer):
        seq = StrictIntegerField(
            min_value=0, max_value=MAX_SEQ, help_text="The newest event you have seen"
        )

    @extend_schema_serializer(component_name="ConversationSeen")
    class OutputSerializer(serializers.Serializer):
        conversation = serializers.CharField()
        seen_seq = serializers.IntegerField()
        unread = serializers.IntegerField()

    @extend_schema(
        request=InputSerializer,
        responses={200: OutputSerializer, **error_responses(400, 404, body=True)},
        summary="Mark a conversation seen",
        description="You have seen the conversation up to event `seq`: its unread count starts "
        "from there. A mark never goes back (an older `seq` leaves it as it is) nor past the "
        "conversation's latest event. Anyone in its workspace, viewers too.",
    )
    def post(self, request, conversation_id: str):
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        conversation, _ = conversation_access(user=request.user, conversation_id=conversation_id)
        seen = services.conversation_seen(
            user=request.user, conversation=conversation, seq=payload.validated_data["seq"]
        )
        unread = selectors.unread_of(user=request.user, conversation_id=conversation.pk)
        return Response({"conversation": conversation.pk, "seen_seq": seen, "unread": unread})
