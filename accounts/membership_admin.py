"""Membership changes made in the admin, written to the audit log and held to the members
page's rule that a workspace always keeps an owner: the conversations app's Membership and
Workspace admins (conversations never imports accounts) re-registered from here, each save and
delete recorded with the admin who made it.

Lowering, moving or deleting a workspace's last owner (the change form, the delete view, the
bulk delete action, the memberships inline on the workspace) is refused with the admin's error
message, and nothing is changed: the check runs in the admin's transaction, after locking the
workspace's owners (accounts.members.lock_owners, then its owners_kept), and its refusal rolls
the whole request back (admin history included)."""

from django.contrib import admin, messages
from django.db import router, transaction
from django.http import HttpResponseRedirect

from conversations.admin import MembershipAdmin, WorkspaceAdmin
from conversations.models import Membership, Workspace
from core.errors import ApplicationError

from . import audit
from .members import OWNER, lock_owners, owners_kept
from .models import AuditEntry

Action = AuditEntry.Action


def _keep_owners(losing: list[Membership], doing: str) -> None:
    """ApplicationError ``last_owner`` if ``losing`` takes any workspace's every owner; each
    workspace's owners locked first (in the order of their ids)."""
    by_workspace: dict[int, list[Membership]] = {}
    for membership in losing:
        by_workspace.setdefault(membership.workspace_id, []).append(membership)
    for workspace_id in sorted(by_workspace):
        owners = lock_owners(Workspace(pk=workspace_id))
        owners_kept(owners, by_workspace[workspace_id], doing)


class KeepsAnOwner:
    """Runs an admin view whole or not at all: a ``last_owner`` refusal raised inside it (its
    transaction then rolled back) becomes an error message on the page it was asked from."""

    def _kept(self, request, view, *args, **kwargs):
        try:
            with transaction.atomic(using=router.db_for_write(self.model)):
                return view(request, *args, **kwargs)
        except ApplicationError as error:
            if error.code != "last_owner":
                raise
            self.message_user(request, f"Nothing was changed: {error.message}", messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def changeform_view(self, request, *args, **kwargs):
        return self._kept(request, super().changeform_view, *args, **kwargs)


def _recorded(request, action: str, membership: Membership, **detail) -> None:
    """An admin's change of a membership, in the audit log (``by="admin"``)."""
    audit.record(
        action,
        actor=request.user,
        subject=membership.user,
        workspace=membership.workspace,
        request=request,
        role=membership.role,
        **detail,
        by="admin",
    )


class AuditedMembershipAdmin(KeepsAnOwner, MembershipAdmin):
    def delete_view(self, request, *args, **kwargs):
        return self._kept(request, super().delete_view, *args, **kwargs)

    def response_action(self, request, *args, **kwargs):
        # The bulk actions (delete selected), whose deletion's history is written first.
        return self._kept(request, super().response_action, *args, **kwargs)

    def save_model(self, request, obj, form, change):
        before = None
        if change:
            stored = Membership.objects.select_related("user").get(pk=obj.pk)
            before = stored.role
            if stored.role == OWNER and (
                obj.role != OWNER or obj.workspace_id != stored.workspace_id
            ):
                doing = "lower their role" if obj.role != OWNER else "move them"
                _keep_owners([stored], doing)
        super().save_model(request, obj, form, change)
        if not change:
            _recorded(request, Action.MEMBER_ADDED, obj, source=obj.source)
        elif before != obj.role:
            _recorded(request, Action.ROLE_CHANGED, obj, before=before)

    def delete_model(self, request, obj):
        _keep_owners([obj], "remove them")
        super().delete_model(request, obj)
        _recorded(request, Action.MEMBER_REMOVED, obj)

    def delete_queryset(self, request, queryset):
        gone = list(queryset.select_related("user", "workspace"))
        _keep_owners(gone, "remove them")
        super().delete_queryset(request, queryset)
        for membership in gone:
            _recorded(request, Action.MEMBER_REMOVED, membership)


class AuditedWorkspaceAdmin(KeepsAnOwner, WorkspaceAdmin):
    def save_formset(self, request, form, formset, change):
        if formset.model is Membership and change:
            _inline_keeps_an_owner(form.instance, formset)
        before = {
            f.instance.pk: f.initial.get("role")
            for f in formset.forms
            if f.instance.pk is not None and isinstance(f.instance, Membership)
        }
        super().save_formset(request, form, formset, change)
        if formset.model is not Membership:
            return
        for membership in formset.new_objects:
            _recorded(request, Action.MEMBER_ADDED, membership, source=membership.source)
        for membership, fields in formset.changed_objects:
            if "role" in fields:
                _recorded(
                    request, Action.ROLE_CHANGED, membership, before=before.get(membership.pk)
                )
        for membership in formset.deleted_objects:
            _recorded(request, Action.MEMBER_REMOVED, membership)


def _inline_keeps_an_owner(workspace: Workspace, formset) -> None:
    """The memberships inline: its owners lowered or deleted are losing ownership, unless the
    same save makes someone else an owner."""
    owners = lock_owners(workspace)
    by_pk = {o.pk: o for o in owners}
    losing, gaining = [], False
    for each in formset.forms:
        deleted = formset.can_delete and formset._should_delete_form(each)
        role = (getattr(each, "cleaned_data", None) or {}).get("role")
        if each.instance.pk in by_pk and (deleted or role != OWNER):
            losing.append(by_pk[each.instance.pk])
        elif role == OWNER and not deleted:
            gaining = True
    if losing and not gaining:
        owners_kept(owners, losing, "lower or remove them")


for model, model_admin in (
    (Membership, AuditedMembershipAdmin),
    (Workspace, AuditedWorkspaceAdmin),
):
    admin.site.unregister(model)
    admin.site.register(model, model_admin)
