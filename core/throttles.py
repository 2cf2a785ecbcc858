"""How often one person may do what costs the most (start turns, create conversations, have
questions asked on their behalf): DRF's throttling, per person, its counts in Django's cache
(shared by every process when the cache is on Redis, see config.settings), and the same check
for edges that are not DRF views (the socket's frames, a form, a service).

Past a rate the request is refused with 429 ``throttled`` and how many seconds to wait
(``retry_after``, and the Retry-After header over HTTP), before anything is written. A refused
request is not counted. Across processes the counts are read and written back (DRF's sliding
window), so a burst racing between processes may get a request or two past the rate. Should the
cache be away, requests are let through uncounted (and it is logged).
"""

import functools
import logging
import math
from types import SimpleNamespace

from django.conf import settings
from django.core.cache import DEFAULT_CACHE_ALIAS, caches
from django.core.signals import setting_changed
from django.dispatch import receiver
from rest_framework.throttling import SimpleRateThrottle

from core.errors import ApplicationError, too_many
from core.metrics import LIMIT_REFUSALS

logger = logging.getLogger(__name__)

# What each rate limits: the setting that holds it, and what a refusal says was done too often.
RATES = {
    "turns": ("PARLEY_TURN_RATE", "You have started too many turns"),
    "conversations": ("PARLEY_CONVERSATION_RATE", "You have created too many conversations"),
    "questions": ("PARLEY_QUESTION_RATE", "Too many questions were asked on your behalf"),
    "password_resets": (
        "PARLEY_PASSWORD_RESET_RATE",
        "Too many password resets were asked for this address",
    ),
    "password_reset_clients": (
        "PARLEY_PASSWORD_RESET_CLIENT_RATE",
        "Too many password resets were asked from your address",
    ),
    "email_changes": ("PARLEY_EMAIL_CHANGE_RATE", "You have asked to change your email too often"),
}


def throttled(wait: float, what: str = "You have sent too many requests") -> ApplicationError:
    """429 ``throttled``: try again after ``wait`` seconds."""
    seconds = max(1, math.ceil(wait))
    return too_many("throttled", f"{what}; try again in {seconds} s.", retry_after=seconds)


@functools.cache
def _shared_cache():
    """One cache object for the whole process. Django makes one per thread, and so per request
    under ASGI (each sync view runs in a thread of its own): on Redis, a connection pool and a
    connection per request. Redis's client is safe to share between threads, and so is the
    in-memory cache."""
    return caches.create_connection(DEFAULT_CACHE_ALIAS)


@receiver(setting_changed)
def _caches_changed(setting, **kwargs):
    if setting == "CACHES":
        _shared_cache.cache_clear()


class PersonRateThrottle(SimpleRateThrottle):
    """DRF's rate throttle, counted per person and ``scope`` (a key of ``RATES``), for the
    methods in ``methods``; its rate read from the settings when it is made (so that a changed
    setting applies at once). Over the rate it raises ``throttled`` itself, naming what was
    done too often, rather than DRF's generic refusal."""

    scope = ""
    methods = ("POST",)

    @property
    def cache(self):
        return _shared_cache()

    def get_rate(self):
        return getattr(settings, RATES[self.scope][0])

    def get_cache_key(self, request, view):
        user = request.user
        if user is None or not user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": user.pk}

    def allow_request(self, request, view):
        if request.method not in self.methods:
            return True
        try:
            allowed = super().allow_request(request, view)
        except Exception as exc:
            # The cache (Redis) is away: let the request through, uncounted, rather than
            # refuse everyone; the limit is a guard.
            _cache_away(exc)
            return True
        _cache_back()
        if allowed:
            return True
        LIMIT_REFUSALS.labels(self.scope).inc()
        raise throttled(self.wait() or self.duration, RATES[self.scope][1])


_away = False


def _cache_away(exc: Exception) -> None:
    global _away
    if not _away:
        _away = True
        logger.warning("The cache is away (%r): people's rates are not counted", exc)


def _cache_back() -> None:
    global _away
    if _away:
        _away = False
        logger.info("The cache is back: people's rates are counted again")


class TurnRateThrottle(PersonRateThrottle):
    scope = "turns"


class ConversationRateThrottle(PersonRateThrottle):
    scope = "conversations"


class QuestionRateThrottle(PersonRateThrottle):
    scope = "questions"


class PasswordResetRateThrottle(PersonRateThrottle):
    """Counted per address asked for (its hash), whether or not an account has it."""

    scope = "password_resets"


class PasswordResetClientRateThrottle(PersonRateThrottle):
    """Counted per client address: one client asking for many addresses."""

    scope = "password_reset_clients"


class EmailChangeRateThrottle(PersonRateThrottle):
    scope = "email_changes"


THROTTLES = {
    throttle.scope: throttle
    for throttle in (
        TurnRateThrottle,
        ConversationRateThrottle,
        QuestionRateThrottle,
        PasswordResetRateThrottle,
        PasswordResetClientRateThrottle,
        EmailChangeRateThrottle,
    )
}


def rate_check(scope: str, user) -> None:
    """Count one more of ``scope`` for ``user`` (a user, a user's id, or any other key of what
    is counted: a hashed address), or raise 429 ``throttled`` (counting nothing) if they are past
    its rate. Sync: the cache may be Redis."""
    if not hasattr(user, "is_authenticated"):
        user = SimpleNamespace(pk=user, is_authenticated=True)
    THROTTLES[scope]().allow_request(SimpleNamespace(user=user, method="POST"), None)
