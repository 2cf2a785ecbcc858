"""Endpoints for the load balancer and Prometheus: liveness, readiness and this process's metrics.

Plain async Django views, outside the REST API and its authentication. ``/healthz`` and whether
``/readyz`` is ready are anyone's; ``/metrics`` (totals across all workspaces, memory) and what
``/readyz`` found (error text from the database and Redis) are the operator's: served with the
scrape token (``Authorization: Bearer <PARLEY_METRICS_TOKEN>``), or straight from one of the
addresses ``PARLEY_METRICS_ALLOW`` lists (loopback by default). Straight means the connection's
own peer, and no proxy in between: a request that carries a proxy's forwarding header is never
taken for a local one, since a proxy on the same host (or Daphne's ``--proxy-headers``, which
puts the proxy's ``X-Forwarded-For`` in its place) would otherwise make the world look local.

They never block the event loop: database work runs on the runtime's database threads, Redis
pings on the loop, each check within 2 s.
"""

import asyncio
import hmac
import ipaddress
import logging

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.db import connection
from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from core import redis_clients
from core.dbthreads import run_db
from core.lockout import LockedOut, attempt_from_request, checked
from core.process import server_loop

logger = logging.getLogger(__name__)

CHECK_TIMEOUT_SECONDS = 2.0


@never_cache
@require_safe
async def healthz(request):
    """Liveness: 200 whenever the process answers at all (nothing else is checked)."""
    return JsonResponse({"status": "ok"})


@never_cache
@require_safe
async def readyz(request):
    """Readiness: 200 when the database and the channel layer answer; once they have, 200
    ``degraded`` while one has failed for less than PARLEY_READY_TOLERANCE_SECONDS, then 503
    ``unavailable`` (at once, before they ever answered); 503
    ``shutting_down`` from the moment the process begins to stop. The operator is also told
    each check's outcome, naming what failed."""
    if server_loop.draining:
        return await _not_ready({"status": "shutting_down", "checks": {}}, request)
    database, layer = await asyncio.gather(_check(_database()), _check(_channel_layer()))
    checks = {"database": database, "channel_layer": layer}
    if server_loop.draining:
        return await _not_ready({"status": "shutting_down", "checks": checks}, request)
    if any(result != "ok" for result in checks.values()):
        if _tolerance.outage(checks):
            logger.warning("Not ready: %s", checks)
            return await _not_ready({"status": "unavailable", "checks": checks}, request)
        logger.warning("Degraded (still ready, within PARLEY_READY_TOLERANCE_SECONDS): %s", checks)
        return JsonResponse(await _for(request, {"status": "degraded", "checks": checks}))
    _tolerance.passed()
    return JsonResponse(await _for(request, {"status": "ready", "checks": checks}))


class _Tolerance:
    """How long this process's failing checks have failed, every time they were made: a shared
    dependency's restart or failover, which every process sees at once, is waited out for
    PARLEY_READY_TOLERANCE_SECONDS rather than taking every process out of the balancer
    together; but only once every check has passed here (a new process with a wrong address
    must never be sent work)."""

    def __init__(self):
        self.ever_passed = False
        self.failing_since: dict[str, float] = {}  # on the loop's clock

    def passed(self) -> None:
        self.ever_passed = True
        self.failing_since.clear()

    def outage(self, checks: dict[str, str]) -> bool:
        """Whether failing ``checks`` make the process not ready."""
        now = asyncio.get_running_loop().time()
        for name, result in checks.items():
            if result == "ok":
                self.failing_since.pop(name, None)
            else:
                self.failing_since.setdefault(name, now)
        tolerance = settings.PARLEY_READY_TOLERANCE_SECONDS
        return not self.ever_passed or any(
            now - since >= tolerance for since in self.failing_since.values()
        )


_tolerance = _Tolerance()


