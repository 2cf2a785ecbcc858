"""Django's deploy checks of its security, clickjacking and CSRF middleware, run again with
Parley's subclasses of them (core.middleware) taken for what they are.

Django finds that middleware by its dotted path in MIDDLEWARE, so with subclasses in its place it
reports it missing (security.W001-W003, silenced in settings) and skips every check of what it
does: HSTS, the https redirect, the secure CSRF cookie, X-Frame-Options and the rest. Here a
subclass counts as its base: those checks run (their ids are Django's), and ``core.W001`` says
when neither the middleware nor a subclass of it is there.
"""

from django.conf import settings
from django.core.checks import Tags, Warning, register
from django.core.checks.security import base, csrf
from django.utils.module_loading import import_string

# Django's middleware, and its checks that say nothing unless they find it by its path.
GATED = {
    "django.middleware.security.SecurityMiddleware": (
        base.check_sts,
        base.check_sts_include_subdomains,
        base.check_sts_preload,
        base.check_content_type_nosniff,
        base.check_ssl_redirect,
        base.check_referrer_policy,
        base.check_cross_origin_opener_policy,
    ),
    "django.middleware.clickjacking.XFrameOptionsMiddleware": (base.check_xframe_deny,),
    "django.middleware.csrf.CsrfViewMiddleware": (csrf.check_csrf_cookie_secure,),
}


def _as_django_sees_it(middleware: list[str]) -> list[str]:
    """MIDDLEWARE with each subclass of a middleware of GATED named by its base's path."""
    named = []
    for path in middleware:
        cls = import_string(path)
        bases = [gated for gated in GATED if issubclass(cls, import_string(gated))]
        named.append(bases[0] if bases else path)
    return named


@register(Tags.security, deploy=True)
def check_middleware_by_class(app_configs, **kwargs):
    from django.test.utils import override_settings  # only for `check --deploy`

    middleware = list(settings.MIDDLEWARE)
    seen_as = _as_django_sees_it(middleware)
    messages = []
    for path, checks in GATED.items():
        if path in middleware:
            continue  # Django's own checks found it
        if path not in seen_as:
            messages.append(
                Warning(f"Neither {path} nor a subclass of it is in MIDDLEWARE.", id="core.W001")
            )
            continue
        with override_settings(MIDDLEWARE=seen_as):
            messages.extend(message for check in checks for message in check(app_configs))
    return messages
