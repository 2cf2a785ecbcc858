"""Password change and reset by email: Django's own views, in the house's pages, audited
(``password_changed``, ``password_reset``), and refused where there is no password to change:
when password sign-in is off (``PARLEY_PASSWORD_LOGIN``, for single sign-on) or for a person
whose account has no usable password (one who signs in only through single sign-on).

A reset request answers the same whether or not an address has an account (Django's form sends
nothing to an unknown or inactive address, or one with no usable password), and is throttled
per address asked for (``PARLEY_PASSWORD_RESET_RATE``, counted by its hash) and per client
address (``PARLEY_PASSWORD_RESET_CLIENT_RATE``). The emailed link carries its token in its
fragment (``/reset/#u=…&k=…``), which no server or access log sees: its page's script posts it,
and it is then kept in the session as Django's own confirm view keeps it.

The reset email is sent **after** the response, by a small pool of sender threads
(:func:`send_after_response`): a request for an address with an account answers as soon as one
for an address without, so its timing does not tell which addresses have accounts. What waits
to be sent lives in the process only: a process that stops loses it, and the person asks again
(at most ``RESET_MAIL_WAITING`` wait; past that, a request's email is dropped and logged)."""

import hashlib
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as futures_wait

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import forms as auth_forms
from django.contrib.auth import get_user_model
from django.contrib.auth import views as auth_views
from django.contrib.auth.tokens import default_token_generator
from django.db import connections
from django.http import HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse, reverse_lazy
from django.utils.http import urlsafe_base64_decode
from django.views.decorators.http import require_http_methods

from core.errors import ApplicationError
from core.lockout import client_address
from core.throttles import rate_check
from reach.outbox import email_is_set_up

from . import audit
from .sso import password_login_on

logger = logging.getLogger(__name__)
RESET_MAIL_WAITING = 100  # reset emails waiting for a sender, at most
_senders = ThreadPoolExecutor(max_workers=2, thread_name_prefix="parley-reset-mail")
_room = threading.BoundedSemaphore(RESET_MAIL_WAITING)
_pending: set = set()
_pending_lock = threading.Lock()


def send_after_response(send) -> bool:
    """Run ``send()`` (one email's sending) on a sender thread, and return at once: False when
    ``RESET_MAIL_WAITING`` already wait (it is then dropped, and said in the log). A failure is
    logged by its type only: the message holds a link."""
    if not _room.acquire(blocking=False):
        logger.warning("A password reset email was dropped: %d wait already.", RESET_MAIL_WAITING)
        return False

    def run():
        try:
            send()
        except Exception as error:
            logger.warning("A password reset email could not be sent: %s", type(error).__name__)
        finally:
            _room.release()
            connections.close_all()  # this thread's own, if sending touched the database

    with _pending_lock:
        future = _senders.submit(run)
        _pending.add(future)
    future.add_done_callback(_settled)
    return True


def _settled(future) -> None:
    with _pending_lock:
        _pending.discard(future)


def reset_mail_settled(timeout: float = 30) -> bool:
    """Wait until every reset email handed to the senders so far is sent (or failed); whether
    they all were within ``timeout`` seconds. For tests and an orderly stop."""
    with _pending_lock:
        waiting = list(_pending)
    return not futures_wait(waiting, timeout=timeout).not_done


class PasswordResetForm(auth_forms.PasswordResetForm):
    """Django's, whose email goes out after the response (see the module's docstring)."""

    def send_mail(self, *args, **kwargs):
        send = super().send_mail
        send_after_response(lambda: send(*args, **kwargs))


def password_allowed(user) -> bool:
    """Whether ``user`` has a password to change here."""
    return password_login_on() and user.is_authenticated and user.has_usable_password()


def password_reset_offered(request) -> dict:
    """A context processor: whether the login page offers a reset by email."""
    return {"password_reset_offered": password_login_on() and email_is_set_up()}


def _unavailable(request, *, reset: bool):
    return render(
        request,
        "accounts/password_unavailable.html",
        {"password_login": password_login_on(), "reset": reset},
        status=404 if reset else 403,
    )


