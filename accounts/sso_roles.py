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

A workspace always keeps an owner (accounts.members): before lowering or removing an owner's
membership the workspace's owners are locked (``lock_owners``) and its rule applied
(``owners_kept``); when the person is its last owner the role is kept, a warning logged and an
entry written (``role_changed`` or ``member_removed`` with ``kept: last_owner``, the role the
claim asked for) instead.
"""

import logging

from django.db import transaction

from conversations.models import Membership, Workspace
from core.errors import ApplicationError

from . import audit
from .members import lock_owners, owners_kept

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
    caller's transaction (a savepoint of it)."""
    with transaction.atomic():
        _sync(user, claimed, request)


def _sync(user, claimed: dict[str, str], request) -> None:
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
            if not _owner_may_go(user, membership, None, request):
                continue
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
            if membership.role != role and not _owner_may_go(user, membership, role, request):
                continue
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


def _owner_may_go(user, membership: Membership, role: str | None, request) -> bool:
    """Whether ``membership`` may be lowered to ``role`` (None: removed): always, unless it is
    an owner's and the workspace would be left without one. Locks the workspace's owners first
    (accounts.members.lock_owners), so a change elsewhere at once takes its turn; a refusal is
    logged and written to the audit log, and the membership is left as it is."""
    if membership.role != Role.OWNER or role == Role.OWNER:
        return True
    owners = lock_owners(membership.workspace)
    locked = next((o for o in owners if o.pk == membership.pk), None)
    if locked is None:  # no longer an owner (changed meanwhile): nothing to keep
        return True
    try:
        owners_kept(owners, [locked], "lower their role")
    except ApplicationError:
        workspace = membership.workspace
        logger.warning(
            "Roles claim for %s would leave workspace %s without an owner: their role is kept",
            user.get_username(),
            workspace.slug,
        )
        _record(
            audit.Action.ROLE_CHANGED if role else audit.Action.MEMBER_REMOVED,
            user,
            workspace,
            request,
            role=Role.OWNER,
            claimed_role=role or "none",
            kept="last_owner",
            reason="kept as the workspace's last owner: a workspace always keeps an owner",
        )
        return False
    return True


def _record(action, user, workspace, request, **detail) -> None:
    audit.record(action, subject=user, workspace=workspace, request=request, source="sso", **detail)
