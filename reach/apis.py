"""The REST API of what reaches people: a person's own notification settings
(``/api/me/notifications/``) and where a question went (``/api/selections/<id>/deliveries/``)."""

from datetime import time

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.apis.common import PersonSerializer
from conversations.events import format_ts
from core.api import StrictCharField, error_responses
from selection.access import selection_access

from .deliveries import deliveries_of, how_it_went, shown_reason, to_whom, went
from .models import Channel, Delivery, Preference, Reach
from .preferences import CHANNELS, preference_for, preference_update
from .reachable import reachable

TIME_OF_DAY = RegexValidator(
    r"^([01]\d|2[0-3]):[0-5]\d(:[0-5]\d)?$", "must be a time of day such as '22:00'."
)


def clock(moment: time | None) -> str | None:
    """A time of day as the settings show it: "22:00", or "22:00:30" with seconds."""
    if moment is None:
        return None
    return moment.isoformat(timespec="seconds" if moment.second else "minutes")


def _reach_field(channel: str) -> serializers.ChoiceField:
    return serializers.ChoiceField(
        choices=Reach.choices,
        help_text=f"Which questions reach you by {channel}: off (none), addressed (those "
        "addressed to you, reminders and escalations naming you), all (every question you may "
        "answer)",
    )


class EmailReachSerializer(serializers.Serializer):
    set_up = serializers.BooleanField(help_text="Whether this server sends email")
    address = serializers.CharField(help_text="Where it goes: your account's email")


class SlackReachSerializer(serializers.Serializer):
    set_up = serializers.BooleanField(help_text="Whether this server has a Slack app")
    matched = serializers.BooleanField(
        allow_null=True,
        help_text="Whether your email matched a Slack user (null: not looked up yet, or Slack "
        "is not set up)",
    )


class BrowserReachSerializer(serializers.Serializer):
    set_up = serializers.BooleanField(help_text="Always: notifications in an open Parley tab")


class ChannelsSerializer(serializers.Serializer):
    email = EmailReachSerializer()
    slack = SlackReachSerializer()
    browser = BrowserReachSerializer()


@extend_schema_serializer(component_name="Notifications")
class NotificationsSerializer(serializers.Serializer):
    email = _reach_field("email")
    slack = _reach_field("Slack")
    browser = _reach_field("browser notification")
    quiet_from = serializers.CharField(
        allow_null=True, help_text="Quiet hours start (your time zone); null: none"
    )
    quiet_until = serializers.CharField(
        allow_null=True, help_text="Quiet hours end: email and Slack wait until then"
    )
    timezone = serializers.CharField(help_text="Your time zone (IANA), e.g. Europe/Paris")
    chosen = serializers.BooleanField(help_text="false: you never chose, these are the defaults")
    channels = ChannelsSerializer(help_text="The channels set up on this server, for you")


def notifications_of(user, preference: Preference) -> dict:
    """The person's settings as the API gives them (and the page shows them)."""
    return {
        **{channel: getattr(preference, channel) for channel in CHANNELS},
        "quiet_from": clock(preference.quiet_from),
        "quiet_until": clock(preference.quiet_until),
        "timezone": preference.timezone,
        "chosen": preference.pk is not None,
        "channels": reachable(user),
    }


