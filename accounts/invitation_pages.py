"""The page an invitation's link opens. GET shows what it is and never accepts (mail scanners
open links); POST accepts it: as the person signed in (whose email must be the invited address),
or by creating an account for the invited address (when password sign-in is on). Signed out, it
offers to sign in (and back here) or, with single sign-on set up, to sign in with it."""

from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers

from core.decoding import check_text
from core.errors import ApplicationError

from .invitations import (
    InvitationRefused,
    account_create_and_accept,
    invitation_accept,
    invitation_open,
)

BACKEND = "django.contrib.auth.backends.ModelBackend"


def invitation_page(request, token):
    try:
        invitation = invitation_open(token)
    except InvitationRefused as refused:
        return _refused(request, refused)
    here = reverse("invitation", args=[token])
    password_login = getattr(settings, "PARLEY_PASSWORD_LOGIN", True)
    context = {
        "invitation": invitation,
        "inviter": _name(invitation.invited_by) if invitation.invited_by else "An owner",
        "login_url": f"{reverse('login')}?{urlencode({'next': here})}",
        "sso_url": f"/oidc/authenticate/?{urlencode({'next': here})}"
        if getattr(settings, "PARLEY_OIDC_ISSUER", "")
        else "",
        "sso_name": getattr(settings, "PARLEY_OIDC_NAME", "") or "single sign-on",
        "password_login": password_login,
        "form": {"username": "", "name": ""},
    }
    user = request.user
    if user.is_authenticated:
        context["matches"] = (user.email or "").lower() == invitation.email.lower()
    status = 200
    if request.method == "POST":
        try:
            for value in request.POST.values():
                check_text(value, what="The form")
            if user.is_authenticated:
                accepted = invitation_accept(token=token, user=user, request=request)
            else:
                user, accepted = account_create_and_accept(
                    token=token,
                    username=request.POST.get("username", ""),
                    name=request.POST.get("name", ""),
                    password=request.POST.get("password", ""),
                    request=request,
                )
                login(request, user, backend=BACKEND)
        except InvitationRefused as refused:
            return _refused(request, refused)
        except ApplicationError as error:
            context["error"] = error.message
            context["form"] = {
                "username": request.POST.get("username", ""),
                "name": request.POST.get("name", ""),
            }
            status = error.status if error.status in (400, 403) else 400
        else:
            workspace = accepted.membership.workspace
            if accepted.joined:
                messages.success(
                    request,
                    f"Welcome to {workspace.name}: you are a "
                    f"{accepted.membership.get_role_display().lower()}.",
                )
            else:
                messages.info(request, f"You were already in {workspace.name}: nothing changed.")
            return redirect(f"{reverse('home')}#ws-{workspace.slug}")
    response = render(request, "accounts/invitation.html", context, status=status)
    add_never_cache_headers(response)
    return response


def _name(user) -> str:
    return user.get_full_name() or user.get_username()


def _refused(request, refused: InvitationRefused):
    response = render(
        request,
        "accounts/invitation_refused.html",
        {"message": refused.message, "code": refused.code},
        status=refused.status,
    )
    add_never_cache_headers(response)
    return response
