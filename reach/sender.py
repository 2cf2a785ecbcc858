"""The sender: on every process, deliveries due are claimed (``SELECT … FOR UPDATE SKIP LOCKED``
on PostgreSQL, and a compare-and-set on the claim everywhere, so two processes never send the
same one), checked again (the question still open, its reader still allowed), sent through their
channel in a thread of their own, and recorded: sent, tried again later (backing off), or failed
for good after ``PARLEY_DELIVERY_ATTEMPTS``. A process that dies mid-send lets its claim lapse
after ``PARLEY_DELIVERY_CLAIM_SECONDS``; another sends it then, under the same id (the email's
Message-ID, the webhook's ``webhook-id``), so that a receiver can tell a repeat.

It wakes when a delivery is committed on this process (the outbox nudges it) and every
``PARLEY_DELIVERY_POLL_SECONDS`` for the rest (others' deliveries, retries, quiet hours)."""

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from core.dbthreads import is_transient, run_db
from core.process import process_id, server_loop

from . import metrics
from .channels import CHANNELS, Defer, Result, Skip
from .models import Attempt, Delivery, WebhookEndpoint

logger = logging.getLogger(__name__)

BATCH = 50
# The longest wait between two tries of a delivery.
MAX_BACKOFF_SECONDS = 3600.0
# At SIGTERM, the longest wait for the sends under way (longer than any channel's timeout).
STOP_SECONDS = 30.0


def claim_due(*, process: str, limit: int = BATCH) -> list[str]:
    """Claim up to ``limit`` deliveries that are due and nobody holds, for ``process``; returns
    their ids. Rows another process is claiming at this moment are skipped, not waited for."""
    now = timezone.now()
    free = Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)
    until = now + timedelta(seconds=settings.PARLEY_DELIVERY_CLAIM_SECONDS)
    with transaction.atomic():
        ids = list(
            Delivery.objects.select_for_update(skip_locked=True)
            .filter(free, status=Delivery.Status.PENDING, next_attempt_at__lte=now)
            .order_by("next_attempt_at")
            .values_list("pk", flat=True)[:limit]
        )
        if not ids:
            return []
        Delivery.objects.filter(free, pk__in=ids, status=Delivery.Status.PENDING).update(
            claimed_by=process, claimed_until=until, attempts=F("attempts") + 1
        )
        return list(
            Delivery.objects.filter(
                pk__in=ids, claimed_by=process, claimed_until=until
            ).values_list("pk", flat=True)
        )


def prepare(*, delivery_id: str, process: str):
    """What sending it takes (read from the database, so that the send needs none), or a
    :class:`Skip` or :class:`Defer` recorded at once. An attempt is logged for what is sent."""
    delivery = (
        Delivery.objects.select_related(
            "selection__conversation__workspace",
            "selection__turn__started_by",
            "selection__addressee",
            "selection__answered_by",
            "recipient",
            "endpoint",
            "updates",
        )
        .filter(pk=delivery_id, claimed_by=process)
        .first()
    )
    if delivery is None:
        return None
    channel = CHANNELS[delivery.channel]
    outgoing = channel.prepare(delivery)
    if isinstance(outgoing, Skip | Defer):
        record(delivery_id=delivery_id, process=process, result=outgoing)
        return None
    Attempt.objects.create(
        delivery=delivery,
        number=delivery.attempts,
        process=process,
        started_at=timezone.now(),
    )
    return delivery, outgoing


def backoff(attempts: int) -> float:
    """Seconds before the next try after ``attempts`` tries: the base, doubled each time."""
    return min(settings.PARLEY_DELIVERY_BACKOFF_SECONDS * 2 ** (attempts - 1), MAX_BACKOFF_SECONDS)


def record(*, delivery_id: str, process: str, result) -> None:
    """Record how it went, if this process still holds the claim (else another has taken the
    delivery over, and records its own)."""
    now = timezone.now()
    with transaction.atomic():
        delivery = (
            Delivery.objects.select_for_update()
            .filter(pk=delivery_id, claimed_by=process, status=Delivery.Status.PENDING)
            .first()
        )
        if delivery is None:
            return
        delivery.claimed_by, delivery.claimed_until = "", None
        attempt_ok = None
        if isinstance(result, Defer):
            delivery.attempts -= 1  # nothing was tried
            delivery.next_attempt_at = now + timedelta(seconds=result.seconds)
            outcome = "deferred"
        elif isinstance(result, Skip):
            delivery.status, delivery.reason = Delivery.Status.SKIPPED, result.reason
            # A skip the send found (Slack knows no user with the person's email) ends the
            # attempt it made; one found before sending made none.
            Attempt.objects.filter(
                delivery=delivery, number=delivery.attempts, finished_at__isnull=True
            ).update(finished_at=now, response=result.reason[:500])
            outcome = "skipped"
        else:
            attempt_ok = result.ok
            Attempt.objects.filter(delivery=delivery, number=delivery.attempts).update(
                finished_at=now, ok=result.ok, response=result.response[:500]
            )
            if result.ok:
                delivery.status, delivery.sent_at = Delivery.Status.SENT, now
                delivery.reference, delivery.reason = result.reference, ""
            elif result.final or delivery.attempts >= settings.PARLEY_DELIVERY_ATTEMPTS:
                delivery.status, delivery.reason = Delivery.Status.FAILED, result.response[:300]
            else:
                delivery.reason = result.response[:300]
                wait = result.retry_after or backoff(delivery.attempts)
                delivery.next_attempt_at = now + timedelta(seconds=wait)
            if delivery.endpoint_id and delivery.status != Delivery.Status.PENDING:
                _endpoint_outcome(delivery)
            outcome = {"sent": "sent", "failed": "failed"}.get(delivery.status, "retried")
        delivery.save()
        CHANNELS[delivery.channel].remember(delivery, result)
    metrics.count(delivery.channel, outcome, attempt_ok)


