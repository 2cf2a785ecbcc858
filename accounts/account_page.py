"""A person's own account page (``/settings/account/``): their name, their email address (a new
one is verified by a link, see accounts.email_change) and the way to their password; and the
page that link opens, which confirms the change only when its button is pressed (a mail scanner
opening the link changes nothing)."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from core.errors import ApplicationError
from reach.outbox import email_is_set_up

from .email_change import email_change_confirm, email_change_request
from .password_pages import password_allowed
from .sso import password_login_on


class NameForm(forms.Form):
    first_name = forms.CharField(label="First name", max_length=150, required=False)
    last_name = forms.CharField(label="Last name", max_length=150, required=False)


class EmailForm(forms.Form):
    email = forms.EmailField(label="New email address", max_length=254)


def _page(request, *, name_form=None, email_form=None, status=200):
    user = request.user
    context = {
        "name_form": name_form
        or NameForm(initial={"first_name": user.first_name, "last_name": user.last_name}),
        "email_form": email_form or EmailForm(),
        "email_set_up": email_is_set_up(),
        "password_login": password_login_on(),
        "password_allowed": password_allowed(user),
    }
    return render(request, "accounts/account.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def account_settings(request):
    """GET: the page. POST ``action=name``: save the name; ``action=email``: send the link that
    confirms a new address (the address changes when it is followed). A refusal shows the page
    again with what is wrong (its status: 400, 409 taken, 429 too often), changing nothing."""
    if request.method == "GET":
        return _page(request)
    action = request.POST.get("action")
    user = request.user
    if action == "name":
        form = NameForm(request.POST)
        if not form.is_valid():
            return _page(request, name_form=form, status=400)
        user.first_name = form.cleaned_data["first_name"].strip()
        user.last_name = form.cleaned_data["last_name"].strip()
        user.save(update_fields=["first_name", "last_name"])
        messages.success(request, "Your name is saved.")
        return redirect("account-settings")
    if action == "email":
        form = EmailForm(request.POST)
        if not form.is_valid():
            return _page(request, email_form=form, status=400)
        try:
            address = email_change_request(user=user, new_email=form.cleaned_data["email"])
        except ApplicationError as error:
            form.add_error("email", error.message)
            return _page(request, email_form=form, status=error.status)
        messages.success(
            request,
            f"We sent a link to {address}: your address changes when you open it and confirm. "
            "Until then it stays as it is.",
        )
        return redirect("account-settings")
    return _page(request, status=400)


@require_http_methods(["GET", "POST"])
def email_confirm(request):
    """The page the link to a new address opens. GET: a button that confirms (the link's
    signature is in its fragment, which the page's script puts in the form); POST: the change,
    or a page saying why the link does not work (400 not valid, 403 someone else's, 410 expired
    or outdated, 409 the address was taken meanwhile)."""
    if request.method == "GET":
        return render(request, "accounts/email_confirm.html")
    try:
        changed = email_change_confirm(
            token=request.POST.get("k", ""), signed_in=request.user, request=request
        )
    except ApplicationError as error:
        return render(
            request, "accounts/email_confirm.html", {"refusal": error.message}, status=error.status
        )
    return render(request, "accounts/email_confirm.html", {"changed": changed})
