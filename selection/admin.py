"""Admin: questions with their status, and actions that answer, expire or cancel them through
the same services as the API and the socket."""

import json

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from conversations.admin import live_page_link
from conversations.shared import ApplicationError

from . import services
from .models import Selection


class AnswerForm(forms.Form):
    action = forms.ChoiceField(
        choices=[("answer", "Answer"), ("dismiss", "Dismiss"), ("decline", "Decline")],
        initial="answer",
    )
    answer = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 60}),
        help_text='As JSON: "notes/ideas.md", "option-value", ["a", "b"], true, {"title": "…"}. '
        "Plain text is taken as a string.",
    )

    def parsed_answer(self):
        text = self.cleaned_data["answer"]
        try:
            return json.loads(text)
        except ValueError:
            return text


@admin.register(Selection)
class SelectionAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "kind",
        "status",
        "prompt_short",
        "conversation",
        "answered_by",
        "expires_at",
    ]
    list_filter = ["status", "kind", "conversation__workspace"]
    search_fields = ["id", "prompt", "conversation__id", "turn__id"]
    list_select_related = ["conversation", "answered_by"]
    readonly_fields = [f.name for f in Selection._meta.fields] + ["answer_link", "live_page"]
    actions = ["expire_selected", "cancel_selected", "dismiss_selected"]

    def has_add_permission(self, request):
        return False

    @admin.display(description="prompt")
    def prompt_short(self, selection):
        return selection.prompt[:80]

    @admin.display(description="live page")
    def live_page(self, selection):
        return live_page_link(selection.conversation)

    @admin.display(description="answer it")
    def answer_link(self, selection):
        if not selection.is_pending:
            return "—"
        url = reverse("admin:selection_selection_answer", args=[selection.pk])
        return format_html('<a class="button" href="{}">Answer this question</a>', url)

    def get_urls(self):
        answer = path(
            "<str:selection_id>/answer/",
            self.admin_site.admin_view(self.answer_view),
            name="selection_selection_answer",
        )
        return [answer, *super().get_urls()]

    def answer_view(self, request, selection_id):
        if not self.has_change_permission(request):
            raise PermissionError
        selection = get_object_or_404(Selection, pk=selection_id)
        form = AnswerForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            action = form.cleaned_data["action"]
            try:
                services.selection_reply(
                    selection=selection,
                    user=request.user,
                    answer=form.parsed_answer() if action == "answer" else None,
                    action=None if action == "answer" else action,
                )
            except ApplicationError as error:
                form.add_error(None, error.message)
            else:
                self.message_user(request, f"{selection.pk}: {selection.status}.")
                # Admin URLs carry ids quoted ("_" is its escape character, as in "s_…").
                return redirect("admin:selection_selection_change", quote(selection.pk))
        context = {
            **self.admin_site.each_context(request),
            "title": f"Answer {selection.pk}",
            "selection": selection,
            "payload": json.dumps(selection.to_payload(), indent=2),
            "form": form,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/selection/answer.html", context)

    def _settle(self, request, queryset, settle, done: str):
        count = sum(settle(selection=s) for s in queryset.filter(status=Selection.Status.PENDING))
        self.message_user(request, f"{count} question(s) {done}.", messages.SUCCESS)

    @admin.action(description="Expire the selected pending questions")
    def expire_selected(self, request, queryset):
        self._settle(request, queryset, services.selection_expire, "expired")

    @admin.action(description="Cancel the selected pending questions (their turns go on)")
    def cancel_selected(self, request, queryset):
        def cancel(selection):
            return services.selection_cancel(selection=selection, user=request.user)

        self._settle(request, queryset, cancel, "cancelled")

    @admin.action(description="Dismiss the selected pending questions")
    def dismiss_selected(self, request, queryset):
        count = 0
        for selection in queryset.filter(status=Selection.Status.PENDING):
            try:
                services.selection_reply(selection=selection, user=request.user, action="dismiss")
                count += 1
            except ApplicationError:
                pass
        self.message_user(request, f"{count} question(s) dismissed.", messages.SUCCESS)
