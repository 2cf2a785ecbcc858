"""A workspace's members as its owners manage them: who is in (with when each was last seen),
a role changed, someone removed, ownership transferred; and who may do it (owners only: a
stranger learns nothing, 404; a member or viewer is refused, 403).

A workspace always keeps an owner. Every change here first locks the workspace's row and then
its owners' rows (:func:`lock_owners`, in that order), so two owners lowering each other at once
take turns and the second is refused (on SQLite, write transactions take turns anyway). Changes
go through the ORM, so conversations.revocation closes what a person no longer may hold."""

from django.db import transaction
from django.db.models import Max

from conversations.models import Membership, Workspace
from conversations.services import role_checked
from core.errors import ApplicationError, forbidden, not_found

from . import audit
from .models import AuditEntry

Action = AuditEntry.Action
OWNER = Membership.Role.OWNER


def members(*, workspace: Workspace, username: str | None = None) -> list[Membership]:
    """The workspace's memberships with their people, owners first; each with ``last_seen``:
    the later of the person's last sign-in and the last use of any of their API tokens. With
    ``username``, only that person's (if they are in)."""
    found = Membership.objects.filter(workspace=workspace)
    if username is not None:
        found = found.filter(user__username=username)
    rows = list(
        found.select_related("user")
        .annotate(token_used=Max("user__api_tokens__last_used_at"))
        .order_by("user__username")
    )
    order = {OWNER: 0, Membership.Role.MEMBER: 1, Membership.Role.VIEWER: 2}
    for row in rows:
        seen = [t for t in (row.user.last_login, row.token_used) if t is not None]
        row.last_seen = max(seen) if seen else None
    return sorted(rows, key=lambda row: order.get(row.role, 3))


def lock_owners(workspace: Workspace) -> list[Membership]:
    """Lock the workspace's row, then its owners' rows (in this order, always); the owners."""
    Workspace.objects.select_for_update().filter(pk=workspace.pk).first()
    return list(
        Membership.objects.select_for_update()
        .filter(workspace=workspace, role=OWNER)
        .order_by("pk")
    )


def _membership(workspace: Workspace, username: str) -> Membership:
    membership = (
        Membership.objects.select_related("user")
        .filter(workspace=workspace, user__username=username)
        .first()
    )
    if membership is None:
        raise not_found(f"Member '{username}'")
    return membership


def owners_kept(owners: list[Membership], losing: list[Membership], doing: str) -> None:
    """The rule that a workspace always keeps an owner, for every way in (this module, the
    admin): ApplicationError ``last_owner`` (409) when every one of ``owners`` (the workspace's,
    as :func:`lock_owners` returned them) is among ``losing`` (memberships about to be lowered,
    removed or moved away). ``doing`` ends the message: "before you {doing}"."""
    owner_pks = {o.pk for o in owners}
    leaving = [m for m in losing if m.pk in owner_pks]
    if not owners or {m.pk for m in leaving} != owner_pks:
        return
    names = sorted({m.user.get_username() for m in leaving})
    if len(names) == 1:
        who = f"{names[0]} is the workspace's only owner"
    else:
        who = f"{', '.join(names[:-1])} and {names[-1]} are the workspace's only owners"
    raise ApplicationError(
        "last_owner",
        f"{who}: a workspace always keeps an owner. Make someone else an owner (or transfer "
        f"ownership) before you {doing}.",
        status=409,
    )


def _owner_among(owners: list[Membership], actor, doing: str) -> Membership:
    """The actor's membership among the workspace's owners as locked (:func:`lock_owners`);
    ApplicationError ``forbidden`` (403) when they are not one (no longer, say: lowered by
    another owner between the page's check and this change)."""
    mine = next((o for o in owners if actor is not None and o.user_id == actor.pk), None)
    if mine is None:
        raise forbidden(f"Only the workspace's owners may {doing}.")
    return mine


def member_role_change(
    *, workspace: Workspace, username: str, role: str, actor, request=None
) -> Membership:
    """Give a member another role. ApplicationError ``invalid`` (400), ``not_found`` (404),
    ``last_owner`` (409), ``forbidden`` (403: the actor is not an owner, checked under the
    lock). The same role changes nothing and records nothing."""
    role_checked(role)
    with transaction.atomic():
        owners = lock_owners(workspace)
        _owner_among(owners, actor, "change its members' roles")
        membership = _membership(workspace, username)
        if membership.role == role:
            return membership
        if role != OWNER:
            owners_kept(owners, [membership], "lower their role")
        before = membership.role
        membership.role = role
        membership.save(update_fields=["role"])
        audit.record(
            Action.ROLE_CHANGED,
            actor=actor,
            subject=membership.user,
            workspace=workspace,
            request=request,
            role=role,
            before=before,
        )
    return membership


def member_remove(*, workspace: Workspace, username: str, actor, request=None) -> None:
    """Take someone out of the workspace (their sockets and tails close at once).
    ApplicationError ``not_found`` (404), ``last_owner`` (409), ``forbidden`` (403: the actor
    is not an owner, checked under the lock)."""
    with transaction.atomic():
        owners = lock_owners(workspace)
        _owner_among(owners, actor, "remove its members")
        membership = _membership(workspace, username)
        owners_kept(owners, [membership], "remove them")
        membership.delete()
        audit.record(
            Action.MEMBER_REMOVED,
            actor=actor,
            subject=membership.user,
            workspace=workspace,
            request=request,
            role=membership.role,
        )


def ownership_transfer(*, workspace: Workspace, username: str, actor, request=None) -> Membership:
    """Make ``username`` (a member of the workspace) its owner, and ``actor`` (an owner) a
    member. ApplicationError ``not_found`` (404), ``forbidden`` (403: the actor is no longer an
    owner), ``invalid`` (400: to oneself). Returns the new owner's membership."""
    if username == actor.get_username():
        raise ApplicationError("invalid", "username: you are already an owner.")
    with transaction.atomic():
        owners = lock_owners(workspace)
        mine = _owner_among(owners, actor, "transfer its ownership")
        theirs = _membership(workspace, username)
        before = theirs.role
        theirs.role = OWNER
        theirs.save(update_fields=["role"])
        mine.role = Membership.Role.MEMBER
        mine.save(update_fields=["role"])
        audit.record(
            Action.OWNERSHIP_TRANSFERRED,
            actor=actor,
            subject=theirs.user,
            workspace=workspace,
            request=request,
            before=before,
        )
    return theirs
