"""The REST API of a workspace's webhook endpoints (list, create, read, change, delete, their
delivery log, a test event) and its channels (the Slack channel): for its owners only."""

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.apis.common import PersonSerializer, StrictLimitOffsetPagination
from core.api import StrictBooleanField, StrictCharField, error_responses

from . import selectors
from .access import webhook_endpoint_access, workspace_owner_access
from .models import EVENT_TYPES
from .outbox import slack_is_set_up
from .services.channels import workspace_slack_channel_set
from .services.webhooks import (
    ALL_EVENT_TYPES,
    webhook_endpoint_create,
    webhook_endpoint_delete,
    webhook_endpoint_test,
    webhook_endpoint_update,
)


class EventTypesField(serializers.ListField):
    """A list of event types (the service checks them, and says which one is not known)."""

    child = serializers.ChoiceField(choices=ALL_EVENT_TYPES)


def _refuse_unknown(serializer: serializers.Serializer, attrs: dict) -> dict:
    # A field it does not know would otherwise be dropped in silence, and the caller left to
    # think that it changed.
    unknown = sorted(set(serializer.initial_data) - set(serializer.fields))
    if unknown:
        raise serializers.ValidationError(
            f"{', '.join(unknown)}: not known here; {', '.join(serializer.fields)} are."
        )
    return attrs


@extend_schema_serializer(component_name="WebhookEndpoint")
class EndpointOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    workspace = serializers.CharField(source="workspace.slug")
    url = serializers.CharField()
    description = serializers.CharField()
    event_types = serializers.ListField(child=serializers.CharField())
    enabled = serializers.BooleanField()
    failures_in_a_row = serializers.IntegerField(
        help_text="Deliveries that failed for good in a row (a success resets it)"
    )
    disabled_reason = serializers.CharField(help_text="Why it was disabled ('' if it is not)")
    created_by = PersonSerializer(allow_null=True)
    created_at = serializers.DateTimeField()


@extend_schema_serializer(component_name="WebhookEndpointCreated")
class EndpointCreatedSerializer(EndpointOutputSerializer):
    secret = serializers.CharField(
        help_text="The signing secret (whsec_…): shown in this answer only, keep it safe"
    )


class WebhookEndpointListCreateApi(APIView):
    @extend_schema_serializer(component_name="WebhookEndpointCreate")
    class InputSerializer(serializers.Serializer):
        url = StrictCharField(help_text="Where deliveries are POSTed (http or https)")
        description = StrictCharField(required=False, allow_blank=True)
        event_types = EventTypesField(
            required=False, help_text="The event types it takes (all of them if not given)"
        )

        def validate(self, attrs):
            return _refuse_unknown(self, attrs)

    @extend_schema(
        responses={200: EndpointOutputSerializer(many=True), **error_responses(403, 404)},
        summary="A workspace's webhook endpoints (owners)",
        description="Owners of the workspace only (members and viewers get 403). Answers each "
        "endpoint: its URL, description, event types and whether it is enabled; never its "
        "secret.",
    )
    def get(self, request, slug):
        workspace = workspace_owner_access(user=request.user, slug=slug, doing="see its webhooks")
        endpoints = selectors.webhook_endpoints(workspace=workspace)
        return Response(EndpointOutputSerializer(endpoints, many=True).data)

    @extend_schema(
        request=InputSerializer,
        responses={
            201: EndpointCreatedSerializer,
            **error_responses(400, 403, 404, 409, body=True),
        },
        summary="Add a webhook endpoint (owners); its secret is in this answer only",
        description="Owners of the workspace only. Answers 201 with the endpoint and its signing "
        "secret, which no later answer shows: keep it to verify the signatures of what "
        "Parley sends there.",
    )
    def post(self, request, slug):
        workspace = workspace_owner_access(user=request.user, slug=slug, doing="add webhooks")
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        endpoint = webhook_endpoint_create(
            workspace=workspace, user=request.user, **payload.validated_data
        )
        return Response(EndpointCreatedSerializer(endpoint).data, status=status.HTTP_201_CREATED)


class WebhookEndpointDetailApi(APIView):
    @extend_schema_serializer(component_name="WebhookEndpointChange")
    class InputSerializer(serializers.Serializer):
        url = StrictCharField(required=False)
        description = StrictCharField(required=False, allow_blank=True)
        event_types = EventTypesField(required=False)
        enabled = StrictBooleanField(
            required=False,
            help_text="true enables it again (clearing its failures), false stops it",
        )

        def validate(self, attrs):
            return _refuse_unknown(self, attrs)

    @extend_schema(
        responses={200: EndpointOutputSerializer, **error_responses(403, 404)},
        summary="A webhook endpoint (owners; never its secret)",
        description="Owners of its workspace only. Answers the endpoint, without its secret.",
    )
    def get(self, request, endpoint_id):
        endpoint = webhook_endpoint_access(user=request.user, endpoint_id=endpoint_id)
        return Response(EndpointOutputSerializer(endpoint).data)

    @extend_schema(
        request=InputSerializer,
        responses={200: EndpointOutputSerializer, **error_responses(400, 403, 404, body=True)},
        summary="Change a webhook endpoint's URL, description, event types, or enable it",
        description="Owners of its workspace only. What you leave out stays as it is. Answers "
        "the endpoint as it now is, without its secret.",
    )
    def patch(self, request, endpoint_id):
        endpoint = webhook_endpoint_access(user=request.user, endpoint_id=endpoint_id)
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        endpoint = webhook_endpoint_update(
            endpoint=endpoint, user=request.user, **payload.validated_data
        )
        return Response(EndpointOutputSerializer(endpoint).data)

    @extend_schema(
        request=None,
        responses={204: None, **error_responses(403, 404)},
        summary="Delete a webhook endpoint and its delivery log",
        description="Owners of its workspace only. Answers 204 with no body; nothing more is "
        "sent there.",
    )
    def delete(self, request, endpoint_id):
        endpoint = webhook_endpoint_access(user=request.user, endpoint_id=endpoint_id)
        webhook_endpoint_delete(endpoint=endpoint)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AttemptSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    ok = serializers.BooleanField()
    response = serializers.CharField(help_text="What the endpoint answered, or what went wrong")


