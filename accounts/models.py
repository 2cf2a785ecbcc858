"""What the accounts app keeps: people's API tokens, invitations to a workspace, and the audit
log of who did what to access and membership."""

import hashlib
import secrets

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from conversations.models import Membership, Workspace
from core.ids import new_id

TOKEN_PREFIX = "prl_"


def hash_key(key: str) -> str:
    """What is stored of a token's key: its SHA-256, so that the database never holds a usable
    key (a key is random, long and used once per request: no salt or slow hash is needed)."""
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    """A fresh API key, e.g. ``prl_3Jx…`` (the prefix lets a secret scanner recognise it)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(30)


def new_token_id() -> str:
    return new_id("tok")


class ApiToken(models.Model):
    """One of a person's named API tokens. The key itself is shown once, when it is made; what is
    kept is its hash and its first characters (to tell tokens apart in a list)."""

    id = models.CharField(primary_key=True, max_length=24, default=new_token_id)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    key_hash = models.CharField(max_length=64, unique=True)
    key_start = models.CharField(max_length=12)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API token"
        ordering = ["user", "-created_at"]
        indexes = [models.Index(fields=["user", "revoked_at"], name="token_user_revoked")]

    def __str__(self):
        return f"{self.name} ({self.key_start}…) of {self.user}"

    def is_usable(self, now=None) -> bool:
        now = now or timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


def new_invitation_id() -> str:
    return new_id("inv")


class InvitationQuerySet(models.QuerySet):
    def unused(self):
        """Not accepted, not revoked (expired or not)."""
        return self.filter(accepted_at=None, revoked_at=None)

    def pending(self, now=None):
        """Pending: not accepted, not revoked, not expired (at ``now``, by default now)."""
        return self.unused().filter(expires_at__gt=now or timezone.now())


class Invitation(models.Model):
    """An owner's invitation of an email address to a workspace with a role. Its link is signed,
    expires at ``expires_at`` and is used once (``accepted_at``); an owner may revoke it."""

    id = models.CharField(primary_key=True, max_length=24, default=new_invitation_id)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()
    role = models.CharField(
        max_length=10, choices=Membership.Role.choices, default=Membership.Role.MEMBER
    )
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = InvitationQuerySet.as_manager()

    class Meta:
        ordering = ["workspace", "-created_at"]

    def __str__(self):
        return f"{self.email} to {self.workspace} as {self.role}"


class AuditEntry(models.Model):
    """One thing someone did to access or membership. Append-only: an entry is never changed or
    deleted (here, in the admin, by a cascade: the people and workspace it names are kept as
    text beside their keys, which are set to null when those go)."""

    class Action(models.TextChoices):
        SIGNED_IN = "signed_in", "Signed in"
        SIGN_IN_FAILED = "sign_in_failed", "Sign-in failed"
        SIGNED_OUT = "signed_out", "Signed out"
        INVITATION_SENT = "invitation_sent", "Invitation sent"
        INVITATION_ACCEPTED = "invitation_accepted", "Invitation accepted"
        INVITATION_REVOKED = "invitation_revoked", "Invitation revoked"
        MEMBER_ADDED = "member_added", "Member added"
        ROLE_CHANGED = "role_changed", "Role changed"
        MEMBER_REMOVED = "member_removed", "Member removed"
        OWNERSHIP_TRANSFERRED = "ownership_transferred", "Ownership transferred"
        TOKEN_CREATED = "token_created", "API token created"
        TOKEN_REVOKED = "token_revoked", "API token revoked"
        EMAIL_CHANGED = "email_changed", "Email changed"
        PASSWORD_CHANGED = "password_changed", "Password changed"
        PASSWORD_RESET = "password_reset", "Password reset"

    at = models.DateTimeField(default=timezone.now, db_index=True)
    action = models.CharField(max_length=32, choices=Action.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)
    subject = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    subject_name = models.CharField(max_length=254, blank=True)
    workspace = models.ForeignKey(
        Workspace, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    workspace_slug = models.SlugField(blank=True)
    address = models.GenericIPAddressField(null=True, blank=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name = "audit entry"
        verbose_name_plural = "audit log"
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["workspace", "-at"], name="audit_workspace_at")]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name or '—'} {self.get_action_display()}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise ValidationError("The audit log is append-only: an entry is never changed.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValidationError("The audit log is append-only: an entry is never deleted.")
