"""Membership changes made in the admin, written to the audit log: the conversations app's
Membership and Workspace admins (conversations never imports accounts) re-registered from here,
each save and delete recorded with the admin who made it."""

from django.contrib import admin

from conversations.admin import MembershipAdmin, WorkspaceAdmin
from conversations.models import Membership, Workspace

from . import audit
from .models import AuditEntry

Action = AuditEntry.Action


def _added(request, membership: Membership) -> None:
    audit.record(
        Action.MEMBER_ADDED,
        actor=request.user,
        subject=membership.user,
        workspace=membership.workspace,
        request=request,
        role=membership.role,
        source=membership.source,
        by="admin",
    )


def _role_changed(request, membership: Membership, before: str) -> None:
    audit.record(
        Action.ROLE_CHANGED,
        actor=request.user,
        subject=membership.user,
        workspace=membership.workspace,
        request=request,
        role=membership.role,
        before=before,
        by="admin",
    )


def _removed(request, membership: Membership) -> None:
    audit.record(
        Action.MEMBER_REMOVED,
        actor=request.user,
        subject=membership.user,
        workspace=membership.workspace,
        request=request,
        role=membership.role,
        by="admin",
    )


class AuditedMembershipAdmin(MembershipAdmin):
    def save_model(self, request, obj, form, change):
        before = form.initial.get("role") if change else None
        super().save_model(request, obj, form, change)
        if not change:
            _added(request, obj)
        elif before != obj.role:
            _role_changed(request, obj, before)

    def delete_model(self, request, obj):
        super().delete_model(request, obj)
        _removed(request, obj)

    def delete_queryset(self, request, queryset):
        gone = list(queryset.select_related("user", "workspace"))
        super().delete_queryset(request, queryset)
        for membership in gone:
            _removed(request, membership)


class AuditedWorkspaceAdmin(WorkspaceAdmin):
    def save_formset(self, request, form, formset, change):
        before = {
            f.instance.pk: f.initial.get("role")
            for f in formset.forms
            if f.instance.pk is not None and isinstance(f.instance, Membership)
        }
        super().save_formset(request, form, formset, change)
        if formset.model is not Membership:
            return
        for membership in formset.new_objects:
            _added(request, membership)
        for membership, fields in formset.changed_objects:
            if "role" in fields:
                _role_changed(request, membership, before.get(membership.pk))
        for membership in formset.deleted_objects:
            _removed(request, membership)


for model, model_admin in (
    (Membership, AuditedMembershipAdmin),
    (Workspace, AuditedWorkspaceAdmin),
):
    admin.site.unregister(model)
    admin.site.register(model, model_admin)
