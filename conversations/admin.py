"""Admin: workspaces with their members, conversations (with a link to their live page), turns
with their event timeline and the tokens their model used, the turns parked on a question (and
who holds each), and who is watching what.

Turns, their events and the questions they asked are a conversation's record: the admin deletes
none of them on its own. They go only with their conversation (or its workspace), as when an
owner deletes it, and not while one of its turns is still active.
"""

import json
from itertools import groupby

from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.db.models import JSONField, Min, OuterRef, Prefetch, Subquery
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from core.errors import ApplicationError

from . import hooks, services
from .models import Conversation, Membership, ParkedTurn, Turn, TurnEvent, Watcher, Workspace
from .services.ownership import unowned, why_unowned


def record_models() -> tuple:
    """What a conversation's record is made of: its turns, their events, the questions they
    asked (reached through Turn: conversations never imports selection), and what higher apps
    keep of it (hooks.record_parts: search's entries, activity's seen marks)."""
    questions = Turn._meta.get_field("selections").related_model
    return Turn, TurnEvent, questions, *hooks.record_parts.models()


class DeletesWholeRecords:
    """For the admin of what owns conversations (a workspace, a conversation): deleting one
    takes the record of its conversations with it, whose parts may not be deleted on their
    own; refused while one of its turns is active (its agent would go on working, and people
    waiting on its questions, in a conversation that no longer exists)."""

    # The lookup from a turn to the objects being deleted.
    turns_of: str

    def get_deleted_objects(self, objs, request):
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        perms_needed -= {model._meta.verbose_name for model in record_models()}
        active = Turn.objects.filter(**{self.turns_of: objs}, status__in=Turn.ACTIVE_STATUSES)
        protected = [
            *protected,
            *(
                format_html(
                    'Turn <a href="{}">{}</a> is {}: stop it first',
                    reverse("admin:conversations_turn_change", args=[quote(turn.pk)]),
                    turn.pk,
                    turn.get_status_display().lower(),
                )
                for turn in active.order_by("created_at")
            ),
        ]
        return deleted, counts, perms_needed, protected


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]
    readonly_fields = ["created_at"]


@admin.register(Workspace)
class WorkspaceAdmin(DeletesWholeRecords, admin.ModelAdmin):
    turns_of = "conversation__workspace__in"
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
class ConversationAdmin(DeletesWholeRecords, admin.ModelAdmin):
    turns_of = "conversation__in"
    list_display = [
        "title",
        "id",
        "workspace",
        "agent",
        "model",
        "last_seq",
        "created_by",
        "created_at",
        "live_page",
    ]
    list_filter = ["workspace", "agent", "model"]
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
        "turn.resumed": lambda: (
            f"{data.get('reason')}: by {data.get('process')}"
            + (f" (was {data['previous']})" if data.get("previous") else "")
        ),
        "turn.notice": lambda: f"{data.get('kind')}: {_short(data.get('text', ''))}",
        "turn.completed": lambda: "",
        "turn.failed": lambda: _short(data.get("error", "")),
        "turn.cancelled": lambda: f"stopped by {_name(data.get('by'))}",
    }
    summary = summaries.get(type_, lambda: "")()
    if type_ in TurnEvent.TERMINAL_TYPES and (used := usage_in_words(data.get("usage"))) != "—":
        summary = f"{summary} ({used})" if summary else used
    return summary


def usage_in_words(usage) -> str:
    """A terminal event's usage in words: "1,200 prompt / 34 completion / 1,234 total"."""
    if not isinstance(usage, dict) or not isinstance(usage.get("total_tokens"), int):
        return "—"
    parts = [
        f"{usage[key]:,} {word}"
        for key, word in (("prompt_tokens", "prompt"), ("completion_tokens", "completion"))
        if isinstance(usage.get(key), int)
    ]
    return " / ".join([*parts, f"{usage['total_tokens']:,} total"])


def terminal_usage() -> Subquery:
    """The usage in a turn's terminal event (each turn has at most one), for annotating turns:
    the tokens of every turn listed come in the list's own query."""
    return Subquery(
        TurnEvent.objects.filter(turn=OuterRef("pk"), type__in=TurnEvent.TERMINAL_TYPES)
        .order_by()
        .values("data__usage")[:1],
        output_field=JSONField(),
    )


