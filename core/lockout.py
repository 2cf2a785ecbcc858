"""Login throttling on django-axes: failed sign-ins counted in the database (every process sees
them) by account and address and by address alone, each against its own limit; the lock they
set, when it ends and what people are told; and API tokens checked under the same locks.

Passwords reach Django's ``authenticate()`` from the two login forms (the site's and the
admin's), which axes watches through its backend and signals. API tokens (REST, the socket's
handshake, tails, MCP) and the scrape token of ``/metrics`` are checked by :func:`checked`,
which counts a wrong one as a failed sign-in with no account: it counts toward its address's
limit. Which key is a working token is asked of ``PARLEY_TOKEN_LOOKUP`` (the accounts app's):
a revoked or expired token is a wrong one.
"""

import ipaddress
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import TypeVar

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.handlers.proxy import AxesProxyHandler
from axes.helpers import get_client_username, get_cool_off
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.db import connection, transaction
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.module_loading import import_string
from rest_framework import authentication
from rest_framework import exceptions as drf_exceptions

from core.errors import ApplicationError

ACCOUNT = "account"
ADDRESS = "address"

T = TypeVar("T")


@dataclass(frozen=True)
class Lock:
    """A lock in force: on an account from an address, or on an address; and when it ends."""

    on: str  # ACCOUNT or ADDRESS
    until: datetime

    @property
    def retry_after(self) -> int:
        """Whole seconds until the lock ends (at least 1)."""
        return max(1, math.ceil((self.until - timezone.now()).total_seconds()))

    @property
    def message(self) -> str:
        minutes = math.ceil(self.retry_after / 60)
        wait = f"{minutes} minute{'s' if minutes != 1 else ''}"
        where = "to this account from your address" if self.on == ACCOUNT else "from your address"
        return (
            f"Too many failed sign-ins {where}: try again in {wait}, "
            "or ask an admin to lift the lock."
        )


class LockedOut(ApplicationError):
    """A sign-in or a token refused, unchecked, because a lock is in force: 429 with
    ``retry_after``, the seconds until it ends."""

    def __init__(self, lock: Lock):
        super().__init__("locked_out", lock.message, status=429)
        self.lock = lock
        self.retry_after = lock.retry_after


def client_address(request: HttpRequest) -> str | None:
    """The address failures are counted by (``AXES_CLIENT_IP_CALLABLE``): the connection's peer,
    never a header a client could write; under PARLEY_HTTPS, where the processes are reached
    only through the proxy, the address the proxy saw, which it put last in X-Forwarded-For.
    None for what is no address (Daphne's ``--proxy-headers`` passes on any text)."""
    address = request.META.get("REMOTE_ADDR")
    if settings.PARLEY_HTTPS and (forwarded := request.META.get("HTTP_X_FORWARDED_FOR")):
        address = forwarded.rsplit(",", 1)[-1]
    try:
        return str(ipaddress.ip_address((address or "").strip()))
    except ValueError:
        return None


def _counts(request: HttpRequest, username: str | None) -> list[tuple[str, object, int]]:
    """The failures within the cool-off that count toward each lock, with its limit: the
    account's from this address (when there is an account), and the address's, whatever the
    account, wrong tokens included. Summed over user agents, which cost nothing to change."""
    recent = AccessAttempt.objects.filter(
        ip_address=request.axes_ip_address, attempt_time__gte=get_cool_off_threshold(request)
    )
    counts = [(ADDRESS, recent, settings.PARLEY_LOGIN_ADDRESS_FAILURE_LIMIT)]
    if username is not None:
        counts.insert(0, (ACCOUNT, recent.filter(username=username), settings.AXES_FAILURE_LIMIT))
    return counts


@cache
def _failures_sql(no_address: bool) -> str:
    """The failures within the cool-off from an address (or from none: ``no_address``), and
    those of them on one account, as ``_counts`` counts them."""
    table = connection.ops.quote_name(AccessAttempt._meta.db_table)
    address = "ip_address IS NULL" if no_address else "ip_address = %s"
    return (
        "SELECT SUM(failures_since_start), "
        "SUM(CASE WHEN username = %s THEN failures_since_start ELSE 0 END) "
        f"FROM {table} WHERE {address} AND attempt_time >= %s"
    )