class PasswordChangeView(auth_views.PasswordChangeView):
    """Django's: the old password, a new one twice (its validators); the session stays signed
    in (update_session_auth_hash), the person's other sessions are signed out (their hash no
    longer matches)."""

    template_name = "accounts/password_change.html"
    success_url = reverse_lazy("account-settings")

    def dispatch(self, request, *args, **kwargs):
        if request.user.is_authenticated and not password_allowed(request.user):
            return _unavailable(request, reset=False)
        return super().dispatch(request, *args, **kwargs)

    def form_valid(self, form):
        response = super().form_valid(form)
        user = form.user
        audit.record(audit.Action.PASSWORD_CHANGED, actor=user, subject=user, request=self.request)
        messages.success(self.request, "Your password is changed.")
        return response


def _address_key(address: str) -> str:
    # Counted by a hash: the cache (Redis) never holds the addresses people ask for.
    return hashlib.sha256(address.strip().lower().encode()).hexdigest()


class PasswordResetView(auth_views.PasswordResetView):
    form_class = PasswordResetForm
    template_name = "accounts/password_reset.html"
    email_template_name = "accounts/email/password_reset.txt"
    subject_template_name = "accounts/email/password_reset_subject.txt"
    success_url = reverse_lazy("password-reset-sent")

    def dispatch(self, request, *args, **kwargs):
        if not password_login_on():
            return _unavailable(request, reset=True)
        return super().dispatch(request, *args, **kwargs)

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "email_set_up": email_is_set_up()}

    def form_valid(self, form):
        if not email_is_set_up():
            form.add_error(None, "This server does not send email: ask an administrator.")
            return self.render_to_response(self.get_context_data(form=form), status=409)
        try:
            rate_check("password_reset_clients", client_address(self.request) or "unknown")
            rate_check("password_resets", _address_key(form.cleaned_data["email"]))
        except ApplicationError as error:
            form.add_error(None, error.message)
            response = self.render_to_response(self.get_context_data(form=form), status=429)
            if error.retry_after:
                response["Retry-After"] = str(error.retry_after)
            return response
        self.extra_email_context = {
            "public_url": settings.PARLEY_PUBLIC_URL,
            "hours": settings.PASSWORD_RESET_TIMEOUT / 3600,
        }
        return super().form_valid(form)


class PasswordResetDoneView(auth_views.PasswordResetDoneView):
    template_name = "accounts/password_reset_sent.html"


@require_http_methods(["GET", "POST"])
def password_reset_link(request):
    """The page a reset link opens (``/reset/#u=…&k=…``). GET: a button (the page's script puts
    the fragment in the form); POST: a valid link goes on to Django's confirm view with its
    token kept in the session, as that view keeps it; one that is not valid, used or past its
    time gets a page saying so (400)."""
    if not password_login_on():
        return _unavailable(request, reset=True)
    if request.method == "GET":
        return render(request, "accounts/password_reset_link.html")
    uidb64, token = request.POST.get("u", ""), request.POST.get("k", "")
    try:
        pk = urlsafe_base64_decode(uidb64).decode()
        user = get_user_model()._default_manager.filter(pk=pk, is_active=True).first()
    except (ValueError, TypeError, OverflowError, UnicodeDecodeError):
        user = None
    if user is None or not default_token_generator.check_token(user, token):
        return render(request, "accounts/password_reset_link.html", {"refused": True}, status=400)
    request.session[auth_views.INTERNAL_RESET_SESSION_TOKEN] = token
    return HttpResponseRedirect(
        reverse(
            "password-reset-confirm",
            kwargs={"uidb64": uidb64, "token": auth_views.PasswordResetConfirmView.reset_url_token},
        )
    )


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    """Django's: a new password twice, for a link checked against the session; the link is
    then spent (the password's hash is part of its token), and every session of the person is
    signed out."""

    template_name = "accounts/password_reset_confirm.html"
    success_url = reverse_lazy("password-reset-complete")

    def dispatch(self, *args, **kwargs):
        if not password_login_on():
            return _unavailable(self.request, reset=True)
        return super().dispatch(*args, **kwargs)

    def form_valid(self, form):
        response = super().form_valid(form)
        audit.record(
            audit.Action.PASSWORD_RESET, actor=self.user, subject=self.user, request=self.request
        )
        return response


class PasswordResetCompleteView(auth_views.PasswordResetCompleteView):
    template_name = "accounts/password_reset_complete.html"
