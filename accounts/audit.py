"""The audit log of access: one call, :func:`record`, for everything that changes who may get in
(sign-ins and failed ones, invitations, memberships, tokens, email and password), and the
signals that record Django's own sign-ins, failures and sign-outs. Entries are written in the
caller's transaction, so an access change and its entry commit together or not at all."""

from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed

from core.lockout import client_address

from .models import AuditEntry

Action = AuditEntry.Action


def _name(user) -> str:
    return user.get_username() if user is not None and user.is_authenticated else ""


def record(
    action: str,
    *,
    actor=None,
    subject=None,
    workspace=None,
    request=None,
    subject_name: str = "",
    **detail,
) -> AuditEntry:
    """Append an entry: ``actor`` did ``action`` to ``subject`` (a person) in ``workspace``.
    ``detail`` holds what else tells the story (a role, a token's name); never a secret."""
    return AuditEntry.objects.create(
        action=action,
        actor=actor if actor is not None and actor.is_authenticated else None,
        actor_name=_name(actor),
        subject=subject,
        subject_name=subject_name or _name(subject) or "",
        workspace=workspace,
        workspace_slug=workspace.slug if workspace is not None else "",
        address=client_address(request) if request is not None else None,
        detail=detail,
    )


def _signed_in(sender, request, user, **kwargs):
    record(Action.SIGNED_IN, actor=user, subject=user, request=request, by=_how(request))


def _signed_out(sender, request, user, **kwargs):
    if user is not None:
        record(Action.SIGNED_OUT, actor=user, subject=user, request=request)


def _sign_in_failed(sender, credentials, request=None, **kwargs):
    # Django's cleanse of credentials leaves the username readable and hides the password; a
    # wrong API key names no account and is recorded as such (never the key).
    # Single sign-on's callback passes a nonce (accounts.sso_pages records its own refusals).
    username = credentials.get("username") or ""
    how = "sso" if "nonce" in credentials else "password" if username else "token"
    record(
        Action.SIGN_IN_FAILED,
        subject_name=username,
        request=request if hasattr(request, "META") else None,
        by=how,
    )


def _how(request) -> str:
    backend = getattr(request, "session", {}).get("_auth_user_backend", "") if request else ""
    return "sso" if "oidc" in backend.lower() else "password"


def connect_signals() -> None:
    user_logged_in.connect(_signed_in, dispatch_uid="parley-audit-signed-in")
    user_logged_out.connect(_signed_out, dispatch_uid="parley-audit-signed-out")
    user_login_failed.connect(_sign_in_failed, dispatch_uid="parley-audit-sign-in-failed")
