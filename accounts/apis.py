"""The REST API of a workspace's members, invitations and audit log: for its owners only (a
member or viewer gets 403, a stranger 404)."""

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.apis.common import PersonSerializer, StrictLimitOffsetPagination
from conversations.models import Membership
from core.api import StrictCharField, error_responses
from core.errors import ApplicationError, not_found
from reach.access import workspace_owner_access

from .audit_log import workspace_audit
from .invitations import invitation_revoke, invitation_send
from .members import (
    member_remove,
    member_role_change,
    members,
    ownership_transfer,
)
from .models import Invitation

MANAGE = "manage its members"


def _refuse_unknown(serializer: serializers.Serializer, attrs: dict) -> dict:
    unknown = sorted(set(serializer.initial_data) - set(serializer.fields))
    if unknown:
        raise serializers.ValidationError(
            f"{', '.join(unknown)}: not known here; {', '.join(serializer.fields)} are."
        )
    return attrs


class StrictInput(serializers.Serializer):
    def validate(self, attrs):
        return _refuse_unknown(self, attrs)


@extend_schema_serializer(component_name="Member")
class MemberSerializer(serializers.Serializer):
    person = PersonSerializer(source="user")
    email = serializers.EmailField(source="user.email")
    role = serializers.CharField(help_text="owner, member or viewer")
    source = serializers.CharField(help_text="How they came in: admin, invitation or sso")
    joined_at = serializers.DateTimeField(source="created_at")
    last_seen = serializers.DateTimeField(
        allow_null=True,
        help_text="The later of their last sign-in and the last use of one of their API tokens",
    )


@extend_schema_serializer(component_name="Invitation")
class InvitationSerializer(serializers.Serializer):
    id = serializers.CharField()
    workspace = serializers.CharField(source="workspace.slug")
    email = serializers.EmailField()
    role = serializers.CharField()
    invited_by = PersonSerializer(allow_null=True)
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    accepted_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)


@extend_schema_serializer(component_name="AuditEntry")
class AuditEntrySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    at = serializers.DateTimeField()
    action = serializers.CharField()
    actor = serializers.CharField(source="actor_name", help_text="Username ('' for nobody)")
    subject = serializers.CharField(source="subject_name", help_text="Username or email")
    workspace = serializers.CharField(source="workspace_slug")
    address = serializers.CharField(allow_null=True)
    detail = serializers.DictField()


class InvitationListCreateApi(APIView):
    @extend_schema_serializer(component_name="InvitationCreate")
    class InputSerializer(StrictInput):
        email = StrictCharField(help_text="Whom to invite")
        role = serializers.ChoiceField(choices=Membership.Role.values, default="member")

    @extend_schema(
        responses={200: InvitationSerializer(many=True), **error_responses(403, 404)},
        summary="A workspace's pending invitations (owners)",
        description="Owners only. The invitations not yet accepted, revoked or expired.",
    )
    def get(self, request, slug):
        workspace = workspace_owner_access(user=request.user, slug=slug, doing="see invitations")
        rows = (
            Invitation.objects.filter(workspace=workspace)
            .pending()
            .select_related("workspace", "invited_by")
        )
        return Response(InvitationSerializer(rows, many=True).data)

    @extend_schema(
        request=InputSerializer,
        responses={201: InvitationSerializer, **error_responses(400, 403, 404, 409, body=True)},
        summary="Invite someone by email (owners)",
        description="Owners only. Emails a signed link, good for PARLEY_INVITATION_DAYS and "
        "once. Inviting an address with a pending invitation replaces it (the old link stops "
        "working). 409 `already_member` when the address is already in the workspace (nothing "
        "is sent), 409 `email_not_set_up` when the server has no email, 502 `email_failed` "
        "when the mail server refused it (nothing is kept).",
    )
    def post(self, request, slug):
        workspace = workspace_owner_access(user=request.user, slug=slug, doing="invite people")
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        invitation = invitation_send(
            workspace=workspace, invited_by=request.user, request=request, **payload.validated_data
        )
        return Response(InvitationSerializer(invitation).data, status=status.HTTP_201_CREATED)