class LockoutHandler(AxesDatabaseHandler):
    """axes' database handler with a limit per lock: ``AXES_FAILURE_LIMIT`` for an account
    from one address, ``PARLEY_LOGIN_ADDRESS_FAILURE_LIMIT`` for an address (axes itself has
    one limit for all its lockout parameters). There is no lock on an account from everywhere:
    anyone could then lock anyone out."""

    def get_failures(self, request, credentials: dict | None = None) -> int:
        """The failures toward the nearer lock, on the scale of the account's limit, which is
        what axes compares them with: at that limit exactly when one count is at its own.

        The counts of ``_counts`` in one query of SQL written once: every API token checked
        (each socket's handshake, each request) asks this, where the ORM would compile its
        query afresh each time."""
        username = get_client_username(request, credentials)
        address = request.axes_ip_address
        since = connection.ops.adapt_datetimefield_value(get_cool_off_threshold(request))
        with connection.cursor() as cursor:
            cursor.execute(
                _failures_sql(address is None),
                [username, *([] if address is None else [address]), since],
            )
            by_address, by_account = cursor.fetchone()
        left = settings.PARLEY_LOGIN_ADDRESS_FAILURE_LIMIT - (by_address or 0)
        if username is not None:
            left = min(left, settings.AXES_FAILURE_LIMIT - (by_account or 0))
        return max(0, settings.AXES_FAILURE_LIMIT - left)

    def reset_user_attempts(self, request, credentials: dict | None = None) -> int:
        """After a sign-in succeeds, forget its account's failures from its address and no
        others: signing in to one's own account must not wipe out one's guesses at others'."""
        count, _ = AccessAttempt.objects.filter(
            username=get_client_username(request, credentials),
            ip_address=request.axes_ip_address,
        ).delete()
        return count


def lock_of(request: HttpRequest, credentials: dict | None = None) -> Lock | None:
    """The lock in force for this request's address (and account, if it names one), the one
    that ends last if both are; None if there is none. A lock ends once enough of the failures
    that set it are older than the cool-off."""
    AxesProxyHandler.update_request(request)
    cool_off = get_cool_off(request)
    locks = []
    for on, attempts, limit in _counts(request, get_client_username(request, credentials)):
        total = 0
        newest_first = attempts.order_by("-attempt_time")
        for attempt_time, failures in newest_first.values_list(
            "attempt_time", "failures_since_start"
        ):
            total += failures
            if total >= limit:
                locks.append(Lock(on, attempt_time + cool_off))
                break
    return max(locks, key=lambda lock: lock.until, default=None)


def _locked(request: HttpRequest, credentials: dict | None) -> Lock:
    # A lock that ended a moment ago still refuses this once, for as long as the cool-off.
    return lock_of(request, credentials) or Lock(ADDRESS, timezone.now() + get_cool_off(request))


# Pages -----------------------------------------------------------------------------------------


def lockout_page(request, original_response=None, credentials=None) -> TemplateResponse:
    """The answer to a sign-in on a login form refused for a lockout (``AXES_LOCKOUT_CALLABLE``,
    called by axes' middleware, off the event loop): a page saying why and for how long, 429
    with ``Retry-After``. The credentials are the ones axes kept on the request (its middleware
    passes them in a different place under ASGI than under WSGI)."""
    lock = _locked(request, getattr(request, "axes_credentials", None))
    response = TemplateResponse(
        request,
        "registration/locked_out.html",
        {"message": lock.message, "until": lock.until, "login_path": request.path},
        status=429,
    )
    response["Retry-After"] = str(lock.retry_after)
    return response.render()


# Tokens ----------------------------------------------------------------------------------------

# What of a request identifies an attempt, besides its peer's address.
ATTEMPT_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_USER_AGENT", "HTTP_ACCEPT")


def attempt_request(meta: dict, *, path: str, method: str) -> HttpRequest:
    """A request as axes reads one: what identifies an attempt (its peer's address and the
    proxy's X-Forwarded-For, the user agent, what it accepts) and nothing of its body, so that
    counting a failure never parses what was sent."""
    attempt = HttpRequest()
    attempt.method = method
    attempt.path = attempt.path_info = path
    attempt.META = {
        "PATH_INFO": path,
        "REMOTE_ADDR": meta.get("REMOTE_ADDR") or "",
        **{key: meta[key] for key in ATTEMPT_HEADERS if key in meta},
    }
    return attempt


