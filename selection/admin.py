"""Admin: questions with their status, a form to answer each one built for its kind, and actions
that expire, cancel or dismiss them, all through the same services as the API and the socket.

A question is part of its turn's record: removing a pending one cancels it (its turn is told, and
goes on), and a settled one cannot be removed at all.
"""

from datetime import date

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from conversations.admin import live_page_link
from core.errors import ApplicationError

from . import services
from .models import Selection, Via

# Messages and pages ------------------------------------------------------------------------


def _short(text, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters (ending with an ellipsis if cut)."""
    return Truncator(" ".join(str(text).split())).chars(limit)


def question_named(selection: Selection) -> str:
    return f"Question “{_short(selection.prompt, 60)}”"


def _questions(count: int) -> str:
    return f"{count} question" if count == 1 else f"{count} questions"


def settled_in_words(selection: Selection) -> str:
    """What became of a question: 'Question “Which database?” answered: PostgreSQL.'"""
    if selection.status == Selection.Status.ANSWERED:
        return f"{question_named(selection)} answered: {_short(selection.answer_in_words(), 100)}."
    return f"{question_named(selection)} {selection.get_status_display().lower()}."


# The answer form -------------------------------------------------------------------------


def schema_field(name: str, spec: dict, required: bool) -> forms.Field:
    """The form field for one field of a form question's schema (the flat subset that
    conversations.questions.clean_form_schema allows), titled and described as the schema says."""
    common = {
        "label": spec.get("title") or name,
        "help_text": spec.get("description", ""),
        "initial": spec.get("default"),
        "required": required,
    }
    kind, text_format = spec["type"], spec.get("format")
    if kind == "boolean":
        # A checkbox always gives a value: unticked is false, never missing.
        return forms.BooleanField(**{**common, "required": False})
    if kind in ("integer", "number"):
        number = forms.IntegerField if kind == "integer" else forms.FloatField
        return number(min_value=spec.get("minimum"), max_value=spec.get("maximum"), **common)
    if "enum" in spec:
        names = spec.get("enumNames") or []
        choices = [
            (value, names[index] if index < len(names) else value)
            for index, value in enumerate(spec["enum"])
        ]
        return forms.ChoiceField(choices=([] if required else [("", "—")]) + choices, **common)
    if text_format == "date":
        return forms.DateField(widget=forms.DateInput(attrs={"type": "date"}), **common)
    if text_format == "date-time":
        widget = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")
        return forms.DateTimeField(widget=widget, **common)
    lengths = {"min_length": spec.get("minLength"), "max_length": spec.get("maxLength")}
    if text_format == "email":
        return forms.EmailField(**lengths, **common)
    # Any URI the schema accepts (mailto:, urn:…), not only the web addresses URLField takes.
    widget = forms.URLInput if text_format == "uri" else None
    return forms.CharField(widget=widget, **lengths, **common)


def _how_many(low: int, high: int | None) -> str:
    if high is None:
        return f"Choose {low} or more." if low else "Choose any number."
    return f"Choose {low}." if low == high else f"Choose {low or 'any number'} to {high}."


class AnswerForm(forms.Form):
    """The answer to one question, with the fields its kind asks for: option buttons, or
    checkboxes with how many to choose (and a box for an answer of one's own, when the question
    allows it); a path inside the question's folder; a text; the fields of a form's schema; or
    none for a confirmation, whose buttons say it. What it gives goes through selection_reply,
    which judges it as it judges every answer."""

    required_css_class = "required"

    def __init__(self, selection: Selection, *args, **kwargs):
        super().__init__(*args, prefix="answer", **kwargs)
        self.selection = selection
        self.fields.update(getattr(self, f"_{selection.kind}_fields")())

    def answer(self):
        """The answer, as selection_reply takes it (once the form is valid)."""
        return getattr(self, f"_{self.selection.kind}_answer")(self.cleaned_data)

    def _choice_fields(self) -> dict:
        selection = self.selection
        options = [
            (
                option["value"],
                f"{option['label']} — {option['description']}"
                if option.get("description")
                else option["label"],
            )
            for option in selection.options
        ]
        if selection.multiple:
            fields = {
                "choices": forms.MultipleChoiceField(
                    label="Choose",
                    choices=options,
                    widget=forms.CheckboxSelectMultiple,
                    required=False,  # how many: selection_reply says
                    help_text=_how_many(selection.min_choices or 0, selection.max_choices),
                )
            }
        else:
            fields = {
                "choice": forms.ChoiceField(
                    label="Choose one",
                    choices=options,
                    widget=forms.RadioSelect,
                    required=not selection.allow_freeform,
                )
            }
        if selection.allow_freeform:
            fields["other"] = forms.CharField(
                label="Something else" if selection.multiple else "Or your own answer",
                required=False,
            )
        return fields

    def _choice_answer(self, data):
        other = data.get("other", "")
        if self.selection.multiple:
            return data["choices"] + ([other] if other else [])
        return other or data["choice"] or None

    def _path_fields(self) -> dict:
        selection = self.selection
        folder = f"{selection.root}/" if selection.root else "the workspace's files"
        return {
            "path": forms.CharField(
                label=f"{selection.get_mode_display()} in {folder}",
                help_text=f"A path relative to {folder}.",
            )
        }

    def _path_answer(self, data):
        return data["path"]

    def _text_fields(self) -> dict:
        widget = forms.Textarea(attrs={"rows": 4, "cols": 60})
        return {"text": forms.CharField(label="Your answer", widget=widget)}

    def _text_answer(self, data):
        return data["text"]

    def _confirm_fields(self) -> dict:
        return {}

    def _confirm_answer(self, data):
        return True  # its Confirm button; Decline is an action

    def _form_fields(self) -> dict:
        schema = self.selection.schema
        required = set(schema.get("required", []))
        return {
            name: schema_field(name, schema["properties"][name], name in required)
            for name in self.selection.form_field_names()
        }

    def _form_answer(self, data):
        # A field left empty is left out; dates go as the schema's ISO text.
        return {
            name: value.isoformat() if isinstance(value, date) else value
            for name, value in data.items()
            if value not in (None, "")
        }

    def clean(self):
        data = super().clean()
        single = self.selection.kind == Selection.Kind.CHOICE and not self.selection.multiple
        if single and data.get("choice") and data.get("other"):
            raise ValidationError("Choose an option or write your own answer, not both.")
        return data


# The admin -------------------------------------------------------------------------------


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
        "called_on",
    ]
    list_filter = [
        "status",
        "kind",
        "conversation__workspace",
        ("reminded_at", admin.EmptyFieldListFilter),
        ("escalated_at", admin.EmptyFieldListFilter),
    ]
    search_fields = ["id", "prompt", "conversation__id", "turn__id"]
    list_select_related = ["conversation", "answered_by"]
    readonly_fields = [f.name for f in Selection._meta.fields] + ["answer_link", "live_page"]
    actions = ["expire_selected", "delete_selected", "dismiss_selected"]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        # Removing a pending question cancels it (see delete_view); a settled one is the record.
        return super().has_delete_permission(request, obj) and (obj is None or obj.is_pending)

    def get_readonly_fields(self, request, obj=None):
        fields = super().get_readonly_fields(request, obj)
        if self.has_change_permission(request, obj):
            return fields
        return [name for name in fields if name != "answer_link"]

    @admin.display(description="called on")
    def called_on(self, selection):
        """Whether upkeep reminded its people, and escalated it to the owners."""
        return (
            ", ".join(
                word
                for word, moment in (
                    ("reminded", selection.reminded_at),
                    ("escalated", selection.escalated_at),
                )
                if moment
            )
            or "—"
        )

    @admin.display(description="question")
    def prompt_short(self, selection):
        return _short(selection.prompt, 80)

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

    def _question_or_404(self, request, selection_id: str) -> Selection:
        selection = self.get_object(request, selection_id)
        if selection is None:
            raise Http404("There is no such question.")
        return selection

    def _page(self, request, template: str, selection: Selection, title: str, **context):
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "selection": selection,
            **context,
        }
        return TemplateResponse(request, template, context)

    def _back_to(self, selection: Selection):
        # Admin URLs carry ids quoted ("_" is its escape character, as in "s_…").
        return redirect("admin:selection_selection_change", quote(selection.pk))

    def answer_view(self, request, selection_id):
        """The question and a form built for its kind; Dismiss, and Decline for a confirmation.
        Whatever is sent goes through selection_reply: what it refuses is shown here, and
        nothing is stored."""
        selection = self._question_or_404(request, selection_id)
        if not self.has_change_permission(request, selection):
            raise PermissionDenied
        form, refusal = AnswerForm(selection), None
        if request.method == "POST":
            action = request.POST.get("action", "answer")
            answering = action == "answer"
            if answering:
                form = AnswerForm(selection, request.POST)
            if not answering or form.is_valid():
                try:
                    services.selection_reply(
                        selection=selection,
                        user=request.user,
                        answer=form.answer() if answering else None,
                        action=None if answering else action,
                        via=Via.ADMIN,
                    )
                except ApplicationError as error:
                    refusal = error.message
                else:
                    self.message_user(request, settled_in_words(selection), messages.SUCCESS)
                    return self._back_to(selection)
        return self._page(
            request,
            "admin/selection/answer.html",
            selection,
            "Answer the question",
            form=form,
            refusal=refusal,
            outcome=None if selection.is_pending else settled_in_words(selection),
        )

    def delete_view(self, request, object_id, extra_context=None):
        """Removing a pending question cancels it: its turn is told, and goes on, and the
        question stays in the turn's record, cancelled. A settled one cannot be removed (403)."""
        selection = self._question_or_404(request, unquote(object_id))
        if not self.has_delete_permission(request, selection):
            raise PermissionDenied
        if request.method != "POST":
            return self._page(
                request, "admin/selection/cancel.html", selection, "Cancel this question?"
            )
        if services.selection_cancel(selection=selection, user=request.user):
            self.message_user(request, f"{question_named(selection)} cancelled; its turn goes on.")
        else:
            message = f"{settled_in_words(selection)} There was nothing to cancel."
            self.message_user(request, message, messages.WARNING)
        return self._back_to(selection)

    def _settle_each(self, request, queryset, settle, done: str) -> None:
        """Settle each selected question still pending with ``settle`` (which returns False, or
        raises ApplicationError, for one settled meanwhile), and say what came of it."""
        chosen = list(queryset.select_related("conversation__workspace"))
        settled = []
        for selection in chosen:
            if not selection.is_pending:
                continue
            try:
                if settle(selection):
                    settled.append(selection)
            except ApplicationError:
                pass
        if len(settled) == 1:
            message = f"{question_named(settled[0])} {done}."
        else:
            message = f"{_questions(len(settled))} {done}."
        if skipped := len(chosen) - len(settled):
            left = "it was" if skipped == 1 else "they were"
            message += f" {_questions(skipped)} already settled: left as {left}."
        self.message_user(request, message, messages.SUCCESS if settled else messages.WARNING)

    @admin.action(description="Expire the selected pending questions", permissions=["change"])
    def expire_selected(self, request, queryset):
        def expire(selection):
            return services.selection_expire(selection=selection)

        self._settle_each(request, queryset, expire, "expired")

    @admin.action(
        description="Cancel the selected pending questions (their turns go on)",
        permissions=["delete"],
    )
    def delete_selected(self, request, queryset):
        """Django's bulk delete, replaced: removing questions cancels those still pending."""

        def cancel(selection):
            return services.selection_cancel(selection=selection, user=request.user)

        self._settle_each(request, queryset, cancel, "cancelled")

    @admin.action(description="Dismiss the selected pending questions", permissions=["change"])
    def dismiss_selected(self, request, queryset):
        def dismiss(selection):
            return services.selection_reply(
                selection=selection, user=request.user, action="dismiss", via=Via.ADMIN
            )

        self._settle_each(request, queryset, dismiss, "dismissed")
