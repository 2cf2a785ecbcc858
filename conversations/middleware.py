"""The Content-Security-Policy every page is sent with: Parley's own scripts and styles only."""

from django.core.exceptions import DisallowedHost
from django.utils.deprecation import MiddlewareMixin


def content_security_policy(host: str = "") -> str:
    """The policy: scripts, styles, fonts and calls from this origin only (the conversation
    page's socket too, on ``host``), images from here or inline data, no plugins, no frames,
    forms posted back here. Text that slips through as markup can load nothing and run nothing
    (agent output and people's input are shown as text anyway)."""
    sockets = f" ws://{host} wss://{host}" if host else ""
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        f"connect-src 'self'{sockets}; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    )


class ContentSecurityPolicyMiddleware(MiddlewareMixin):
    """Sets the policy on every HTML response that has none of its own: Parley's pages, the
    login and error pages, the admin and the API's documentation alike. (A MiddlewareMixin, so
    that it serves async views without a thread hop, as Django's own middleware does.)"""

    def process_response(self, request, response):
        content_type = response.get("Content-Type", "")
        if content_type.startswith("text/html") and "Content-Security-Policy" not in response:
            try:
                host = request.get_host()
            except DisallowedHost:
                # The answer to a request for a host not served here (a 400): no socket to allow.
                host = ""
            response["Content-Security-Policy"] = content_security_policy(host)
        return response