@admin.register(Turn)
class TurnAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "conversation",
        "status",
        "started_by",
        "interactive",
        "confirm_writes",
        "tokens",
        "created_at",
    ]
    list_filter = ["status", "interactive", "confirm_writes", "conversation__workspace"]
    search_fields = ["id", "input", "conversation__title", "conversation__id"]
    list_select_related = ["conversation", "started_by"]
    readonly_fields = [
        "id",
        "conversation",
        "input",
        "started_by",
        "interactive",
        "confirm_writes",
        "status",
        "error",
        "failure_detail",
        "tokens_used",
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

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(usage=terminal_usage())

    @admin.display(description="live page")
    def live_page(self, turn):
        return live_page_link(turn.conversation)

    @admin.display(description="tokens")
    def tokens(self, turn):
        usage = turn.usage
        if not isinstance(usage, dict) or not isinstance(usage.get("total_tokens"), int):
            return "—"
        return format_html(
            '<span title="{}">{}</span>', usage_in_words(usage), f"{usage['total_tokens']:,}"
        )

    @admin.display(description="tokens used")
    def tokens_used(self, turn):
        return usage_in_words(turn.usage)

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

    def has_delete_permission(self, request, obj=None):
        return False  # part of its conversation's record

    @admin.action(description="Stop the selected turns", permissions=["change"])
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


# A question's status while it waits (selection's Selection.Status.PENDING): conversations never
# imports selection, so the parked turns below reach questions through Turn's reverse relation.
PENDING = "pending"


def waited_for(seconds: float) -> str:
    """A wait in words, to the unit that matters: "45 s", "3 min", "2 h 5 min", "1 d 3 h"."""
    minutes, seconds = divmod(max(0, int(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{minutes} min" if minutes else f"{seconds} s"


class HolderFilter(admin.SimpleListFilter):
    """Whether a process holds the turn in memory, or nobody does (it is resumed from its
    journal when its question is settled)."""

    title = "held by"
    parameter_name = "held"

    def lookups(self, request, model_admin):
        return [("yes", "a process"), ("no", "nobody")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.exclude(unowned())
        if self.value() == "no":
            return queryset.filter(unowned())
        return queryset


@admin.register(ParkedTurn)
class ParkedTurnAdmin(admin.ModelAdmin):
    """Turns waiting for an answer, the longest waiting first: what each asks, of whom, for how
    long, and which process (if any) holds it. Read-only; each links to its turn's page (with
    the timeline and Stop) and its live page."""

    list_display = [
        "turn",
        "conversation",
        "question",
        "kind",
        "addressee",
        "waited",
        "held_by",
        "started_by",
        "live_page",
    ]
    list_display_links = None
    list_filter = [HolderFilter, "conversation__workspace"]
    search_fields = ["id", "conversation__id", "conversation__title", "runner"]
    list_select_related = ["conversation", "started_by"]

    def get_queryset(self, request):
        # The filter and the Min share one join, so the Min is over pending questions only,
        # and grouping by turn gives each parked turn once however many questions it has.
        # The questions shown come in one more query for the page (oldest first).
        questions = Turn._meta.get_field("selections").related_model.objects
        return (
            self.model._default_manager.filter(
                status=Turn.Status.AWAITING_INPUT, selections__status=PENDING
            )
            .annotate(waiting_since=Min("selections__created_at"))
            .prefetch_related(
                Prefetch(
                    "selections",
                    queryset=questions.filter(status=PENDING)
                    .select_related("addressee")
                    .order_by("created_at", "pk"),
                    to_attr="pending_questions",
                )
            )
            .order_by(*self.get_ordering(request))
        )

    def get_ordering(self, request):
        return ["waiting_since"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @staticmethod
    def _question(turn):
        # Parked turns have at least one; a question settled since the page's first query
        # leaves none here.
        return turn.pending_questions[0] if turn.pending_questions else None

    @admin.display(description="turn", ordering="id")
    def turn(self, turn):
        url = reverse("admin:conversations_turn_change", args=[quote(turn.pk)])
        return format_html('<a href="{}">{}</a>', url, turn.pk)

    @admin.display(description="question")
    def question(self, turn):
        question = self._question(turn)
        if question is None:
            return "—"
        url = reverse("admin:selection_selection_change", args=[quote(question.pk)])
        more = len(turn.pending_questions) - 1
        return format_html(
            '<a href="{}">{}</a>{}',
            url,
            _short(question.prompt, 80),
            f" (and {more} more)" if more else "",
        )

    @admin.display(description="kind")
    def kind(self, turn):
        question = self._question(turn)
        return question.kind if question else "—"

    @admin.display(description="addressee")
    def addressee(self, turn):
        question = self._question(turn)
        if question is None or question.addressee is None:
            return "anyone allowed"
        return question.addressee

    @admin.display(description="waited", ordering="waiting_since")
    def waited(self, turn):
        since = turn.waiting_since
        return format_html(
            '<span title="asked at {} UTC">{}</span>',
            since.strftime("%Y-%m-%d %H:%M:%S"),
            waited_for((timezone.now() - since).total_seconds()),
        )

    @admin.display(description="held by")
    def held_by(self, turn):
        why = why_unowned(turn)
        if why == "let_go":
            return "none (released from memory)"
        if why == "lapsed":
            # Its process stopped or stalled: the next to claim it resumes it.
            return f"none (the lease of {turn.runner} ran out)"
        return turn.runner

    @admin.display(description="live page")
    def live_page(self, turn):
        return live_page_link(turn.conversation)


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

    def has_delete_permission(self, request, obj=None):
        return False  # part of its conversation's record


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
