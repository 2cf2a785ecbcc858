"""The admin's view of accounts: people's API tokens (revocable, never readable, never moved to
another person), invitations (once made, their address, role, workspace and inviter are fixed:
the sent link would follow an edit, unaudited; revoke and invite again), and the audit log
(read-only: it is append-only)."""

from django.contrib import admin, messages

from . import membership_admin  # noqa: F401  (memberships changed in the admin are audited)
from .models import ApiToken, AuditEntry, Invitation
from .tokens import token_revoke


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ["at", "action", "actor_name", "subject_name", "workspace_slug", "address"]
    list_filter = ["action", "workspace_slug"]
    search_fields = ["actor_name", "subject_name", "workspace_slug"]
    date_hierarchy = "at"
    readonly_fields = [field.name for field in AuditEntry._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = ["email", "workspace", "role", "invited_by", "created_at", "expires_at"]
    list_filter = ["workspace", "role"]
    search_fields = ["email"]
    readonly_fields = ["created_at", "accepted_at", "accepted_by"]
    # An invitation already made (and its link sent) keeps what it was sent for.
    sent_fields = ["email", "role", "workspace", "invited_by"]

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        return fields + self.sent_fields if obj is not None else fields


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "user",
        "key_start",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    ]
    list_filter = ["revoked_at"]
    search_fields = ["name", "user__username"]
    # A key stays its person's: moving it to another account would hand them its access.
    readonly_fields = ["user", "key_start", "created_at", "last_used_at", "revoked_at"]
    exclude = ["key_hash"]
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False  # a key is shown once, to its owner, on their tokens page

    @admin.action(description="Revoke the selected tokens (they stop working at once)")
    def revoke(self, request, queryset):
        revoked = 0
        for token in queryset.filter(revoked_at__isnull=True).select_related("user"):
            token_revoke(token=token, actor=request.user, request=request)
            revoked += 1
        self.message_user(request, f"{revoked} token(s) revoked.", messages.SUCCESS)
