"""The sign-in pages: the site's login page (with "Sign in with …" when single sign-on is set
up, and without the password form under ``PARLEY_PASSWORD_LOGIN=0``), the admin's login under
the same rule, and the two steps of single sign-on (off to the provider, back from it). A
sign-in that fails or is refused comes back to the login page saying why, and is written to the
audit log with its reason."""

import logging
from urllib.parse import urlencode

import requests
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth import views as auth_views
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from . import audit, sso

logger = logging.getLogger(__name__)

PASSWORD_OFF = "Password sign-in is turned off here: sign in with {name}."
UNREACHABLE = (
    "{name} could not be reached, so you could not be signed in. Try again in a moment, "
    "or tell your administrator if it goes on."
)
CONSENT_REFUSED = "You did not allow Parley to sign you in with {name}."
STATE_MISMATCH = (
    "That sign-in could not be checked (it did not start from this browser, or it was "
    "already used). Please sign in again."
)
NOT_VERIFIED = "{name}'s answer could not be verified, so you were not signed in."
FAILED = "You could not be signed in with {name}."


def _login_url(next_url: str | None) -> str:
    url = reverse("login")
    return f"{url}?{urlencode({'next': next_url})}" if next_url else url


class LoginView(auth_views.LoginView):
    """Django's login page, with the single sign-on button and the password switch."""

    def get_context_data(self, **kwargs):
        return super().get_context_data(
            sso_name=sso.provider_name() if sso.configured() else "",
            password_login=sso.password_login_on(),
            **kwargs,
        )

    def post(self, request, *args, **kwargs):
        if not sso.password_login_on():
            return password_refused(request)
        return super().post(request, *args, **kwargs)


def password_refused(request):
    """The login page refusing a password (403), which is not checked."""
    audit.record(
        audit.Action.SIGN_IN_FAILED,
        request=request,
        subject_name=str(request.POST.get("username", ""))[:150],
        by="password",
        reason="password_login_off",
    )
    messages.error(request, PASSWORD_OFF.format(name=sso.provider_name()))
    context = {
        "next": request.POST.get("next") or request.GET.get("next", ""),
        "sso_name": sso.provider_name() if sso.configured() else "",
        "password_login": False,
    }
    return TemplateResponse(request, "registration/login.html", context, status=403)


def admin_login(request, extra_context=None):
    """The admin's login: its own form, or, with password sign-in off, the site's login page
    (single sign-on), coming back to the admin."""
    if sso.password_login_on():
        return admin.site.login(request, extra_context)
    if request.method == "POST":
        return password_refused(request)
    return HttpResponseRedirect(_login_url(request.GET.get("next") or reverse("admin:index")))


class SsoStartView(OIDCAuthenticationRequestView):
    """Off to the provider: the authorization request with state, nonce and PKCE (the
    library's), the endpoint from discovery."""

    get_settings = staticmethod(sso.oidc_setting)

    def __init__(self, *args, **kwargs):
        # The library reads the endpoint here; discovery waits for a request that needs it.
        super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)

    def get(self, request):
        if not sso.configured():
            raise Http404
        try:
            self.OIDC_OP_AUTH_ENDPOINT = sso.oidc_setting("OIDC_OP_AUTHORIZATION_ENDPOINT")
        except sso.ProviderUnavailable as exc:
            logger.warning("Single sign-on: the provider is unavailable: %s", exc)
            messages.error(request, UNREACHABLE.format(name=sso.provider_name()))
            return HttpResponseRedirect(_login_url(request.GET.get("next")))
        self.OIDC_RP_CLIENT_ID = settings.PARLEY_OIDC_CLIENT_ID
        return super().get(request)


class SsoCallbackView(OIDCAuthenticationCallbackView):
    """Back from the provider: its refusal, a state this browser did not start, the code
    exchanged and the person signed in, or refused with a reason."""

    get_settings = staticmethod(sso.oidc_setting)

    def get(self, request):
        if not sso.configured():
            raise Http404
        self.next_url = request.session.get("oidc_login_next")
        states = request.session.get("oidc_states") or {}
        state = request.GET.get("state", "")
        if request.GET.get("error"):
            if state in states:
                del request.session["oidc_states"][state]
                request.session.modified = True
            error = str(request.GET["error"])[:64]
            reason = "consent_refused" if error == "access_denied" else f"provider_{error}"
            return self.refused(reason, CONSENT_REFUSED if error == "access_denied" else FAILED)
        if not request.GET.get("code") or state not in states:
            return self.refused("state_mismatch", STATE_MISMATCH)
        try:
            response = super().get(request)
        except sso.SsoRefused as exc:
            return self.refused(exc.reason, exc.message, email=exc.email)
        except (sso.ProviderUnavailable, requests.RequestException) as exc:
            logger.warning("Single sign-on: the provider failed: %s", type(exc).__name__)
            return self.refused("provider_unreachable", UNREACHABLE)
        except SuspiciousOperation as exc:
            logger.warning("Single sign-on: the provider's answer was refused: %s", exc)
            return self.refused("token_invalid", NOT_VERIFIED)
        return response

    @property
    def failure_url(self):
        return _login_url(self.next_url)

    def login_failure(self):
        # Django's authenticate() found nobody (a lock in force, an inactive account): the
        # failure is already written to the audit log by its signal.
        messages.error(self.request, FAILED.format(name=sso.provider_name()))
        return HttpResponseRedirect(self.failure_url)

    def refused(self, reason: str, message: str, *, email: str = ""):
        audit.record(
            audit.Action.SIGN_IN_FAILED,
            request=self.request,
            subject_name=email,
            by="sso",
            reason=reason,
        )
        messages.error(self.request, message.format(name=sso.provider_name()))
        return HttpResponseRedirect(self.failure_url)
