"""Admin: the outbox (deliveries with their attempts, a failed one sent again through a service),
webhook endpoints (never their secret), people's choices, workspaces' channels and who is who on
Slack; and each question's deliveries on its own page (the selection app's question admin,
extended here: selection never imports reach).

What people chose and what was sent are records: the admin shows them and changes none of them
by hand (a person's choices are theirs, made on their settings page or through the API)."""

from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils.html import format_html

from selection.admin import SelectionAdmin
from selection.models import Selection

from .deliveries import delivery_send_again, how_it_went, shown_url, went
from .models import Attempt, Delivery, Preference, SlackUser, WebhookEndpoint, WorkspaceReach


def _all_fields(model) -> list[str]:
    return [field.name for field in model._meta.fields]


def _deliveries(count: int) -> str:
    return f"{count} delivery" if count == 1 else f"{count} deliveries"


class AttemptInline(admin.TabularInline):
    model = Attempt
    fields = ["number", "process", "started_at", "finished_at", "ok", "response"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "question",
        "cause",
        "channel",
        "address",
        "status",
        "attempts",
        "next_attempt_at",
        "sent_at",
        "created_at",
    ]
    list_filter = ["channel", "cause", "status"]
    search_fields = ["id", "address", "selection__id", "selection__prompt", "recipient__username"]
    list_select_related = ["selection", "recipient", "endpoint"]
    readonly_fields = [*_all_fields(Delivery), "where_it_went"]
    inlines = [AttemptInline]
    actions = ["send_again"]

    def has_add_permission(self, request):
        return False

    @admin.display(description="question")
    def question(self, delivery):
        url = reverse("admin:selection_selection_change", args=[quote(delivery.selection_id)])
        return format_html('<a href="{}">{}</a>', url, delivery.selection_id)

    @admin.display(description="where it went")
    def where_it_went(self, delivery):
        return f"{went(delivery)}: {how_it_went(delivery)}"

    @admin.action(
        description="Send the selected failed deliveries again now", permissions=["change"]
    )
    def send_again(self, request, queryset):
        chosen = list(queryset)
        again = sum(delivery_send_again(delivery=delivery) for delivery in chosen)
        message = f"{_deliveries(again)} will be sent again now."
        if left := len(chosen) - again:
            message += f" {_deliveries(left)} had not failed: left as they were."
        self.message_user(request, message, messages.SUCCESS if again else messages.WARNING)


@admin.register(Attempt)
class AttemptAdmin(admin.ModelAdmin):
    list_display = ["delivery", "number", "process", "ok", "response", "started_at", "finished_at"]
    list_filter = ["ok", "delivery__channel"]
    search_fields = ["delivery__id", "process", "response"]
    list_select_related = ["delivery"]
    readonly_fields = _all_fields(Attempt)

    def has_add_permission(self, request):
        return False


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    """Endpoints are made by their workspace's owners (the page and REST show the secret once);
    here they are seen, never with their secret."""

    list_display = [
        "id",
        "site",
        "workspace",
        "enabled",
        "failures_in_a_row",
        "event_types",
        "created_at",
    ]
    list_filter = ["enabled", "workspace"]
    search_fields = ["id", "url", "description", "workspace__slug", "workspace__name"]
    list_select_related = ["workspace"]
    exclude = ["secret"]
    readonly_fields = [name for name in _all_fields(WebhookEndpoint) if name != "secret"]

    def has_add_permission(self, request):
        return False

    @admin.display(description="site")
    def site(self, endpoint):
        return shown_url(endpoint.url)


@admin.register(Preference)
class PreferenceAdmin(admin.ModelAdmin):
    list_display = ["user", "email", "slack", "browser", "quiet_from", "quiet_until", "timezone"]
    list_filter = ["email", "slack", "browser", ("quiet_from", admin.EmptyFieldListFilter)]
    search_fields = ["user__username", "user__email", "timezone"]
    list_select_related = ["user"]
    readonly_fields = _all_fields(Preference)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(WorkspaceReach)
class WorkspaceReachAdmin(admin.ModelAdmin):
    list_display = ["workspace", "slack_channel", "updated_at"]
    list_filter = [("slack_channel", admin.EmptyFieldListFilter)]
    search_fields = ["workspace__slug", "workspace__name", "slack_channel"]
    list_select_related = ["workspace"]
    readonly_fields = _all_fields(WorkspaceReach)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(SlackUser)
class SlackUserAdmin(admin.ModelAdmin):
    list_display = ["user", "email", "slack_id", "looked_up_at"]
    list_filter = [("slack_id", admin.EmptyFieldListFilter)]
    search_fields = ["user__username", "email", "slack_id"]
    list_select_related = ["user"]
    readonly_fields = _all_fields(SlackUser)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


# Each question's deliveries, on its page ------------------------------------------------------


class DeliveryInline(admin.TabularInline):
    model = Delivery
    verbose_name_plural = "where it went"
    fields = ["where_it_went", "channel", "status", "attempts", "created_at", "sent_at"]
    readonly_fields = fields
    ordering = ["created_at", "pk"]
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("recipient", "endpoint")

    @admin.display(description="delivery")
    def where_it_went(self, delivery):
        return f"{went(delivery)}: {how_it_went(delivery)}"


class QuestionAdmin(SelectionAdmin):
    """The selection app's question admin, and where each question went."""

    inlines = [*SelectionAdmin.inlines, DeliveryInline]


admin.site.unregister(Selection)
admin.site.register(Selection, QuestionAdmin)