class WebhookDeliveryListApi(APIView):
    pagination_class = StrictLimitOffsetPagination

    @extend_schema_serializer(component_name="WebhookDelivery")
    class OutputSerializer(serializers.Serializer):
        id = serializers.CharField(help_text="Its webhook-id: the same on every attempt")
        event_type = serializers.SerializerMethodField()
        question = serializers.CharField(source="selection_id")
        conversation = serializers.CharField(source="selection.conversation_id")
        status = serializers.CharField(help_text="pending, sent, failed (for good) or skipped")
        reason = serializers.CharField(help_text="Why it failed or was skipped")
        created_at = serializers.DateTimeField()
        sent_at = serializers.DateTimeField(allow_null=True)
        next_attempt_at = serializers.SerializerMethodField()
        attempts = AttemptSerializer(source="attempt_log", many=True)

        def get_event_type(self, delivery) -> str:
            return EVENT_TYPES[delivery.cause]

        def get_next_attempt_at(self, delivery) -> str | None:
            if delivery.status != delivery.Status.PENDING:
                return None
            return serializers.DateTimeField().to_representation(delivery.next_attempt_at)

    @extend_schema(
        responses={200: OutputSerializer(many=True), **error_responses(400, 403, 404)},
        summary="A webhook endpoint's delivery log, newest first, with every attempt",
        description="Owners of its workspace only. A page at a time (`limit`, `offset`): each "
        "delivery (its webhook-id, event, question, status) with every attempt made: when it "
        "started and finished, whether it worked, what the endpoint answered.",
    )
    def get(self, request, endpoint_id):
        endpoint = webhook_endpoint_access(user=request.user, endpoint_id=endpoint_id)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(
            selectors.webhook_deliveries(endpoint=endpoint), request, view=self
        )
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)


class WebhookEndpointTestApi(APIView):
    @extend_schema_serializer(component_name="WebhookTest")
    class OutputSerializer(serializers.Serializer):
        ok = serializers.BooleanField(help_text="Whether the endpoint answered 2xx")
        response = serializers.CharField(help_text="What it answered, or what went wrong")

    @extend_schema(
        request=None,
        responses={200: OutputSerializer, **error_responses(403, 404)},
        summary="Send a webhook endpoint a signed webhook.test event now",
        description="Owners of its workspace only. Sends the event at once, signed as every "
        "delivery is, and answers how it went: whether the endpoint took it, and its answer.",
    )
    def post(self, request, endpoint_id):
        endpoint = webhook_endpoint_access(user=request.user, endpoint_id=endpoint_id)
        result = webhook_endpoint_test(endpoint=endpoint)
        return Response(self.OutputSerializer(result).data)


class WorkspaceChannelsApi(APIView):
    @extend_schema_serializer(component_name="WorkspaceChannelsChange")
    class InputSerializer(serializers.Serializer):
        slack_channel = StrictCharField(
            allow_blank=True, max_length=80, help_text="A Slack channel's id (C0123ABC), or ''"
        )

        def validate(self, attrs):
            return _refuse_unknown(self, attrs)

    @extend_schema_serializer(component_name="WorkspaceChannels")
    class OutputSerializer(serializers.Serializer):
        slack_channel = serializers.CharField(
            help_text="Where its questions for anyone are posted in Slack ('' for nowhere)"
        )
        slack_set_up = serializers.BooleanField(
            help_text="Whether this server has a Slack app (PARLEY_SLACK_BOT_TOKEN and "
            "PARLEY_SLACK_SIGNING_SECRET)"
        )

    def _answer(self, workspace) -> Response:
        channels = {
            "slack_channel": selectors.workspace_slack_channel(workspace=workspace),
            "slack_set_up": slack_is_set_up(),
        }
        return Response(self.OutputSerializer(channels).data)

    @extend_schema(
        responses={200: OutputSerializer, **error_responses(403, 404)},
        summary="A workspace's channels (owners)",
        description="Owners of the workspace only. Answers where the workspace's questions are "
        "posted: its Slack channel, if it has one.",
    )
    def get(self, request, slug):
        return self._answer(workspace_owner_access(user=request.user, slug=slug))

    @extend_schema(
        request=InputSerializer,
        responses={200: OutputSerializer, **error_responses(400, 403, 404, body=True)},
        summary="Set a workspace's Slack channel (owners)",
        description="Owners of the workspace only. Answers the workspace's channels as they "
        "now are; 400 for a channel that is not a Slack channel id.",
    )
    def put(self, request, slug):
        workspace = workspace_owner_access(user=request.user, slug=slug)
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        workspace_slack_channel_set(workspace=workspace, **payload.validated_data)
        return self._answer(workspace)
