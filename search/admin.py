"""The admin's view of the search index: each entry, what it says and where it was said.
Read-only: the event log writes the index as it stores events, and deleting their conversation
deletes their entries; an entry added, changed or removed by hand would make search disagree
with what was said."""

from django.contrib import admin
from django.utils.html import format_html
from django.utils.text import Truncator

from .models import SearchEntry
from .selectors import permalink


@admin.register(SearchEntry)
class SearchEntryAdmin(admin.ModelAdmin):
    list_display = ["id", "conversation", "seq", "type", "who", "said", "created_at", "place"]
    list_filter = ["type", "conversation__workspace"]
    search_fields = ["conversation__id", "conversation__title", "who"]
    readonly_fields = [
        "conversation",
        "seq",
        "type",
        "who",
        "text",
        "words",
        "created_at",
        "place",
    ]
    fields = readonly_fields
    list_select_related = ["conversation"]
    ordering = ["-id"]  # newest first, as search finds them

    @admin.display(description="said")
    def said(self, entry):
        return Truncator(" ".join(entry.text.split())).chars(100)

    @admin.display(description="place")
    def place(self, entry):
        return format_html(
            '<a href="{}">Open in its conversation</a>', permalink(entry.conversation_id, entry.seq)
        )

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # kept by the event log, with its conversation
