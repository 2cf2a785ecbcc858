"""The admin's view of what people have seen."""

from django.contrib import admin

from .models import Seen


@admin.register(Seen)
class SeenAdmin(admin.ModelAdmin):
    list_display = ("user", "conversation", "last_seq", "seen_at")
    list_filter = ("seen_at",)
    search_fields = ("user__username", "conversation__title", "conversation__id")
    readonly_fields = ("seen_at",)
    raw_id_fields = ("user", "conversation")
