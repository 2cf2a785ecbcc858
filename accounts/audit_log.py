"""What of the audit log a workspace's owners may read: everything done in the workspace
(invitations, memberships, roles, ownership), and the sign-ins, failed sign-ins, sign-outs and
token events about the people who are its members now (those name no workspace): events whose
subject is a member, never those a member did to someone else (an admin in the workspace who
revoked a stranger's token). Newest first. Admins read the whole log in the admin."""

from django.db.models import Q, QuerySet

from conversations.models import Membership, Workspace

from .models import AuditEntry

Action = AuditEntry.Action

# A person's own events, which name no workspace: an owner sees those of their members.
PERSONAL = (
    Action.SIGNED_IN,
    Action.SIGN_IN_FAILED,
    Action.SIGNED_OUT,
    Action.TOKEN_CREATED,
    Action.TOKEN_REVOKED,
)


def workspace_audit(*, workspace: Workspace) -> QuerySet[AuditEntry]:
    people = Membership.objects.filter(workspace=workspace).values_list("user_id", "user__username")
    ids = [user_id for user_id, _ in people]
    names = [username for _, username in people]
    personal = Q(workspace=None, action__in=PERSONAL) & (
        Q(subject_id__in=ids) | Q(subject=None, subject_name__in=names)
    )
    return AuditEntry.objects.filter(Q(workspace=workspace) | personal).order_by("-at", "-id")
