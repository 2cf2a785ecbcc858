"""Endpoints for the load balancer and Prometheus: liveness, readiness and this process's metrics.

Plain async Django views, outside the REST API and its authentication: whoever can reach them may
call them, so keep ``/metrics`` behind the balancer. They never block the event loop: database
work runs on the runtime's database threads, Redis pings on the loop, each check within 2 s.
"""

import asyncio
import logging

import redis.asyncio
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.db import connection
from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from core.dbthreads import run_db
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
    """Readiness: 200 when the database and the channel layer answer, else 503 naming what
    failed; 503 ``shutting_down`` from the moment the process begins to stop."""
    if server_loop.draining:
        return _not_ready({"status": "shutting_down", "checks": {}})
    database, layer = await asyncio.gather(_check(_database()), _check(_channel_layer()))
    checks = {"database": database, "channel_layer": layer}
    if server_loop.draining:
        return _not_ready({"status": "shutting_down", "checks": checks})
    if any(result != "ok" for result in checks.values()):
        logger.warning("Not ready: %s", checks)
        return _not_ready({"status": "unavailable", "checks": checks})
    return JsonResponse({"status": "ready", "checks": checks})


def _not_ready(body: dict) -> JsonResponse:
    response = JsonResponse(body, status=503)
    # An answer the balancer expects, not a server error: keep it out of Django's error log
    # (what failed is logged above at WARNING; a shutdown is logged once as it begins).
    response._has_been_logged = True
    return response


@never_cache
@require_safe
async def metrics(request):
    """This process's metrics in Prometheus' text format (the database-wide gauges are counted
    now, on a database thread)."""
    return HttpResponse(await run_db(generate_latest), content_type=CONTENT_TYPE_LATEST)


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
    """Ping every Redis server of the layer; a process-local layer is always there."""
    if isinstance(get_channel_layer(), InMemoryChannelLayer):
        return
    hosts = settings.CHANNEL_LAYERS["default"].get("CONFIG", {}).get("hosts", [])
    await asyncio.gather(*(_ping(host) for host in hosts))


async def _ping(host) -> None:
    # channels_redis takes a URL or a dict of connection arguments with an "address".
    url = host if isinstance(host, str) else host["address"]
    client = redis.asyncio.from_url(url, socket_connect_timeout=CHECK_TIMEOUT_SECONDS)
    try:
        await client.ping()
    finally:
        await client.aclose()
