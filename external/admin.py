"""Questions outside agents asked as MCP tasks, read-only: who asked, in which turn, and what
became of each (the questions themselves are under Selections)."""

from django.contrib import admin

from .models import ExternalTask


@admin.register(ExternalTask)
class ExternalTaskAdmin(admin.ModelAdmin):
    list_display = ("id", "user", "turn", "selection_id", "status", "created_at", "expires_at")
    list_filter = ("status",)
    search_fields = ("id", "selection_id", "user__username", "turn__id")
    readonly_fields = [field.name for field in ExternalTask._meta.fields]
    list_select_related = ("user", "turn")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
