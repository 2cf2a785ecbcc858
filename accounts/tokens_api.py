"""The REST API of a person's own API tokens: list them, make one (its key is in that answer
only), revoke one. A signed-in browser (with its CSRF token) or any of the person's tokens may
use it, for that person's tokens only. A token made with a token cannot outlive it: asked with
a token that expires, a new token without an expiry, or expiring later, is refused (400)."""

from datetime import timedelta

from django.utils import timezone
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import StrictCharField, StrictIntegerField, error_responses
from core.errors import ApplicationError
from core.lockout import api_token_id

from .tokens import NAME_MAX, token_create, token_for_person, token_revoke, tokens_of

MAX_DAYS = 3650


class StrictDateTimeField(serializers.DateTimeField):
    """An ISO 8601 date and time that must be a JSON string."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid", format="an ISO 8601 string")
        return super().to_internal_value(data)


@extend_schema_serializer(component_name="ApiToken")
class TokenOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    key_start = serializers.CharField(help_text="The key's first characters, to tell it apart")
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(
        allow_null=True, help_text="When it was last used (to the minute; null: never)"
    )
    expires_at = serializers.DateTimeField(
        allow_null=True, help_text="When it stops working (null: never)"
    )


@extend_schema_serializer(component_name="ApiTokenCreated")
class TokenCreatedSerializer(TokenOutputSerializer):
    key = serializers.CharField(
        help_text="The key (prl_…): shown in this answer only, keep it safe. Send it as "
        "Authorization: Token <key> (or Bearer <key>)."
    )


class MyTokensApi(APIView):
    @extend_schema_serializer(component_name="ApiTokenCreate")
    class InputSerializer(serializers.Serializer):
        name = StrictCharField(max_length=NAME_MAX, help_text="What the token is for")
        expires_at = StrictDateTimeField(
            required=False, allow_null=True, help_text="When it stops working (ISO 8601)"
        )
        expires_in_days = StrictIntegerField(
            required=False,
            allow_null=True,
            min_value=1,
            max_value=MAX_DAYS,
            help_text="Or: it stops working after so many days",
        )

        def validate(self, attrs):
            unknown = sorted(set(self.initial_data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    f"{', '.join(unknown)}: not known here; {', '.join(self.fields)} are."
                )
            if attrs.get("expires_at") and attrs.get("expires_in_days"):
                raise serializers.ValidationError("Give expires_at or expires_in_days, not both.")
            return attrs

    @extend_schema(
        responses={200: TokenOutputSerializer(many=True), **error_responses()},
        summary="Your API tokens",
        description="Your tokens that are not revoked, newest first: name, the key's first "
        "characters, when it was made, last used and expires. Never a key.",
    )
    def get(self, request):
        return Response(TokenOutputSerializer(tokens_of(request.user), many=True).data)

    @extend_schema(
        request=InputSerializer,
        responses={201: TokenCreatedSerializer, **error_responses(400, body=True)},
        summary="Make an API token; its key is in this answer only",
        description="Answers 201 with the token and its key, which no later answer shows. "
        "Optional expiry: expires_at (a time to come) or expires_in_days. Asked with a "
        "token that expires, the new one must expire no later (400 otherwise).",
    )
    def post(self, request):
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        expires_at = data.get("expires_at")
        if data.get("expires_in_days"):
            expires_at = timezone.now() + timedelta(days=data["expires_in_days"])
        _not_outliving(request, expires_at)
        token, key = token_create(
            user=request.user, name=data["name"], expires_at=expires_at, request=request
        )
        body = {**TokenOutputSerializer(token).data, "key": key}
        return Response(TokenCreatedSerializer(body).data, status=status.HTTP_201_CREATED)


def _not_outliving(request, expires_at) -> None:
    """A token made with an expiring token expires no later than it (else 400 ``invalid``):
    a key that leaks with an expiry cannot be turned into one without."""
    if api_token_id(request) is None or request.auth.expires_at is None:
        return
    limit = request.auth.expires_at
    if expires_at is None or expires_at > limit:
        raise ApplicationError(
            "invalid",
            f"expires_at: the token you are using expires at {limit.isoformat()}, and a "
            "token made with it cannot outlive it. Give an expiry no later than that (or "
            "make the token signed in, on the tokens page).",
        )


class MyTokenApi(APIView):
    @extend_schema(
        request=None,
        responses={204: None, **error_responses(404)},
        summary="Revoke one of your API tokens",
        description="It stops working at once on every edge: sockets opened with it close "
        "(4401), tails end (`token_revoked`), MCP sessions refuse every call. 404 for a token "
        "that is not yours, or already revoked.",
    )
    def delete(self, request, token_id):
        token = token_for_person(user=request.user, token_id=token_id)
        token_revoke(token=token, actor=request.user, request=request)
        return Response(status=status.HTTP_204_NO_CONTENT)
