"""Admin: workspaces with their members, conversations (with a link to their live page), turns
with their event timeline, and who is watching what."""

import json
from itertools import groupby

from django.contrib import admin, messages
from django.utils.html import format_html, format_html_join

from . import services
from .models import Conversation, Membership, Turn, TurnEvent, Watcher, Workspace
from .shared import ApplicationError


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


def live_page_link(conversation: Conversation) -> str:
    return format_html(
        '<a href="{}" target="_blank" rel="noopener">Open live page</a>',
        conversation.get_absolute_url(),
    )


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = [
        "title",
        "id",
        "workspace",
        "agent",
        "last_seq",
        "created_by",
        "created_at",
        "live_page",
    ]
    list_filter = ["workspace", "agent"]
    search_fields = ["id", "title", "workspace__name"]
    readonly_fields = ["id", "last_seq", "created_at"]
    autocomplete_fields = ["workspace", "created_by"]
    inlines = [TurnInline]

    @admin.display(description="live page")
    def live_page(self, conversation):
        return live_page_link(conversation)


def _short(value, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _name(person) -> str:
    return (person or {}).get("name") or (person or {}).get("username") or "—"


def event_summary(type_: str, data: dict) -> str:
    """One line saying what an event records, for the admin's timeline."""
    summaries = {
        "turn.started": lambda: f"{_name(data.get('started_by'))}: {_short(data.get('input'))}",
        "message.delta": lambda: _short(data.get("text", "")),
        "message.completed": lambda: _short(data.get("text", ""), 400),
        "tool.started": lambda: f"{data.get('name')} {_short(data.get('arguments'))}",
        "tool.completed": lambda: (
            f"{data.get('name')} → "
            + (f"error: {data['error']}" if "error" in data else _short(data.get("result")))
        ),
        "selection.requested": lambda: f"{data.get('kind')}: {_short(data.get('prompt'))}",
        "selection.resolved": lambda: (
            f"{data.get('status')} by {_name(data.get('answered_by'))}"
            + (f": {_short(data.get('answer'))}" if data.get("answer") is not None else "")
        ),
        "turn.steered": lambda: f"{_name(data.get('by'))}: {_short(data.get('input'))}",
        "turn.failed": lambda: _short(data.get("error", "")),
        "turn.cancelled": lambda: f"stopped by {_name(data.get('by'))}",
    }
    return summaries.get(type_, lambda: "")()


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
        "live_page",
        "timeline",
    ]
    actions = ["stop_selected"]

    @admin.display(description="live page")
    def live_page(self, turn):
        return live_page_link(turn.conversation)

    @admin.display(description="event timeline")
    def timeline(self, turn):
        """The turn's events in order, one row each; a run of text deltas is one row."""
        events = turn.events.order_by("seq").values_list("seq", "type", "created_at", "data")
        rows = []
        for is_delta, run in groupby(events, key=lambda event: event[1] == "message.delta"):
            run = list(run)
            if is_delta and len(run) > 1:
                text = "".join(data.get("text", "") for *_, data in run)
                seqs = f"{run[0][0]}–{run[-1][0]}"
                rows.append((seqs, run[0][2], f"message.delta ×{len(run)}", _short(text, 400)))
            else:
                rows += [(seq, at, kind, event_summary(kind, data)) for seq, kind, at, data in run]
        if not rows:
            return "No events."
        body = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
            ((seq, at.strftime("%H:%M:%S.%f")[:-3], type_, text) for seq, at, type_, text in rows),
        )
        return format_html(
            '<table class="parley-timeline"><thead><tr><th>seq</th><th>time (UTC)</th>'
            "<th>event</th><th>what</th></tr></thead><tbody>{}</tbody></table>",
            body,
        )

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


@admin.register(Watcher)
class WatcherAdmin(admin.ModelAdmin):
    """Who has a conversation open right now (one row per socket)."""

    list_display = ["user", "conversation", "process", "connected_at", "seen_at"]
    list_filter = ["conversation__workspace"]
    search_fields = ["user__username", "conversation__id", "conversation__title", "process"]
    list_select_related = ["user", "conversation"]
    readonly_fields = ["conversation", "user", "process", "connected_at", "seen_at"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