class InvitationDetailApi(APIView):
    @extend_schema(
        request=None,
        responses={200: InvitationSerializer, **error_responses(403, 404, 409)},
        summary="Revoke a pending invitation (owners)",
        description="Owners of its workspace only. Its link stops working. 409 `not_pending` "
        "for one already accepted, revoked or expired.",
    )
    def delete(self, request, invitation_id):
        invitation = Invitation.objects.select_related("workspace").filter(pk=invitation_id).first()
        if invitation is None:
            raise not_found("Invitation")
        try:
            workspace_owner_access(
                user=request.user, slug=invitation.workspace.slug, doing="revoke invitations"
            )
        except ApplicationError as error:
            if error.status == 404:
                raise not_found("Invitation") from None
            raise
        invitation = invitation_revoke(invitation=invitation, actor=request.user, request=request)
        return Response(InvitationSerializer(invitation).data)


class MemberListApi(APIView):
    @extend_schema(
        responses={200: MemberSerializer(many=True), **error_responses(403, 404)},
        summary="A workspace's members (owners)",
        description="Owners only. Each member: who, role, how they came in, when last seen.",
    )
    def get(self, request, slug):
        workspace = workspace_owner_access(user=request.user, slug=slug, doing=MANAGE)
        return Response(MemberSerializer(members(workspace=workspace), many=True).data)


class MemberDetailApi(APIView):
    @extend_schema_serializer(component_name="MemberChange")
    class InputSerializer(StrictInput):
        role = serializers.ChoiceField(choices=Membership.Role.values)

    @extend_schema(
        request=InputSerializer,
        responses={200: MemberSerializer, **error_responses(400, 403, 404, 409, body=True)},
        summary="Change a member's role (owners)",
        description="Owners only. A lowered role counts at once (their open pages reload as "
        "what they now are). 409 `last_owner` when it would leave the workspace no owner.",
    )
    def patch(self, request, slug, username):
        workspace = workspace_owner_access(user=request.user, slug=slug, doing=MANAGE)
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        member_role_change(
            workspace=workspace,
            username=username,
            role=payload.validated_data["role"],
            actor=request.user,
            request=request,
        )
        (row,) = members(workspace=workspace, username=username)
        return Response(MemberSerializer(row).data)

    @extend_schema(
        request=None,
        responses={204: None, **error_responses(403, 404, 409)},
        summary="Remove someone from the workspace (owners)",
        description="Owners only. Their sockets and tails close at once. 409 `last_owner` for "
        "the workspace's only owner.",
    )
    def delete(self, request, slug, username):
        workspace = workspace_owner_access(user=request.user, slug=slug, doing=MANAGE)
        member_remove(workspace=workspace, username=username, actor=request.user, request=request)
        return Response(status=status.HTTP_204_NO_CONTENT)


class OwnershipTransferApi(APIView):
    @extend_schema_serializer(component_name="OwnershipTransfer")
    class InputSerializer(StrictInput):
        username = StrictCharField(help_text="The member who becomes an owner")

    @extend_schema(
        request=InputSerializer,
        responses={200: MemberSerializer(many=True), **error_responses(400, 403, 404, body=True)},
        summary="Transfer ownership to a member (owners)",
        description="Owners only. The member named becomes an owner and you a member. Answers "
        "the workspace's members as they now are (only while you can still see them: it is "
        "the last answer you get as an owner).",
    )
    def post(self, request, slug):
        workspace = workspace_owner_access(user=request.user, slug=slug, doing="transfer it")
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        ownership_transfer(
            workspace=workspace,
            username=payload.validated_data["username"],
            actor=request.user,
            request=request,
        )
        return Response(MemberSerializer(members(workspace=workspace), many=True).data)


class AuditLogApi(APIView):
    pagination_class = StrictLimitOffsetPagination

    @extend_schema(
        responses={200: AuditEntrySerializer(many=True), **error_responses(400, 403, 404)},
        summary="A workspace's audit log, newest first (owners)",
        description="Owners only, a page at a time (`limit`, `offset`): what was done in the "
        "workspace (invitations, members, roles, ownership) and the sign-ins, failed sign-ins, "
        "sign-outs and token events of its current members.",
    )
    def get(self, request, slug):
        workspace = workspace_owner_access(user=request.user, slug=slug, doing="read its audit")
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(workspace_audit(workspace=workspace), request, view=self)
        return paginator.get_paginated_response(AuditEntrySerializer(page, many=True).data)
