"""People's API tokens: making one (its key is returned once, and only its hash is kept),
revoking one, listing a person's, and the look-up every edge authenticates through
(``PARLEY_TOKEN_LOOKUP``: REST, the socket's handshake, tails, MCP), which refuses a revoked or
expired token and an inactive account. Making and revoking are audited (the token's name and id,
never its key); revoking ends at once what the token holds open (conversations.revocation)."""

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from conversations import revocation
from core.errors import ApplicationError, not_found
from core.prepared import PreparedLookup

from . import audit
from .models import ApiToken, hash_key, new_key

Action = audit.Action

# last_used_at is written at most this often per token: a busy client does not write on every
# request (the time shown is so much behind at worst).
LAST_USED_EVERY = timedelta(seconds=60)
NAME_MAX = ApiToken._meta.get_field("name").max_length


def tokens_of(user) -> list[ApiToken]:
    """The person's tokens that still work, newest first (revoked ones are gone from the list;
    expired ones stay, marked by their expiry, until revoked)."""
    return list(ApiToken.objects.filter(user=user, revoked_at__isnull=True).order_by("-created_at"))


def token_create(
    *, user, name: str, expires_at: datetime | None = None, request=None
) -> tuple[ApiToken, str]:
    """A new token of ``user`` named ``name``, and its key: the only time the key is seen.
    Raises ApplicationError (400) for an empty or long name, or an expiry not in the future."""
    name = (name or "").strip()
    if not name:
        raise ApplicationError("invalid", "Give the token a name (what it is for).")
    if len(name) > NAME_MAX:
        raise ApplicationError("invalid", f"A token's name has at most {NAME_MAX} characters.")
    if expires_at is not None and expires_at <= timezone.now():
        raise ApplicationError("invalid", "A token's expiry must be in the future.")
    key = new_key()
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=name,
            key_hash=hash_key(key),
            key_start=key[:12],
            expires_at=expires_at,
        )
        audit.record(
            Action.TOKEN_CREATED,
            actor=user,
            subject=user,
            request=request,
            token=token.pk,
            name=token.name,
            expires_at=expires_at.isoformat() if expires_at else None,
        )
    return token, key


def token_for_person(*, user, token_id: str) -> ApiToken:
    """The person's own token ``token_id`` (not revoked); 404 for anyone else's, or none."""
    token = ApiToken.objects.filter(pk=token_id, user=user, revoked_at__isnull=True).first()
    if token is None:
        raise not_found("This token")
    return token


def token_revoke(*, token: ApiToken, actor=None, request=None) -> ApiToken:
    """Revoke ``token`` (again: nothing changes): it stops working on every edge, and the
    sockets, tails and MCP sessions opened with it end at once, on every process."""
    with transaction.atomic():
        locked = ApiToken.objects.select_for_update().get(pk=token.pk)
        if locked.revoked_at is not None:
            return locked
        locked.revoked_at = timezone.now()
        locked.save(update_fields=["revoked_at"])  # the signal below ends what it holds
        audit.record(
            Action.TOKEN_REVOKED,
            actor=actor,
            subject=locked.user,
            request=request,
            token=locked.pk,
            name=locked.name,
        )
    return locked


def user_and_token_for(key: str):
    """``(user, token)`` for an API key that works now; None for a wrong key, a revoked or
    expired token, or an inactive account. Notes the token's use (at most once a minute)."""
    if not key or len(key) > 200:
        return None
    token = _TOKEN_WITH_USER.first(hash_key(key))
    now = timezone.now()
    if token is None or not token.is_usable(now) or not token.user.is_active:
        return None
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_EVERY:
        # A conditional update: of processes racing here, one writes.
        stale = Q(last_used_at__isnull=True) | Q(last_used_at__lte=now - LAST_USED_EVERY)
        ApiToken.objects.filter(stale, pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token.user, token


# Every token checked (each socket's handshake, each request) reads this: compiled once (see
# core.prepared), where the ORM would compile its join afresh each time.
_TOKEN_WITH_USER = PreparedLookup(
    lambda key_hash: ApiToken.objects.select_related("user").filter(key_hash=key_hash)[:1]
)


def usable_token_ids(ids: set[str]) -> set[str]:
    """Of the tokens ``ids``, those that still work now (for conversations.revocation)."""
    now = timezone.now()
    return set(
        ApiToken.objects.filter(pk__in=ids, revoked_at__isnull=True, user__is_active=True)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .values_list("pk", flat=True)
    )


def _token_saved(instance, **kwargs) -> None:
    if not instance.is_usable():
        revocation.changed()


def _token_deleted(**kwargs) -> None:
    revocation.changed()


def connect() -> None:
    """Follow tokens live: what a token holds open is checked whenever one is revoked, expired
    by hand or deleted (here, in the admin, from a shell)."""
    revocation.tokens_usable.register(usable_token_ids)
    post_save.connect(_token_saved, sender=ApiToken, dispatch_uid="parley-access-token")
    post_delete.connect(_token_deleted, sender=ApiToken, dispatch_uid="parley-token-gone")
