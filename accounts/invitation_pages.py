"""The page an invitation's link opens, ``/invitations/open/#k=…``. The link's signature is in
its fragment, which no browser sends: GET serves a page whose script (parley/link-form.js) puts
it in a form, and the person presses **Open the invitation** (POST). Only then is it shown what
the invitation is (who invited, to which workspace, as what), never accepted: mail scanners
open links. Its forms carry the signature on (in POST bodies, which no access log records):
**Join** accepts it as the person signed in (whose email must be the invited address); signed
out, **Create my account and join** makes an account for the invited address (when password
sign-in is on), and **Sign in** keeps the signature in the session and comes back to this
page, whose GET then offers it again, without a fragment. Single sign-on is a plain link
(``/oidc/authenticate/?next=…``), the signature kept in the session when the invitation was
opened signed out: a form posted here could not go on to the provider, whose origin the pages'
Content-Security-Policy (``form-action 'self'``) refuses at the end of a form's redirects."""

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth import login
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_http_methods

from core.decoding import check_text
from core.errors import ApplicationError

from . import sso
from .invitations import (
    InvitationRefused,
    account_create_and_accept,
    invitation_accept,
    invitation_open,
)

BACKEND = "django.contrib.auth.backends.ModelBackend"
# Where a signature waits while its person signs in (kept as Django keeps a reset's token).
SESSION_KEY = "parley_invitation"


@require_http_methods(["GET", "POST"])
def invitation_page(request):
    if request.method == "GET":
        return _page(request, "accounts/invitation_open.html", {"k": _kept(request)})
    token = request.POST.get("k", "")
    action = request.POST.get("action", "open")
    try:
        for value in request.POST.values():
            check_text(value, what="The form")
        invitation = invitation_open(token)
    except ApplicationError as refused:
        _forget(request, token)
        return _refused(request, refused)
    here = reverse("invitation")
    sso_on = sso.configured()
    if action == "sign-in" and not request.user.is_authenticated:
        request.session[SESSION_KEY] = token
        return redirect(f"{reverse('login')}?{urlencode({'next': here})}")
    user = request.user
    if sso_on and not user.is_authenticated:
        # Kept for the single sign-on link, which brings the person back here signed in.
        request.session[SESSION_KEY] = token
    context = {
        "invitation": invitation,
        "k": token,
        "inviter": _name(invitation.invited_by) if invitation.invited_by else "An owner",
        "sso": sso_on,
        "sso_url": f"{reverse('oidc_authentication_init')}?{urlencode({'next': here})}",
        "sso_name": sso.provider_name() or "single sign-on",
        "password_login": sso.password_login_on(),
        "form": {"username": "", "name": ""},
    }
    if user.is_authenticated:
        context["matches"] = (user.email or "").lower() == invitation.email.lower()
    status = 200
    if action in ("accept", "signup"):
        try:
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
            _forget(request, token)
            return _refused(request, refused)
        except ApplicationError as error:
            context["error"] = error.message
            context["form"] = {
                "username": request.POST.get("username", ""),
                "name": request.POST.get("name", ""),
            }
            status = error.status if error.status in (400, 403) else 400
        else:
            _forget(request, token)
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
    return _page(request, "accounts/invitation.html", context, status=status)


def _kept(request) -> str:
    kept = request.session.get(SESSION_KEY, "")
    return kept if isinstance(kept, str) else ""


def _forget(request, token: str) -> None:
    if request.session.get(SESSION_KEY) == token:
        del request.session[SESSION_KEY]


def _name(user) -> str:
    return user.get_full_name() or user.get_username()


def _page(request, template: str, context: dict, status: int = 200):
    response = render(request, template, context, status=status)
    add_never_cache_headers(response)
    return response


def _refused(request, refused: ApplicationError):
    return _page(
        request,
        "accounts/invitation_refused.html",
        {"message": refused.message, "code": refused.code},
        status=refused.status if refused.status in (400, 404, 410) else 400,
    )
