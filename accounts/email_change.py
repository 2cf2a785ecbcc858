"""A person's change of email address, verified by a link: asking for it sends a signed,
expiring link to the new address (:func:`email_change_request`); the address changes only when
that link is confirmed (:func:`email_change_confirm`), which tells the old address and writes
``email_changed`` to the audit log.

The link is signed (Django's signing, its own salt) for one person, one new address, the
address the person had when it was made (as a hash) and the person's latest confirmed change
then (the id of their latest ``email_changed`` entry, 0 for none), so that it works for
``PARLEY_EMAIL_CHANGE_HOURS`` and never after a further change: not even once the address is
back to what it was (A to B, B to A, then the first link again). Its signature rides in the
link's fragment (``/settings/account/email/confirm/#k=…``), which a browser never sends: no
access log or proxy sees it; the page's script puts it in the confirming POST."""

import hashlib
import logging
import smtplib
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage
from django.core.validators import validate_email
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse

from core.errors import ApplicationError
from core.throttles import rate_check
from reach.outbox import email_is_set_up

from . import audit
from .models import AuditEntry

SALT = "accounts.email-change"
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmailChanged:
    old: str
    new: str


def _fingerprint(address: str) -> str:
    """What a link keeps of the address it was made under: enough to tell a later change."""
    return hashlib.sha256(address.strip().lower().encode()).hexdigest()[:20]


def _last_change(user) -> int:
    """The id of the person's latest confirmed change of address (0 for none): it moves at
    every change, whatever the addresses."""
    return (
        AuditEntry.objects.filter(action=audit.Action.EMAIL_CHANGED, subject_id=user.pk)
        .order_by("-pk")
        .values_list("pk", flat=True)
        .first()
        or 0
    )


def email_change_token(*, user, new_email: str) -> str:
    return signing.dumps(
        {
            "u": user.pk,
            "e": new_email,
            "o": _fingerprint(user.email or ""),
            "c": _last_change(user),
        },
        salt=SALT,
    )


def email_change_url(*, user, new_email: str) -> str:
    """The whole link, on ``PARLEY_PUBLIC_URL``, its signature in the fragment."""
    token = email_change_token(user=user, new_email=new_email)
    return f"{settings.PARLEY_PUBLIC_URL}{reverse('email-change-confirm')}#k={token}"


def _taken(address: str, user) -> bool:
    return get_user_model().objects.filter(email__iexact=address).exclude(pk=user.pk).exists()


def _taken_error() -> ApplicationError:
    return ApplicationError(
        "email_taken",
        "Another account already uses this email address: choose another one.",
        status=409,
    )


def _cleaned(new_email: str, user) -> str:
    address = (new_email or "").strip()
    try:
        validate_email(address)
    except ValidationError:
        raise ApplicationError("invalid", "Enter a valid email address.") from None
    if address.lower() == (user.email or "").strip().lower():
        raise ApplicationError("unchanged", "This is already your email address.")
    if _taken(address, user):
        raise _taken_error()
    return address


def _send(*, to: str, subject: str, template: str, context: dict) -> None:
    EmailMessage(
        subject=subject,
        body=render_to_string(template, context),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[to],
        headers={"Auto-Submitted": "auto-generated"},
    ).send(fail_silently=False)