async def _for(request, body: dict) -> dict:
    """The body as the caller may see it: whole for the operator, else its status only."""
    try:
        operator = await _operator(request)
    except LockedOut:
        operator = False
    return body if operator else {"status": body["status"]}


async def _not_ready(body: dict, request) -> JsonResponse:
    response = JsonResponse(await _for(request, body), status=503)
    # An answer the balancer expects, not a server error: keep it out of Django's error log
    # (what failed is logged above at WARNING; a shutdown is logged once as it begins).
    response._has_been_logged = True
    return response


@never_cache
@require_safe
async def metrics(request):
    """This process's metrics in Prometheus' text format (the database-wide gauges are counted
    now, on a database thread), for the operator only: 401 without the scrape token where one
    is set, else 403; 429 for an address locked out (wrong tokens count toward its lock)."""
    try:
        operator = await _operator(request)
    except LockedOut as locked:
        response = _error(429, locked.as_dict())
        response["Retry-After"] = str(locked.retry_after)
        return response
    if operator:
        return HttpResponse(await run_db(generate_latest), content_type=CONTENT_TYPE_LATEST)
    if settings.PARLEY_METRICS_TOKEN:
        message = "Send the scrape token: Authorization: Bearer <PARLEY_METRICS_TOKEN>."
        response = _error(401, {"code": "not_authenticated", "message": message})
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    message = "Metrics are served only to the addresses PARLEY_METRICS_ALLOW lists."
    return _error(403, {"code": "forbidden", "message": message})


def _error(status: int, error: dict) -> JsonResponse:
    return JsonResponse({"error": error}, status=status)


# Who the operator is ---------------------------------------------------------------------------

# Headers a proxy adds to what it passes on: a request with any of them came through one.
FORWARDING_HEADERS = (
    "HTTP_FORWARDED",
    "HTTP_X_FORWARDED_FOR",
    "HTTP_X_FORWARDED_PROTO",
    "HTTP_X_FORWARDED_HOST",
    "HTTP_X_REAL_IP",
)


async def _operator(request) -> bool:
    """Whether the request is the operator's: it carries the scrape token (checked under its
    address's login lock, in a database thread: raises LockedOut), or, with none, it comes
    straight from an allowed address."""
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    expected = settings.PARLEY_METRICS_TOKEN
    if expected and scheme.lower() == "bearer" and presented.strip():

        def right() -> bool:
            return hmac.compare_digest(presented.strip().encode(), expected.encode())

        return await run_db(checked, attempt_from_request(request), right)
    return _straight_from_allowed(request)


def _straight_from_allowed(request) -> bool:
    if any(name in request.META for name in FORWARDING_HEADERS):
        return False
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR") or "")
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped  # a dual-stack listener's IPv4 peer
    return any(address in network for network in settings.PARLEY_METRICS_ALLOW)


async def _check(probe) -> str:
    """``"ok"``, or what went wrong as ``"ErrorType: message"``."""
    try:
        await asyncio.wait_for(probe, CHECK_TIMEOUT_SECONDS)
    except TimeoutError:
        return f"TimeoutError: no answer within {CHECK_TIMEOUT_SECONDS:g} s"
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return "ok"


def _select_one() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


async def _database() -> None:
    await run_db(_select_one)


async def _channel_layer() -> None:
    """Ping every Redis server of the layer (through Sentinel, the current primary); a
    process-local layer is always there."""
    if isinstance(get_channel_layer(), InMemoryChannelLayer):
        return
    hosts = settings.CHANNEL_LAYERS["default"].get("CONFIG", {}).get("hosts", [])
    await asyncio.gather(*(_ping(host) for host in hosts))


async def _ping(host) -> None:
    # channels_redis takes a URL or a dict of connection arguments, with an "address" or with
    # the sentinels to ask for the primary (then the primary they name now is pinged).
    client = redis_clients.async_client(host, socket_connect_timeout=CHECK_TIMEOUT_SECONDS)
    try:
        await client.ping()
    finally:
        await client.aclose()
