"""Who is in a workspace (memberships and roles) and who is watching a conversation now (a
socket's watcher, renewed by its process's upkeep)."""

from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.errors import ApplicationError

from ..broadcast import hub
from ..models import Membership, Watcher, Workspace


def role_checked(role: str) -> str:
    """``role``, if it is one a membership may have; else ApplicationError ``invalid`` (400)."""
    if role not in Membership.Role.values:
        raise ApplicationError(
            "invalid", f"role: must be one of {', '.join(Membership.Role.values)}."
        )
    return role


def membership_set(*, workspace: Workspace, user, role: str) -> Membership:
    """Add a person to a workspace or change their role."""
    role_checked(role)
    membership, _ = Membership.objects.update_or_create(
        workspace=workspace, user=user, defaults={"role": role}
    )
    return membership


def watcher_add(*, conversation_id: str, user, process: str) -> Watcher:
    """Record a socket watching a conversation; everyone watching is told who is here."""
    watcher = Watcher.objects.create(
        conversation_id=conversation_id, user=user, process=process, seen_at=timezone.now()
    )
    transaction.on_commit(partial(hub.presence_changed, conversation_id))
    return watcher


def watcher_remove(*, watcher_id: int, conversation_id: str) -> None:
    """Forget a socket that closed (its watcher row, on ``conversation_id``); everyone still
    watching is told who is here."""
    Watcher.objects.filter(pk=watcher_id).delete()
    transaction.on_commit(partial(hub.presence_changed, conversation_id))


def watchers_upkeep(*, process: str, reap_foreign: bool, forget_others: bool = True) -> None:
    """Renew this process's watchers and (with ``forget_others``) forget those of processes
    that stopped renewing theirs (with ``reap_foreign`` too, those of every other process: see
    turns_unowned)."""
    now = timezone.now()
    Watcher.objects.filter(process=process).update(seen_at=now)
    if not forget_others:
        return
    gone = Watcher.objects.exclude(process=process)
    if not reap_foreign:
        gone = gone.filter(seen_at__lt=now - timedelta(seconds=settings.PARLEY_TURN_LEASE_SECONDS))
    conversation_ids = set(gone.values_list("conversation_id", flat=True))
    if conversation_ids:
        gone.delete()
        for conversation_id in conversation_ids:
            transaction.on_commit(partial(hub.presence_changed, conversation_id))