class NotificationsApi(APIView):
    @extend_schema_serializer(component_name="NotificationsChange")
    class InputSerializer(serializers.Serializer):
        email = _reach_field("email")
        slack = _reach_field("Slack")
        browser = _reach_field("browser notification")
        quiet_from = StrictCharField(
            allow_null=True,
            validators=[TIME_OF_DAY],
            help_text="Quiet hours start, HH:MM in your time zone; null for no quiet hours "
            "(with quiet_until)",
        )
        quiet_until = StrictCharField(
            allow_null=True,
            validators=[TIME_OF_DAY],
            help_text="Quiet hours end, HH:MM; may be earlier than the start (22:00 to 07:00)",
        )
        timezone = StrictCharField(max_length=64, help_text="An IANA time zone, e.g. Europe/Paris")

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            # Every field may be left out (it keeps its value).
            for field in self.fields.values():
                field.required = False

        def validate(self, attrs):
            unknown = sorted(set(self.initial_data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    f"{', '.join(unknown)}: not a setting; the settings are "
                    f"{', '.join(self.fields)}."
                )
            return attrs

    @extend_schema(
        responses={200: NotificationsSerializer, **error_responses()},
        summary="Your notification settings, and the channels set up for you",
        description="Anyone signed in, for themselves: which questions reach you by email, in "
        "Slack and in the browser (`off`, `addressed`: those addressed to you, `all`), your "
        "quiet hours and time zone, and which of those channels this server has set up.",
    )
    def get(self, request):
        preference = preference_for(request.user)
        return Response(NotificationsSerializer(notifications_of(request.user, preference)).data)

    @extend_schema(
        request=InputSerializer,
        responses={200: NotificationsSerializer, **error_responses(400, body=True)},
        summary="Change your notification settings (what you leave out stays as it is)",
        description="Anyone signed in, for themselves. Answers your settings as they now are; "
        "400 for a value that is not one of the choices, and nothing changes.",
    )
    def put(self, request):
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        preference = preference_update(user=request.user, **payload.validated_data)
        return Response(NotificationsSerializer(notifications_of(request.user, preference)).data)


@extend_schema_serializer(component_name="Delivery")
class DeliverySerializer(serializers.Serializer):
    id = serializers.CharField(help_text="Also its idempotency key (email Message-ID, webhook-id)")
    channel = serializers.ChoiceField(choices=Channel.choices)
    cause = serializers.ChoiceField(choices=Delivery.Cause.choices)
    went = serializers.CharField(help_text="Where it went, in words: 'Emailed Bob'")
    to = serializers.CharField(
        help_text="To whom: a person's name, a Slack channel, a webhook endpoint's site"
    )
    recipient = PersonSerializer(allow_null=True, help_text="The person, if it was for one")
    status = serializers.ChoiceField(choices=Delivery.Status.choices)
    status_text = serializers.CharField(help_text="Whether it worked, in words (server time)")
    reason = serializers.CharField(help_text="What went wrong, or why it was skipped")
    attempts = serializers.IntegerField()
    created_at = serializers.CharField()
    next_attempt_at = serializers.CharField(
        allow_null=True, help_text="While pending: when it is (next) tried"
    )
    sent_at = serializers.CharField(allow_null=True)

    def to_representation(self, delivery: Delivery):
        pending = delivery.status == Delivery.Status.PENDING
        return {
            "id": delivery.pk,
            "channel": delivery.channel,
            "cause": delivery.cause,
            "went": went(delivery),
            "to": to_whom(delivery),
            "recipient": PersonSerializer(delivery.recipient).data if delivery.recipient else None,
            "status": delivery.status,
            "status_text": how_it_went(delivery),
            "reason": shown_reason(delivery.reason),
            "attempts": delivery.attempts,
            "created_at": format_ts(delivery.created_at),
            "next_attempt_at": format_ts(delivery.next_attempt_at) if pending else None,
            "sent_at": format_ts(delivery.sent_at) if delivery.sent_at else None,
        }


class SelectionDeliveriesApi(APIView):
    @extend_schema(
        responses={200: DeliverySerializer(many=True), **error_responses(403, 404)},
        summary="Where a question went: each email, Slack message and webhook, and how it went",
        description="Who may read the question may read this. Answers each delivery of the "
        "question: its channel, why it was sent (asked, reminded, escalated, settled), to whom "
        "or where, and its status, in words too.",
    )
    def get(self, request, selection_id):
        selection = selection_access(user=request.user, selection_id=selection_id)
        deliveries = deliveries_of(selection_id=selection.pk)
        return Response(DeliverySerializer(deliveries, many=True).data)
