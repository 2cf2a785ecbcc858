"""Single sign-on with OpenID Connect, on mozilla-django-oidc: the provider's endpoints found by
discovery from ``PARLEY_OIDC_ISSUER`` (fetched when first needed, then kept an hour), and the
authentication backend that matches a person by verified email to an account or creates one,
copies their name and, with ``PARLEY_OIDC_ROLES_CLAIM``, their memberships (accounts.sso_roles).

The library does the authorization code flow with ``state``, ``nonce`` and PKCE (S256); the ID
token is an RS256 JWT checked against the provider's JWKS, its issuer and its audience here.
A sign-in this side refuses raises :class:`SsoRefused`, whose message is for the person.
"""

import re
import threading
import time

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.db import transaction
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from . import sso_roles

DISCOVERY_TTL_SECONDS = 3600
# A provider is asked with a ceiling: a sign-in never hangs on one that does not answer.
PROVIDER_TIMEOUT_SECONDS = 10
# The endpoints Parley needs from the discovery document, by the library's names for them.
ENDPOINTS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}


class ProviderUnavailable(Exception):
    """The provider could not be reached, or its discovery document is not usable."""


class SsoRefused(Exception):
    """A sign-in refused: ``reason`` (a short code, for the audit log) and ``message`` (for the
    person)."""

    def __init__(self, reason: str, message: str, *, email: str = ""):
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.email = email


def configured() -> bool:
    """Whether single sign-on is set up (``PARLEY_OIDC_ISSUER``)."""
    return bool(settings.PARLEY_OIDC_ISSUER)


def provider_name() -> str:
    return settings.PARLEY_OIDC_NAME


def password_login_on() -> bool:
    """Whether people may sign in with a Parley password at all (off under single sign-on)."""
    return settings.PARLEY_PASSWORD_LOGIN


_lock = threading.Lock()
_discovered: dict[str, tuple[float, dict]] = {}


def discovery() -> dict:
    """The provider's discovery document (``<issuer>/.well-known/openid-configuration``), kept
    for an hour. Raises :class:`ProviderUnavailable` when it cannot be fetched, is not JSON,
    names another issuer or lacks an endpoint; a failure is not kept, so the next sign-in
    asks again."""
    issuer = settings.PARLEY_OIDC_ISSUER
    with _lock:
        kept = _discovered.get(issuer)
        if kept and kept[0] > time.monotonic():
            return kept[1]
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=PROVIDER_TIMEOUT_SECONDS)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderUnavailable(f"{url}: {type(exc).__name__}") from exc
    if not isinstance(document, dict):
        raise ProviderUnavailable(f"{url}: not a JSON object")
    if document.get("issuer") != issuer:
        raise ProviderUnavailable(
            f"{url}: names the issuer {document.get('issuer')!r}, not {issuer!r}"
        )
    missing = [key for key in ENDPOINTS.values() if not isinstance(document.get(key), str)]
    if missing:
        raise ProviderUnavailable(f"{url}: no {', '.join(missing)}")
    with _lock:
        _discovered[issuer] = (time.monotonic() + DISCOVERY_TTL_SECONDS, document)
    return document


def forget_discovery() -> None:
    """Drop the kept discovery documents (a provider moved; tests)."""
    with _lock:
        _discovered.clear()


def oidc_setting(name: str, *default):
    """What mozilla-django-oidc asks of settings, answered from Parley's own: the endpoints
    from discovery, the client from ``PARLEY_OIDC_*``, and the protections always on."""
    if name in ENDPOINTS:
        return discovery()[ENDPOINTS[name]]
    fixed = {
        "OIDC_RP_CLIENT_ID": settings.PARLEY_OIDC_CLIENT_ID,
        "OIDC_RP_CLIENT_SECRET": settings.PARLEY_OIDC_CLIENT_SECRET,
        "OIDC_RP_SCOPES": settings.PARLEY_OIDC_SCOPES,
        "OIDC_RP_SIGN_ALGO": "RS256",
        "OIDC_RP_IDP_SIGN_KEY": None,
        "OIDC_USE_NONCE": True,
        "OIDC_USE_PKCE": True,
        "OIDC_PKCE_CODE_CHALLENGE_METHOD": "S256",
        "OIDC_VERIFY_SSL": True,
        "OIDC_TIMEOUT": PROVIDER_TIMEOUT_SECONDS,
        "OIDC_CREATE_USER": True,
        "OIDC_STORE_ACCESS_TOKEN": False,
        "OIDC_STORE_ID_TOKEN": False,
        "OIDC_AUTHENTICATION_CALLBACK_URL": "oidc_authentication_callback",
    }
    if name in fixed:
        return fixed[name]
    return getattr(settings, name, *default) if default else getattr(settings, name)


def _email_verified(claims: dict) -> bool:
    # Some providers send the claim as the string "true".
    value = claims.get("email_verified")
    return value is True or (isinstance(value, str) and value.lower() == "true")


