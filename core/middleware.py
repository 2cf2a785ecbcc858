"""Parley's middleware: the Content-Security-Policy every page is sent with, and Django's own
middleware run on the server's event loop rather than a thread apiece."""

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as messages
from django.contrib.sessions import middleware as sessions
from django.core.exceptions import DisallowedHost
from django.middleware import clickjacking, common, csrf, security
from django.utils.deprecation import MiddlewareMixin
from whitenoise import middleware as whitenoise


class OnTheLoop(MiddlewareMixin):
    """A middleware whose steps run on the event loop under ASGI.

    Django's ``MiddlewareMixin`` runs each step (``process_request``, ``process_response``) of
    each middleware in a thread of its own under ASGI: two hops between threads per middleware
    and request, fifteen for Django's usual stack, before the view is reached and after it
    answers. The steps of the middleware built on this read and set headers, cookies and
    attributes and touch no database or file, so they run where the request already is. A step
    that may block says so in :meth:`blocks`, and then runs in a thread as before. Under WSGI
    (Django's test client) nothing changes."""

    def blocks(self, request, response) -> bool:
        """Whether this response's ``process_response`` may wait on a database or a file."""
        return False

    async def __acall__(self, request):
        response = None
        if hasattr(self, "process_request"):
            response = self.process_request(request)
        response = response or await self.get_response(request)
        if hasattr(self, "process_response"):
            if self.blocks(request, response):
                step = sync_to_async(self.process_response, thread_sensitive=True)
                response = await step(request, response)
            else:
                response = self.process_response(request, response)
        return response


class HeadWithoutBody(OnTheLoop):
    """The answer to a HEAD request: its GET's headers, Content-Length included, and no body.
    Django leaves dropping the body to the server, and Daphne drops only the first chunk of it
    (64 KiB): the rest was written after the headers, where a client that keeps its connection
    read it as the next response (the API's schema outgrew a chunk)."""

    def process_response(self, request, response):
        if request.method != "HEAD":
            return response
        if response.streaming:
            response.streaming_content = []
        else:
            length = response.get("Content-Length", str(len(response.content)))
            response.content = b""
            response["Content-Length"] = length
        return response


class SecurityMiddleware(OnTheLoop, security.SecurityMiddleware):
    pass


class CommonMiddleware(OnTheLoop, common.CommonMiddleware):
    pass


class SessionMiddleware(OnTheLoop, sessions.SessionMiddleware):
    """Reading the session waits for the database, but that happens in the view (through
    ``request.user``), never here; saving it does, in a thread, when it was changed."""

    def blocks(self, request, response) -> bool:
        session = getattr(request, "session", None)
        return session is not None and (session.modified or settings.SESSION_SAVE_EVERY_REQUEST)


class _Refusal:
    """A request the CSRF check refused, and why: its page is yet to be rendered."""

    def __init__(self, reason: str):
        self.reason = reason


class CsrfViewMiddleware(OnTheLoop, csrf.CsrfViewMiddleware):
    """The token is read from its cookie (CSRF_USE_SESSIONS is off) and the form from the body
    already in memory. ``process_view``, which Django would also run in a thread, runs on the
    loop too; but the page of a refused request (403_csrf.html) is rendered in a thread: like
    every page, it shows who is signed in, which reads the session and the person from the
    database (a form left open while its person logged in again elsewhere is refused so)."""

    async def process_view(self, request, callback, callback_args, callback_kwargs):
        outcome = super().process_view(request, callback, callback_args, callback_kwargs)
        if isinstance(outcome, _Refusal):
            refuse = sync_to_async(super()._reject, thread_sensitive=True)
            return await refuse(request, outcome.reason)
        return outcome

    def _reject(self, request, reason):
        return _Refusal(reason)


class AuthenticationMiddleware(OnTheLoop, auth.AuthenticationMiddleware):
    """Sets ``request.user`` lazily: the database is asked only when a view reads it."""


class MessageMiddleware(OnTheLoop, messages.MessageMiddleware):
    def blocks(self, request, response) -> bool:
        # Storing new messages may read earlier ones from the session.
        storage = getattr(request, "_messages", None)
        return storage is not None and (storage.added_new or storage.used)


class XFrameOptionsMiddleware(OnTheLoop, clickjacking.XFrameOptionsMiddleware):
    pass


class WhiteNoiseMiddleware(whitenoise.WhiteNoiseMiddleware):
    """WhiteNoise, which is sync only, so that under ASGI Django would put every request, for a
    static file or not, through a thread and back: here a request for anything else passes
    through on the loop (the files are listed at start-up, and looking one up is a dict's), and
    only serving a file, which opens it, goes to a thread (finding it too, when
    ``WHITENOISE_AUTOREFRESH`` looks at the disk for each request, in development)."""

    async_capable = True

    def __init__(self, get_response=None, settings=settings):
        super().__init__(get_response, settings)
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.async_mode:
            return self.__acall__(request)
        return super().__call__(request)

    async def __acall__(self, request):
        if self.autorefresh:
            static_file = await sync_to_async(self.find_file)(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is not None:
            return await sync_to_async(self.serve)(static_file, request)
        return await self.get_response(request)


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


class ContentSecurityPolicyMiddleware(OnTheLoop):
    """Sets the policy on every HTML response that has none of its own: Parley's pages, the
    login and error pages, the admin and the API's documentation alike."""

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
