"""Invitations: an owner invites an email address to a workspace with a role; the link sent by
email is signed (its own salt), expires after ``PARLEY_INVITATION_DAYS`` and is used once. Its
signature rides in the link's fragment, never in a path or query an access log records.

Rules, chosen once here:

- Inviting someone already in the workspace changes nothing: ``already_member`` (409).
- Inviting an address that has a pending invitation replaces it: the new one (its role, a
  fresh expiry) is sent, and the old link stops working.
- An invitation is written, then sent (never inside a transaction: SQLite's writers would wait
  on the mail server); if the mail server refuses it, it is withdrawn and the owner told
  (``email_failed``, 502). Email must be set up (``PARLEY_EMAIL_URL``), or ``email_not_set_up``.
- Accepting is a compare-and-set on ``accepted_at``: of two accepts at once, one wins and the
  other is told the link was used. The account's email must be the invited address
  (case-insensitive).
- An invitation carries its inviter's ownership: it opens and is accepted only while the person
  who sent it is still an active owner of the workspace (checked when it is opened, and again
  under the owners' lock when it is accepted); otherwise ``inviter_not_owner`` (410), and
  nothing changes. An inviter who is an owner again makes it usable again, until it expires.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.mail import EmailMultiAlternatives, get_connection
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from conversations.models import Membership, Workspace
from conversations.services import role_checked
from core.errors import ApplicationError

from . import audit
from .members import lock_owners
from .models import AuditEntry, Invitation
from .sso import password_login_on

Action = AuditEntry.Action
SALT = "accounts.invitation"


class InvitationRefused(ApplicationError):
    """A link that does not open (404 tampered or unknown, 410 expired, revoked or used)."""


def invitation_token(invitation: Invitation) -> str:
    return signing.dumps({"i": invitation.pk}, salt=SALT)


def invitation_url(invitation: Invitation) -> str:
    """The whole link, on ``PARLEY_PUBLIC_URL``, its signature in the fragment
    (``/invitations/open/#k=…``): a browser never sends a fragment, so no access log or proxy
    sees it; the page's script puts it in the form the person submits (POST)."""
    return f"{settings.PARLEY_PUBLIC_URL}{reverse('invitation')}#k={invitation_token(invitation)}"


def _is_member(workspace: Workspace, email: str) -> bool:
    return Membership.objects.filter(
        workspace=workspace, user__email__iexact=email, user__is_active=True
    ).exists()


def invitation_send(*, workspace: Workspace, email: str, role: str, invited_by, request=None):
    """Invite ``email`` to ``workspace`` as ``role`` and email them the link. Returns the
    invitation. Raises ApplicationError ``invalid`` (400), ``already_member`` (409),
    ``email_not_set_up`` (409) or ``email_failed`` (502)."""
    email = (email or "").strip()
    try:
        validate_email(email)
    except ValidationError:
        raise ApplicationError("invalid", "email: not an email address.") from None
    role_checked(role)
    if _is_member(workspace, email):
        raise ApplicationError(
            "already_member",
            f"{email} is already in {workspace.name}: nothing was sent, nothing changed.",
            status=409,
        )
    if not settings.PARLEY_EMAIL_URL:
        raise ApplicationError(
            "email_not_set_up",
            "Email is not set up on this server (PARLEY_EMAIL_URL): invitations are sent by "
            "email. Add the person in the admin instead.",
            status=409,
        )
    now = timezone.now()
    invitation = Invitation.objects.create(
        workspace=workspace,
        email=email,
        role=role,
        invited_by=invited_by,
        created_at=now,
        expires_at=now + timedelta(days=settings.PARLEY_INVITATION_DAYS),
    )
    try:
        _email(invitation)
    except Exception as error:
        Invitation.objects.filter(pk=invitation.pk).delete()
        raise ApplicationError(
            "email_failed",
            f"The invitation could not be emailed to {email} ({type(error).__name__}): "
            "nothing was sent; try again later.",
            status=502,
        ) from None
    with transaction.atomic():
        # The pending invitations it replaces stop working.
        replaced = (
            Invitation.objects.unused()
            .filter(workspace=workspace, email__iexact=email, created_at__lte=invitation.created_at)
            .exclude(pk=invitation.pk)
        )
        replaced.update(revoked_at=timezone.now())
        audit.record(
            Action.INVITATION_SENT,
            actor=invited_by,
            workspace=workspace,
            request=request,
            subject_name=email,
            role=role,
            invitation=invitation.pk,
        )
    return invitation


def _email(invitation: Invitation) -> None:
    inviter = invitation.invited_by
    context = {
        "invitation": invitation,
        "workspace": invitation.workspace,
        "inviter": (inviter.get_full_name() or inviter.get_username()) if inviter else "An owner",
        "role": invitation.get_role_display().lower(),
        "link": invitation_url(invitation),
        "days": settings.PARLEY_INVITATION_DAYS,
    }
    message = EmailMultiAlternatives(
        subject=f"{context['inviter']} invited you to {invitation.workspace.name} on Parley",
        body=render_to_string("accounts/email/invitation.txt", context),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[invitation.email],
        headers={"Auto-Submitted": "auto-generated", "X-Parley-Invitation": invitation.pk},
    )
    message.attach_alternative(
        render_to_string("accounts/email/invitation.html", context), "text/html"
    )
    with get_connection(fail_silently=False) as connection:
        connection.send_messages([message])


def invitation_revoke(*, invitation: Invitation, actor, request=None) -> Invitation:
    """Revoke a pending invitation; its link stops working. ApplicationError ``not_pending``
    (409) for one already accepted, revoked or expired."""
    with transaction.atomic():
        now = timezone.now()
        changed = Invitation.objects.filter(pk=invitation.pk).pending(now).update(revoked_at=now)
        if not changed:
            raise ApplicationError(
                "not_pending",
                "This invitation was already accepted, revoked or expired.",
                status=409,
            )
        audit.record(
            Action.INVITATION_REVOKED,
            actor=actor,
            workspace=invitation.workspace,
            request=request,
            subject_name=invitation.email,
            invitation=invitation.pk,
        )
    invitation.refresh_from_db()
    return invitation


def invitation_open(token: str) -> Invitation:
    """The pending invitation a link names. Raises :class:`InvitationRefused`: 404 for a link
    that is not one (tampered, cut short), 410 for one expired, revoked or already used."""
    try:
        data = signing.loads(token or "", salt=SALT)
    except signing.BadSignature:
        data = None
    invitation = (
        Invitation.objects.select_related("workspace", "invited_by")
        .filter(pk=data.get("i") if isinstance(data, dict) else None)
        .first()
    )
    if invitation is None:
        raise InvitationRefused(
            "invitation_not_found",
            "This invitation link is not valid: open the one you were sent, whole.",
            status=404,
        )
    if invitation.accepted_at is not None:
        raise InvitationRefused("invitation_used", "This invitation was already used.", status=410)
    if invitation.revoked_at is not None:
        raise InvitationRefused(
            "invitation_revoked",
            "This invitation was withdrawn. Ask the workspace's owner for a new one.",
            status=410,
        )
    if invitation.expires_at <= timezone.now():
        raise InvitationRefused(
            "invitation_expired",
            "This invitation has expired. Ask the workspace's owner for a new one.",
            status=410,
        )
    owners = Membership.objects.filter(workspace=invitation.workspace, role=Membership.Role.OWNER)
    _inviter_owns(invitation, [m.user_id for m in owners])
    return invitation


def _inviter_owns(invitation: Invitation, owner_ids: list) -> None:
    """:class:`InvitationRefused` ``inviter_not_owner`` (410) unless whoever sent the invitation
    is still an active owner of its workspace (``owner_ids``: its owners' user ids)."""
    inviter = invitation.invited_by
    if inviter is not None and inviter.is_active and inviter.pk in owner_ids:
        return
    who = inviter.get_username() if inviter is not None else "The person who sent it"
    raise InvitationRefused(
        "inviter_not_owner",
        f"This invitation can no longer be used: {who} is no longer an owner of "
        f"{invitation.workspace.name}. Ask one of its owners for a new one.",
        status=410,
    )


@dataclass(frozen=True)
class Accepted:
    membership: Membership
    joined: bool  # False: they were in already, and nothing changed


def _matches(invitation: Invitation, user) -> bool:
    return (user.email or "").strip().lower() == invitation.email.strip().lower()


def invitation_accept(*, token: str, user, request=None) -> Accepted:
    """Accept the invitation as ``user``: their membership, with the invitation's role. Raises
    :class:`InvitationRefused`, or ApplicationError ``wrong_account`` (403) when their email is
    not the invited address. Someone already in keeps what they have."""
    invitation = invitation_open(token)
    if not _matches(invitation, user):
        raise ApplicationError(
            "wrong_account",
            f"This invitation is for {invitation.email}, and you are signed in as "
            f"{user.get_username()} ({user.email or 'no email'}). Sign out, then open the link "
            "again and sign in with the invited address.",
            status=403,
        )
    with transaction.atomic():
        # The inviter's ownership, under the owners' lock: a change of roles takes its turn.
        owners = lock_owners(invitation.workspace)
        invitation.invited_by = (
            get_user_model().objects.filter(pk=invitation.invited_by_id).first()
            if invitation.invited_by_id
            else None
        )
        _inviter_owns(invitation, [m.user_id for m in owners])
        # The compare-and-set: of two accepts at once, exactly one sees the row still pending.
        used = (
            Invitation.objects.filter(pk=invitation.pk)
            .pending()
            .update(accepted_at=timezone.now(), accepted_by=user)
        )
        if not used:
            invitation_open(token)  # says why (used, revoked, expired)
            raise InvitationRefused(
                "invitation_used", "This invitation was already used.", status=410
            )
        workspace = invitation.workspace
        existing = Membership.objects.filter(workspace=workspace, user=user).first()
        audit.record(
            Action.INVITATION_ACCEPTED,
            actor=user,
            subject=user,
            workspace=workspace,
            request=request,
            role=invitation.role,
            invitation=invitation.pk,
        )
        if existing is not None:
            return Accepted(membership=existing, joined=False)
        try:
            with transaction.atomic():
                membership = Membership.objects.create(
                    workspace=workspace,
                    user=user,
                    role=invitation.role,
                    source=Membership.Source.INVITATION,
                )
        except IntegrityError:  # added meanwhile, by another way in
            return Accepted(
                membership=Membership.objects.get(workspace=workspace, user=user), joined=False
            )
        audit.record(
            Action.MEMBER_ADDED,
            actor=invitation.invited_by,
            subject=user,
            workspace=workspace,
            request=request,
            role=invitation.role,
            source=Membership.Source.INVITATION,
        )
    return Accepted(membership=membership, joined=True)


def account_create_and_accept(
    *, token: str, username: str, name: str, password: str, request=None
) -> tuple[object, Accepted]:
    """A new account for the invited address (verified by the link), then the invitation
    accepted as it, in one transaction. ApplicationError ``invalid`` (400) names what is wrong
    (a username taken, a password the validators refuse); ``password_login_off`` (403)."""
    if not password_login_on():
        raise ApplicationError(
            "password_login_off",
            "Accounts with a password are turned off here: sign in with single sign-on.",
            status=403,
        )
    invitation = invitation_open(token)
    User = get_user_model()
    username = (username or "").strip()
    problems = []
    try:
        User._meta.get_field("username").run_validators(username)
        if not username:
            problems.append("username: required.")
    except ValidationError as error:
        problems.append("username: " + " ".join(error.messages))
    if username and User.objects.filter(username__iexact=username).exists():
        problems.append(f"username: {username} is taken.")
    if User.objects.filter(email__iexact=invitation.email).exists():
        problems.append(
            f"There is already an account for {invitation.email}: sign in with it instead."
        )
    candidate = User(username=username, email=invitation.email, first_name=name.strip()[:150])
    try:
        validate_password(password or "", user=candidate)
    except ValidationError as error:
        problems.append("password: " + " ".join(error.messages))
    if problems:
        raise ApplicationError("invalid", " ".join(problems))
    with transaction.atomic():
        candidate.set_password(password)
        try:
            with transaction.atomic():
                candidate.save()
        except IntegrityError:
            raise ApplicationError("invalid", f"username: {username} is taken.") from None
        accepted = invitation_accept(token=token, user=candidate, request=request)
    return candidate, accepted
