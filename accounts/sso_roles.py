"""Workspace memberships from the identity provider's roles claim (``PARLEY_OIDC_ROLES_CLAIM``),
re-read at each single sign-on.

The claim is a list of ``"<workspace slug>:<role>"`` strings (role ``owner``, ``member`` or
``viewer``; a single string is a list of one). Entries naming no workspace, or no known role,
are ignored; a workspace named twice gets the higher role. At each sign-in the memberships the
provider made (``source=sso``) that the claim no longer names are removed; those it names get
its role, and a membership given by an admin or an invitation that it names becomes the
provider's; memberships from elsewhere that it does not name are left alone. Every change goes
through the ORM, so sockets and tails lose a lost role at once (conversations.revocation), and
is written to the audit log with ``source=sso``.
"""

import logging

from conversations.models import Membership, Workspace

from . import audit

logger = logging.getLogger(__name__)

Role = Membership.Role
RANKS = {Role.VIEWER: 0, Role.MEMBER: 1, Role.OWNER: 2}
SSO = Membership.Source.SSO


def parse(value) -> dict[str, str]:
    """The claim's workspaces and roles, by slug; what is not of the form is ignored."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return {}
    claimed: dict[str, str] = {}
    for entry in value:
        if not isinstance(entry, str) or ":" not in entry:
            continue
        slug, _, role = entry.strip().rpartition(":")
        if role not in RANKS or not slug:
            continue
        if slug not in claimed or RANKS[role] > RANKS[claimed[slug]]:
            claimed[slug] = role
    return claimed


def memberships_sync(*, user, claimed: dict[str, str], request=None) -> None:
    """Make ``user``'s memberships follow the claim (see the module's docstring). Runs in the
    caller's transaction."""
    workspaces = {w.slug: w for w in Workspace.objects.filter(slug__in=list(claimed))}
    unknown = sorted(set(claimed) - set(workspaces))
    if unknown:
        logger.info("Roles claim names no workspace %s: ignored", ", ".join(unknown))
    current = {
        m.workspace.slug: m
        for m in Membership.objects.select_related("workspace").filter(user=user)
    }
    for slug, membership in sorted(current.items()):
        if slug not in workspaces and membership.source == SSO:
            membership.delete()
            _record(
                audit.Action.MEMBER_REMOVED,
                user,
                membership.workspace,
                request,
                role=membership.role,
            )
    for slug, workspace in sorted(workspaces.items()):
        role = claimed[slug]
        membership = current.get(slug)
        if membership is None:
            Membership.objects.create(workspace=workspace, user=user, role=role, source=SSO)
            _record(audit.Action.MEMBER_ADDED, user, workspace, request, role=role)
        elif membership.role != role or membership.source != SSO:
            previous = membership.role
            membership.role, membership.source = role, SSO
            membership.save(update_fields=["role", "source"])
            if previous != role:
                _record(
                    audit.Action.ROLE_CHANGED,
                    user,
                    workspace,
                    request,
                    role=role,
                    previous_role=previous,
                )


def _record(action, user, workspace, request, **detail) -> None:
    audit.record(action, subject=user, workspace=workspace, request=request, source="sso", **detail)