def username_for(claims: dict) -> str:
    """A username for a new account: the provider's preferred username, else the email's local
    part, kept to Django's characters and made unique with a number."""
    User = get_user_model()
    wanted = claims.get("preferred_username") or claims["email"].split("@")[0]
    base = re.sub(r"[^\w.@+-]", "", str(wanted))[:140] or "person"
    candidate, n = base, 1
    while User.objects.filter(username__iexact=candidate).exists():
        n += 1
        candidate = f"{base}-{n}"
    return candidate


class ParleyOIDCBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend with Parley's rules: endpoints from discovery, the ID
    token's issuer and audience checked, a person matched by verified email, names copied and
    memberships read from the roles claim. Its dotted path names "oidc", which the audit log
    reads as a sign-in by SSO (accounts.audit)."""

    def __init__(self, *args, **kwargs):
        # Nothing is asked of the provider here: Django builds its backends for every sign-in,
        # password ones included.
        self.UserModel = get_user_model()

    get_settings = staticmethod(oidc_setting)

    def __getattr__(self, name):
        # The library reads its settings as attributes set in its __init__: read them now.
        if name.startswith("OIDC_"):
            return oidc_setting(name, None)
        raise AttributeError(name)

    def authenticate(self, request, **kwargs):
        # Only the callback view passes a nonce: any other sign-in is not this backend's.
        if request is None or "nonce" not in kwargs:
            return None
        return super().authenticate(request, **kwargs)

    def _verify_jws(self, payload, key):
        try:
            header = jwt.get_unverified_header(payload)
            if header.get("alg") != "RS256":
                raise SuspiciousOperation("The ID token is not signed with RS256.")
            return jwt.decode(
                payload,
                key,
                algorithms=["RS256"],
                audience=settings.PARLEY_OIDC_CLIENT_ID,
                issuer=settings.PARLEY_OIDC_ISSUER,
                leeway=60,
            )
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"The ID token was refused: {exc}") from exc

    def get_userinfo(self, access_token, id_token, payload):
        # The ID token's claims with the userinfo endpoint's over them (Entra ID, for one,
        # puts roles in the ID token only); both must be about the same person.
        info = super().get_userinfo(access_token, id_token, payload)
        if info.get("sub") != payload.get("sub"):
            # SsoRefused, not SuspiciousOperation: the library would swallow that one into a
            # bare failed sign-in, and the audit log would not say why.
            raise SsoRefused(
                "userinfo_mismatch",
                f"{provider_name()} answered about someone else than the person who signed in, "
                "so Parley cannot sign you in. Try again; if it goes on, tell your administrator.",
            )
        return {**payload, **info}

    def get_or_create_user(self, access_token, id_token, payload):
        claims = self.get_userinfo(access_token, id_token, payload)
        email = claims.get("email") or ""
        if not isinstance(email, str) or "@" not in email:
            raise SsoRefused(
                "no_email",
                f"{provider_name()} did not tell Parley your email address, so it cannot "
                "know who you are. Ask your administrator to release the email claim.",
            )
        if not _email_verified(claims):
            raise SsoRefused(
                "email_unverified",
                f"Your email address at {provider_name()} is not verified, so Parley cannot "
                "match it to an account. Verify it there, then sign in again.",
                email=email,
            )
        with transaction.atomic():
            user = self._match(email, claims)
            if settings.PARLEY_OIDC_ROLES_CLAIM:
                sso_roles.memberships_sync(
                    user=user,
                    claimed=sso_roles.parse(claims.get(settings.PARLEY_OIDC_ROLES_CLAIM)),
                    request=self.request,
                )
        return user

    def _match(self, email: str, claims: dict):
        users = list(self.UserModel.objects.filter(email__iexact=email)[:2])
        if len(users) > 1:
            raise SsoRefused(
                "email_ambiguous",
                "More than one Parley account has your email address: ask an admin to sort it out.",
                email=email,
            )
        if users:
            user = users[0]
            if not user.is_active:
                raise SsoRefused("inactive", "Your Parley account is deactivated.", email=email)
        else:
            user = self.UserModel.objects.create_user(username_for(claims), email=email)
        names = {
            "first_name": claims.get("given_name") or claims.get("name"),
            "last_name": claims.get("family_name"),
        }
        changed = []
        for field, value in names.items():
            if isinstance(value, str) and value and getattr(user, field) != value[:150]:
                setattr(user, field, value[:150])
                changed.append(field)
        if changed:
            user.save(update_fields=changed)
        return user


class PasswordLoginSwitch:
    """With ``PARLEY_PASSWORD_LOGIN=0``, refuses every password sign-in (the site's login form,
    the admin's, anything else that calls ``authenticate`` with a password) before Django's
    own backend checks it. Listed before ``ModelBackend``."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if password is not None and not password_login_on():
            raise PermissionDenied("Password sign-in is turned off.")
        return None

    def get_user(self, user_id):
        return None
