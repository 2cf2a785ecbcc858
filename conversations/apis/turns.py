"""The REST API for a conversation's turns: start, steer, Stop, and what is in flight."""

from drf_spectacular.utils import (
    extend_schema,
    extend_schema_serializer,
)
from rest_framework import serializers, status
from rest_framework.response import Response

from core.api import (
    PooledApiView,
    StrictBooleanField,
    StrictCharField,
    error_responses,
)
from core.throttles import TurnRateThrottle

from .. import hooks, selectors, services
from ..access import conversation_access


def in_flight_payloads(conversations) -> list[dict]:
    """What a reconnecting client needs to know about each conversation's progress."""
    conversations = list(conversations)
    pending = hooks.questions.get().pending_payloads(conversation_ids=[c.pk for c in conversations])
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


class TurnStartApi(PooledApiView):
    # PARLEY_TURN_RATE per person (429 with Retry-After past it), as for the socket's turn.start.
    throttle_classes = [TurnRateThrottle]

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
        responses={202: OutputSerializer, **error_responses(400, 403, 404, 409, 429, body=True)},
        summary="Start a turn (returns at once; the turn is tailable from that moment)",
        description="Owners and members may start a turn (a viewer gets 403) when none is "
        "active (409 `turn_in_progress` names the one that is). `input` is what the agent is "
        "asked; with `interactive: false` it never waits for a person (its questions are told "
        "at once that nobody can answer); with `confirm_writes: false` it writes and renames "
        "files without asking first. Answers 202 at once with the turn's id and the `seq` of "
        "its `turn.started` event: the turn runs on, its events readable from that seq "
        "(events, tail, WebSocket). 429 `throttled` past your rate of turns.",
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
        description="Owners and members may steer (a viewer gets 403). Name the turn you mean "
        "in `expected_turn_id`: 409 `no_active_turn` if none runs, `turn_mismatch` (naming the "
        "active `turn`) if another does. No new turn starts; the agent sees the input at its "
        "next step. Answers 202 with the turn and the `seq` of its `turn.steered` event.",
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
        description="Owners and members may stop a turn (a viewer gets 403). Name it in "
        "`turn_id`: 409 `no_active_turn` if none runs, `turn_mismatch` if another does. Its "
        "pending questions are cancelled. Answers 202 with the turn and its status now; the "
        "turn's last event, `turn.cancelled`, follows.",
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
    @extend_schema(
        responses={200: InFlightOutputSerializer, **error_responses(404)},
        summary="What is running in a conversation, and the questions it waits on",
        description="Anyone in its workspace may ask. Answers whether a turn is in flight, "
        "which (`turn`, `status`: `running` or `awaiting_input`), the conversation's "
        "`latest_seq` and its `pending_selections`: the questions waiting for an answer, each "
        "as `GET /api/selections/{id}/` gives it. What a client reconnecting needs first.",
    )
    def get(self, request, conversation_id):
        conversation, _ = conversation_access(user=request.user, conversation_id=conversation_id)
        (payload,) = in_flight_payloads([conversation])
        return Response(InFlightOutputSerializer(payload).data)


class InFlightListApi(PooledApiView):
    @extend_schema(
        responses={200: InFlightOutputSerializer(many=True), **error_responses()},
        summary="Every conversation you can see that has a turn in flight",
        description="Anyone signed in: for each conversation of your workspaces with a turn "
        "running or waiting on a person, what `GET /api/conversations/{id}/in-flight/` "
        "answers. An empty list when nothing runs.",
    )
    def get(self, request):
        payloads = in_flight_payloads(selectors.in_flight_for_user(user=request.user))
        return Response(InFlightOutputSerializer(payloads, many=True).data)
