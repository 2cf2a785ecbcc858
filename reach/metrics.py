"""The outbox's Prometheus metrics: deliveries by channel and outcome, attempts, how long sends
take, and (read from the database at each scrape) how many wait to be sent."""

import asyncio
import logging

from django.db import DatabaseError, connection
from django.db.models import Count
from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily

logger = logging.getLogger(__name__)

DELIVERIES = Counter(
    "parley_deliveries",
    "Deliveries recorded by this process, by channel and outcome",
    # outcome: sent, failed (for good), retried (to be tried again), skipped, deferred
    ["channel", "outcome"],
)
ATTEMPTS = Counter(
    "parley_delivery_attempts",
    "Attempts at sending a delivery made by this process, by channel and whether they worked",
    ["channel", "ok"],
)
SEND_SECONDS = Histogram(
    "parley_delivery_send_seconds",
    "How long one send took (SMTP, Slack's Web API, a webhook's endpoint)",
    ["channel"],
)


def count(channel: str, outcome: str, attempt_ok: bool | None) -> None:
    """Count a recorded outcome (see reach.sender.record); ``attempt_ok`` None: nothing was
    tried (skipped, deferred)."""
    if attempt_ok is not None:
        ATTEMPTS.labels(channel, str(attempt_ok).lower()).inc()
    DELIVERIES.labels(channel, outcome).inc()


class OutboxCollector:
    """Deliveries in the database by channel and status (every process's, at each scrape)."""

    def describe(self):
        return [self._family()]

    def collect(self):
        from .models import Delivery

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # a thread without a loop: /metrics collects from one
        else:
            return  # never a query on the event loop (a test reading one metric in-process)
        family = self._family()
        try:
            rows = (
                Delivery.objects.order_by()
                .values_list("channel", "status")
                .annotate(count=Count("pk"))
            )
            counts = {(channel, status): n for channel, status, n in rows}
        except DatabaseError as error:
            logger.warning("Metrics: counting deliveries failed: %s", error)
            connection.close()
            return
        for channel in ("email", "slack", "webhook"):
            for status in ("pending", "sent", "failed", "skipped"):
                family.add_metric([channel, status], counts.get((channel, status), 0))
        yield family

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "parley_outbox_deliveries",
            "Deliveries in the outbox by channel and status",
            labels=["channel", "status"],
        )


try:
    REGISTRY.register(OutboxCollector())
except ValueError:
    pass  # already registered