def _endpoint_outcome(delivery: Delivery) -> None:
    """A webhook endpoint's run of failures: reset by a success; at the limit, disabled."""
    endpoints = WebhookEndpoint.objects.filter(pk=delivery.endpoint_id)
    if delivery.status == Delivery.Status.SENT:
        endpoints.update(failures_in_a_row=0)
        return
    endpoints.update(failures_in_a_row=F("failures_in_a_row") + 1)
    limit = settings.PARLEY_WEBHOOK_DISABLE_AFTER
    disabled = endpoints.filter(enabled=True, failures_in_a_row__gte=limit).update(
        enabled=False,
        disabled_reason=f"Disabled after {limit} deliveries in a row failed for good.",
    )
    if disabled:
        logger.warning(
            "Webhook endpoint %s disabled: %d failures in a row", delivery.endpoint_id, limit
        )


def _send(channel, outgoing) -> Result:
    """Send in a sending thread; whatever goes wrong is a failed attempt, said in its words."""
    try:
        return channel.send(outgoing)
    except Exception as exc:  # a channel's own errors become failed attempts
        return Result(ok=False, response=f"{type(exc).__name__}: {exc}")


class Sender:
    """The sender of one process, on its server loop."""

    def __init__(self):
        self._task: asyncio.Task | None = None
        self._wake: asyncio.Event | None = None
        self._stopping = False
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="parley-send")

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name="parley-sender")

    async def stop(self) -> None:
        """At SIGTERM: claim nothing more, and let what is being sent finish and be recorded
        (each send is bounded by its channel's timeout), so that a deploy sends nothing twice;
        what is left is claimed by another process once its claim lapses."""
        if self._task is None:
            return
        self._stopping = True
        self._wake.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), STOP_SECONDS)
        except TimeoutError:
            self._task.cancel()

    def nudge(self) -> None:
        """Send what is due now (from any thread; a process with no server loop, such as a
        management command, leaves it to the servers' rounds)."""
        if self._wake is not None:
            server_loop.call_soon(self._wake.set)

    async def _run(self) -> None:
        poll = settings.PARLEY_DELIVERY_POLL_SECONDS
        while not self._stopping:
            self._wake.clear()
            claimed = []
            try:
                claimed = await run_db(claim_due, process=process_id())
                outcomes = await asyncio.gather(
                    *(self._deliver(delivery_id) for delivery_id in claimed),
                    return_exceptions=True,
                )
                for outcome in outcomes:
                    if isinstance(outcome, Exception):
                        raise outcome
            except Exception as exc:
                if is_transient(exc):
                    logger.warning("Sending deliveries failed (%s); trying again", exc)
                else:
                    logger.exception("Sending deliveries failed; trying again")
            if len(claimed) == BATCH or self._stopping:
                continue  # more are due, or time to stop
            try:
                await asyncio.wait_for(self._wake.wait(), poll)
            except TimeoutError:
                pass

    async def _deliver(self, delivery_id: str) -> None:
        process = process_id()
        try:
            prepared = await run_db(prepare, delivery_id=delivery_id, process=process)
        except Exception as exc:
            if is_transient(exc):
                raise  # the database is away: the claim lapses, and it is tried again then
            # A fault of Parley's own with this one delivery: a failed attempt like any other,
            # so that it backs off and fails for good rather than coming back every claim.
            logger.exception("Preparing delivery %s failed", delivery_id)
            failure = Result(
                ok=False, response=f"Parley could not prepare it ({type(exc).__name__})"
            )
            await run_db(record, delivery_id=delivery_id, process=process, result=failure)
            return
        if prepared is None:
            return
        delivery, outgoing = prepared
        channel = CHANNELS[delivery.channel]
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self._pool, _send, channel, outgoing)
        metrics.SEND_SECONDS.labels(delivery.channel).observe(time.monotonic() - started)
        await run_db(record, delivery_id=delivery_id, process=process, result=result)


sender = Sender()
