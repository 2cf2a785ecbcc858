"""Admin: workspaces with their members, conversations, and turns with their events."""

from django.contrib import admin, messages

from . import services
from .exceptions import ApplicationError
from .models import Conversation, Membership, Turn, TurnEvent, Workspace


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]
    readonly_fields = ["created_at"]


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "member_count", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    readonly_fields = ["created_at", "files_root"]
    inlines = [MembershipInline]

    @admin.display(description="members")
    def member_count(self, workspace):
        return workspace.memberships.count()


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "workspace", "role", "created_at"]
    list_filter = ["role", "workspace"]
    search_fields = ["user__username", "workspace__name", "workspace__slug"]
    autocomplete_fields = ["user", "workspace"]
    readonly_fields = ["created_at"]


class TurnInline(admin.TabularInline):
    model = Turn
    fields = ["id", "status", "input", "started_by", "created_at", "ended_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True
    ordering = ["-created_at"]

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ["title", "id", "workspace", "agent", "last_seq", "created_by", "created_at"]
    list_filter = ["workspace", "agent"]
    search_fields = ["id", "title", "workspace__name"]
    readonly_fields = ["id", "last_seq", "created_at"]
    autocomplete_fields = ["workspace", "created_by"]
    inlines = [TurnInline]


class TurnEventInline(admin.TabularInline):
    model = TurnEvent
    fields = ["seq", "type", "data", "created_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    ordering = ["seq"]

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Turn)
class TurnAdmin(admin.ModelAdmin):
    list_display = ["id", "conversation", "status", "started_by", "interactive", "created_at"]
    list_filter = ["status", "interactive", "conversation__workspace"]
    search_fields = ["id", "input", "conversation__title", "conversation__id"]
    list_select_related = ["conversation", "started_by"]
    readonly_fields = [
        "id",
        "conversation",
        "input",
        "started_by",
        "interactive",
        "status",
        "error",
        "cancel_requested_at",
        "cancelled_by",
        "inbox",
        "runner",
        "lease_expires_at",
        "created_at",
        "started_at",
        "ended_at",
    ]
    inlines = [TurnEventInline]
    actions = ["stop_selected"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Stop the selected turns")
    def stop_selected(self, request, queryset):
        stopped = 0
        for turn in queryset.filter(status__in=Turn.ACTIVE_STATUSES).select_related("conversation"):
            try:
                services.turn_cancel(
                    conversation=turn.conversation, user=request.user, turn_id=turn.pk
                )
                stopped += 1
            except ApplicationError as error:
                self.message_user(request, f"{turn.pk}: {error.message}", messages.WARNING)
        self.message_user(request, f"Asked {stopped} turn(s) to stop.", messages.SUCCESS)


@admin.register(TurnEvent)
class TurnEventAdmin(admin.ModelAdmin):
    list_display = ["conversation", "seq", "type", "turn", "created_at"]
    list_filter = ["type"]
    search_fields = ["conversation__id", "turn__id"]
    readonly_fields = ["conversation", "turn", "seq", "type", "data", "created_at"]
    list_select_related = ["conversation", "turn"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
