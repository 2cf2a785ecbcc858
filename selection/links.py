"""Answer links: a link signed for one person and one question, sent where they work (email,
Slack). Opening it shows the question (it never answers: mail scanners open links); it signs
its person in for that one question only (read it, browse its folders, answer it, as the REST
API does, with ``X-Parley-Link``), never for anything else, and the access rule is asked as for
any other way in. It shows the question's outcome for ``PARLEY_ANSWER_LINK_DAYS`` after the
question's expiry, and then nothing.

The link carries its signature in its fragment (``/answer/<id>/#k=…``), which a browser never
sends: no server, proxy or access log ever sees it (Daphne's access log writes query strings).
The page it opens is the same for everyone; its script reads the fragment and asks the API."""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.urls import reverse
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication
from rest_framework import exceptions as drf_exceptions
from rest_framework.settings import api_settings

from core.errors import ApplicationError
from core.lockout import attempt_from_request, checked

from .models import Selection

SALT = "selection.answer-link"
HEADER = "X-Parley-Link"


class LinkRefused(Exception):
    """A link that does not open: ``status`` and what to tell its holder."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class AnswerLink:
    """A checked link: its question's id and its person (DRF's ``request.auth`` with one)."""

    selection_id: str
    user: object


def answer_link_token(*, selection_id: str, user) -> str:
    return signing.dumps({"s": selection_id, "u": user.pk}, salt=SALT)


def answer_link_url(*, selection_id: str, user) -> str:
    """The whole link, on ``PARLEY_PUBLIC_URL``."""
    path = reverse("answer-link", args=[selection_id])
    token = answer_link_token(selection_id=selection_id, user=user)
    return f"{settings.PARLEY_PUBLIC_URL}{path}#k={token}"


def _signed(token: str) -> dict | None:
    try:
        data = signing.loads(token, salt=SALT)
    except signing.BadSignature:
        return None
    return data if isinstance(data, dict) else None


def open_link(request, *, token: str, selection_id: str) -> AnswerLink:
    """The link's person and question, checked: a wrong signature (counted as a failed sign-in
    from the caller's address, under its lock), another question's link, a person no longer
    active, a link past its time, or a browser signed in as someone else are refused with
    :class:`LinkRefused`. Whether the person may still see or answer it is the access rule's
    (selection.access), asked by the caller."""
    data = checked(attempt_from_request(request), lambda: _signed(token or ""))
    if not data:
        raise LinkRefused(401, "This link is not valid: open the one you were sent, whole.")
    if data.get("s") != selection_id:
        raise LinkRefused(404, "This link is not for this question.")
    user = get_user_model().objects.filter(pk=data.get("u"), is_active=True).first()
    if user is None:
        raise LinkRefused(403, "This link's person can no longer sign in to Parley.")
    signed_in = getattr(getattr(request, "_request", request), "user", None)
    if getattr(signed_in, "is_authenticated", False) and signed_in.pk != user.pk:
        name = user.get_full_name() or user.get_username()
        raise LinkRefused(
            403,
            f"This link is for {name}, and you are signed in to Parley as someone else: "
            "answer from Parley itself, or sign out first.",
        )
    expires_at = (
        Selection.objects.filter(pk=selection_id).values_list("expires_at", flat=True).first()
    )
    grace = timedelta(days=settings.PARLEY_ANSWER_LINK_DAYS)
    if expires_at is None or timezone.now() > expires_at + grace:
        raise LinkRefused(410, "This link has expired.")
    return AnswerLink(selection_id=selection_id, user=user)


class AnswerLinkAuthentication(authentication.BaseAuthentication):
    """``X-Parley-Link: <token>`` on the question's own endpoints (read, browse, reply): the
    link's person, for that question only (see :class:`LinkScoped`)."""

    def authenticate(self, request):
        token = request.headers.get(HEADER)
        if not token:
            return None
        selection_id = request.parser_context["kwargs"].get("selection_id")
        try:
            link = open_link(request, token=token, selection_id=selection_id)
        except LinkRefused as refused:
            if refused.status == 401:
                raise drf_exceptions.AuthenticationFailed(refused.message) from None
            code = {403: "forbidden", 404: "not_found", 410: "link_expired"}[refused.status]
            raise ApplicationError(code, refused.message, status=refused.status) from None
        return link.user, link

    def authenticate_header(self, request):
        # A request with no credentials is told the API's own scheme (401, not 403).
        return "Token"


class AnswerLinkScheme(OpenApiAuthenticationExtension):
    """The answer link in the API's schema: a key in a header, on the endpoints that take it."""

    target_class = AnswerLinkAuthentication
    name = "answerLink"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": HEADER,
            "description": "An answer link's signature (the `k` of its `#k=…`): that one "
            "question's person, for that question only.",
        }


def link_scoped(view_class):
    """For a view of one question (read, browse, reply): its answer link is accepted too, first
    (so that a browser signed in as someone else is refused rather than taken for them)."""
    view_class.authentication_classes = [
        AnswerLinkAuthentication,
        *api_settings.DEFAULT_AUTHENTICATION_CLASSES,
    ]
    return view_class