def attempt_from_scope(scope) -> HttpRequest:
    """The attempt an ASGI connection (a socket's handshake, an MCP request) makes."""
    meta = {"REMOTE_ADDR": (scope.get("client") or (None,))[0]}
    for name, value in scope.get("headers", ()):
        key = "HTTP_" + name.decode("latin1").upper().replace("-", "_")
        if key in ATTEMPT_HEADERS:
            meta[key] = value.decode("latin1")
    return attempt_request(meta, path=scope.get("path", ""), method=scope.get("method", "GET"))


def attempt_from_request(request) -> HttpRequest:
    """The attempt a Django (or DRF) request makes."""
    return attempt_request(request.META, path=request.path, method=request.method)


def checked(attempt: HttpRequest, check: Callable[[], T]) -> T:
    """``check()``, a credential's check that names no account (an API token, the scrape
    token), under the lock of the attempt's address: what it returns, a falsy answer (a wrong
    credential) counted as a failed sign-in from that address. Raises :class:`LockedOut` when
    the address is locked out, before anything is checked, so that a locked-out guesser learns
    nothing more (a right credential from that address is refused too, until the lock ends)."""
    credentials = {"username": None}
    if not AxesProxyHandler.is_allowed(attempt, credentials):
        raise LockedOut(_locked(attempt, credentials))
    found = check()
    if not found:
        _record_failure(attempt, credentials)
        if attempt.axes_locked_out:
            raise LockedOut(_locked(attempt, credentials))
    return found


def _record_failure(attempt: HttpRequest, credentials: dict) -> None:
    """axes records a failure that names no account (and never the secret). Its record is
    found, or made, by account, address and user agent, and no account is no unique key: two
    first failures at once from one address would each make one, and every later look-up would
    fail on the two. So failures from one address are recorded one at a time (on PostgreSQL, a
    lock on the address for the transaction; SQLite's writers take turns already)."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                key = f"parley.lockout:{attempt.axes_ip_address}"
                cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [key])
        user_login_failed.send(sender=__name__, credentials=credentials, request=attempt)


def token_for(attempt: HttpRequest, key: str):
    """``(user, token)`` for the API key ``key``, checked under the address's lock (see
    :func:`checked`) by ``PARLEY_TOKEN_LOOKUP``; None for a wrong, revoked or expired key or an
    inactive account (a failed sign-in). The token is the lookup's: it has an id, ``pk``."""
    lookup = import_string(settings.PARLEY_TOKEN_LOOKUP)
    return checked(attempt, lambda: lookup(key))


def key_from(authorization: str) -> str | None:
    """The key of ``Authorization: Token <key>`` or ``Bearer <key>``; None for anything else."""
    scheme, _, key = authorization.partition(" ")
    if scheme.lower() in ("token", "bearer") and key.strip():
        return key.strip()
    return None


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's ``Authorization: Token <key>`` under the login locks: a wrong key counts as a
    failed sign-in from the caller's address, and an address locked out gets 429 ``locked_out``
    with ``Retry-After`` (core.api renders it), whatever key it sends. The answer without
    credentials stays DRF's: 401 with ``WWW-Authenticate: Token``. (Here, not in core.api,
    because DRF imports its authentication classes while its views are still loading.)"""

    def authenticate(self, request):
        self.attempt = attempt_from_request(request)
        return super().authenticate(request)

    def authenticate_credentials(self, key):
        found = token_for(self.attempt, key)
        if found is None:
            raise drf_exceptions.AuthenticationFailed("Invalid token.")
        return found


class BearerTokenAuthentication(TokenAuthentication):
    """The same key as ``Authorization: Bearer <key>``, as OAuth-minded clients send it."""

    keyword = "Bearer"


def api_token_id(request) -> str | None:
    """The id of the API token a DRF request was authenticated with (None: a browser session,
    an answer link)."""
    if isinstance(getattr(request, "successful_authenticator", None), TokenAuthentication):
        return request.auth.pk
    return None