def email_change_request(*, user, new_email: str) -> str:
    """Send the link that confirms ``new_email`` as ``user``'s address to that address, and
    return the address (as it was cleaned). Raises ApplicationError: ``invalid``, ``unchanged``,
    ``email_taken`` (409, another account has it, whatever its case), ``email_off`` (email is
    not set up here), ``throttled`` (429, past PARLEY_EMAIL_CHANGE_RATE), ``email_failed`` (503,
    the mail server refused or was away). Changes nothing."""
    if not email_is_set_up():  # without email, no new address can be verified
        raise ApplicationError(
            "email_off",
            "This server does not send email, so a new address cannot be verified: "
            "ask an administrator to change it.",
            status=409,
        )
    # Counted first: whether an address is taken is told no more often than the rate allows.
    rate_check("email_changes", user)
    address = _cleaned(new_email, user)
    context = {
        "user": user,
        "new_email": address,
        "link": email_change_url(user=user, new_email=address),
        "hours": settings.PARLEY_EMAIL_CHANGE_HOURS,
    }
    try:
        _send(
            to=address,
            subject="Confirm your new email address for Parley",
            template="accounts/email/email_change_confirm.txt",
            context=context,
        )
    except (smtplib.SMTPException, OSError) as error:
        # The link is in the message, never in the log: only what went wrong, by type.
        logger.warning("An email change link could not be sent: %s", type(error).__name__)
        raise ApplicationError(
            "email_failed",
            "The link could not be sent just now: try again in a moment.",
            status=503,
        ) from None
    return address


def _opened(token: str) -> dict:
    max_age = settings.PARLEY_EMAIL_CHANGE_HOURS * 3600
    try:
        data = signing.loads(token or "", salt=SALT, max_age=max_age)
    except signing.SignatureExpired:
        raise ApplicationError(
            "link_expired",
            "This link has expired: ask for the change again on your account page.",
            status=410,
        ) from None
    except signing.BadSignature:
        data = None
    if not isinstance(data, dict) or not {"u", "e", "o", "c"} <= data.keys():
        raise ApplicationError(
            "link_invalid",
            "This link is not valid: open the one you were sent, whole.",
            status=400,
        )
    return data


def email_change_confirm(*, token: str, signed_in=None, request=None) -> EmailChanged:
    """Make the address a link was signed for its person's address, tell the old address, and
    record ``email_changed``. ``signed_in``: who the browser is signed in as, if anyone (a link
    for someone else is refused). Raises ApplicationError: ``link_invalid`` (400),
    ``link_expired`` (410), ``forbidden`` (403, another person's link, or a person no longer
    active), ``link_used`` (410, the address changed since the link was made), ``email_taken``
    (409, another account took the address meanwhile)."""
    data = _opened(token)
    with transaction.atomic():
        user = (
            get_user_model()
            .objects.select_for_update()
            .filter(pk=data["u"], is_active=True)
            .first()
        )
        if user is None:
            raise ApplicationError(
                "forbidden", "This link's account can no longer be changed.", status=403
            )
        if signed_in is not None and signed_in.is_authenticated and signed_in.pk != user.pk:
            raise ApplicationError(
                "forbidden",
                "This link is for another account than the one you are signed in as: "
                "sign out first, or open it where you are signed in as yourself.",
                status=403,
            )
        if _fingerprint(user.email or "") != data["o"] or _last_change(user) != data["c"]:
            raise ApplicationError(
                "link_used",
                "This link no longer works: your email address has changed since it was sent.",
                status=410,
            )
        new = data["e"]
        if _taken(new, user):
            raise _taken_error()
        old = user.email or ""
        user.email = new
        user.save(update_fields=["email"])
        audit.record(
            audit.Action.EMAIL_CHANGED, actor=user, subject=user, request=request, old=old, new=new
        )
        if old:
            transaction.on_commit(lambda: _tell_old_address(user=user, old=old, new=new))
    return EmailChanged(old=old, new=new)


def _tell_old_address(*, user, old: str, new: str) -> None:
    try:
        _send(
            to=old,
            subject="Your Parley email address was changed",
            template="accounts/email/email_changed_notice.txt",
            context={
                "user": user,
                "old": old,
                "new": new,
                "public_url": settings.PARLEY_PUBLIC_URL,
            },
        )
    except (smtplib.SMTPException, OSError) as error:
        # The change is made and recorded; a notice that could not go is said in the log.
        logger.warning("The notice of an email change could not be sent: %s", type(error).__name__)
