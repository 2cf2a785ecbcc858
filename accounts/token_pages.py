"""The person's API tokens page (``/settings/tokens/``): their tokens (name, the key's first
characters, made, last used, expiry), a form to make one (its key shown on the answer, once,
with a copy button) and, for each, revoking it after a confirmation. Through the same services
as the REST API (accounts.tokens)."""

from datetime import datetime, time, timedelta

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from core.errors import ApplicationError

from .tokens import NAME_MAX, token_create, token_for_person, token_revoke, tokens_of

EXPIRIES = [
    ("", "Never"),
    ("7", "In 7 days"),
    ("30", "In 30 days"),
    ("90", "In 90 days"),
    ("365", "In a year"),
    ("date", "On a date…"),
]


class TokenForm(forms.Form):
    name = forms.CharField(max_length=NAME_MAX, label="Name", help_text="What it is for")
    expires = forms.ChoiceField(choices=EXPIRIES, required=False, label="Expires")
    expires_on = forms.DateField(
        required=False,
        label="Expiry date (for “On a date…”)",
        widget=forms.DateInput(attrs={"type": "date"}),
    )

    def clean(self):
        data = super().clean()
        expires = data.get("expires") or ""
        data["expires_at"] = None
        if expires == "date":
            day = data.get("expires_on")
            if day is None:
                raise forms.ValidationError("Pick the date it expires on.")
            # The end of that day, in the server's time zone.
            data["expires_at"] = timezone.make_aware(datetime.combine(day, time.max))
        elif expires:
            data["expires_at"] = timezone.now() + timedelta(days=int(expires))
        return data


@login_required
def tokens_page(request):
    """GET: the list and the form; POST: make a token, and show its key this once (the answer
    itself, never a redirect, a message or the session)."""
    form = TokenForm(request.POST or None)
    created = key = None
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                created, key = token_create(
                    user=request.user,
                    name=form.cleaned_data["name"],
                    expires_at=form.cleaned_data["expires_at"],
                    request=request,
                )
            except ApplicationError as error:
                form.add_error(None, error.message)
            else:
                form = TokenForm()
        if created is None:
            status = 400
    response = render(
        request,
        "accounts/tokens.html",
        {
            "form": form,
            "tokens": tokens_of(request.user),
            "created": created,
            "key": key,
            "now": timezone.now(),
        },
        status=status,
    )
    if key is not None:
        response["Cache-Control"] = "no-store"  # the key is in this page only
    return response


@login_required
@require_POST
def token_revoke_page(request, token_id):
    try:
        token = token_for_person(user=request.user, token_id=token_id)
    except ApplicationError:
        messages.error(request, "That token is not yours, or was revoked already.")
    else:
        token_revoke(token=token, actor=request.user, request=request)
        messages.success(request, f"“{token.name}” is revoked: it no longer works anywhere.")
    return redirect("api-tokens")
