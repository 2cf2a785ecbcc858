"""This process's Prometheus metrics of conversations, turns and questions, and database-wide
gauges read when Prometheus scrapes (the platform's own are in core.metrics).

The counters, gauges and histogram are per process (scrape every process); ``parley_turns`` and
``parley_questions_pending`` count rows in the shared database, so every process reports the same.
"""

import logging

from django.apps import apps
from django.db import DatabaseError, connection
from django.db.models import Count
from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily

logger = logging.getLogger(__name__)

SOCKETS_OPEN = Gauge("parley_sockets_open", "Conversation sockets open in this process")
SOCKETS_BEHIND = Counter(
    "parley_sockets_behind", "Conversation sockets closed (4408) because their client fell behind"
)
TAILS_OPEN = Gauge("parley_tails_open", "Tails (/tail/) open in this process")
TAILS_BEHIND = Counter(
    "parley_tails_behind", "Tails ended (fell_behind) because their client stopped reading"
)
TURNS_RUNNING = Gauge("parley_turns_running", "Turns this process is running")
EVENTS_WRITTEN = Counter("parley_events_written", "Events this process appended to the log")
EVENT_COMMIT_SECONDS = Histogram(
    "parley_event_commit_seconds",
    "Time to append and commit one batch of events",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
TURNS_RESUMED = Counter(
    "parley_turns_resumed",
    "Turns this process took over and resumed from their journal",
    ["reason"],  # process_stopped, handed_back, question_settled, restart
)
TURNS_RELEASED = Counter(
    "parley_turns_released",
    "Parked turns this process released from memory (resumed when their question is settled)",
)
QUESTIONS_PARKED = Gauge(
    "parley_questions_parked", "Questions turns in this process's memory are waiting on"
)
ACCESS_REVOKED = Counter(
    "parley_access_revoked",
    "Sockets, tails and MCP sessions ended because their person lost access to the workspace "
    "or their API token was revoked or expired",
    ["kind"],  # removed, lowered, token_ended
)
WAKEUPS_RECOVERED = Counter(
    "parley_lost_wakeups_recovered",
    "Wake-ups the channel layer lost, made good from the database",
    ["kind"],  # answer, steer, stop
)


class DatabaseCollector:
    """``parley_turns`` by status and ``parley_questions_pending``, counted at scrape time.

    It queries the database synchronously: collect from a database thread, never on the loop.
    """

    def describe(self):
        # Without this the registry would call collect() (and query) when registering.
        return [self._turns(), self._questions()]

    def collect(self):
        # Imported here so that any module may import the metrics before models are loaded.
        from .models import Turn

        turns, questions = self._turns(), self._questions()
        try:
            counts = dict(Turn.objects.order_by().values_list("status").annotate(count=Count("pk")))
            # Read through the app registry: conversations never imports selection.
            selection = apps.get_model("selection", "Selection")
            pending = selection._default_manager.filter(status=selection.Status.PENDING).count()
        except DatabaseError as error:
            # The database away must not hide this process's own metrics.
            logger.warning("Metrics: counting turns and questions failed: %s", error)
            connection.close()
            return
        for status in Turn.Status.values:
            turns.add_metric([status], counts.get(status, 0))
        questions.add_metric([], pending)
        yield turns
        yield questions

    @staticmethod
    def _turns() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "parley_turns", "Turns in the database by status", labels=["status"]
        )

    @staticmethod
    def _questions() -> GaugeMetricFamily:
        return GaugeMetricFamily("parley_questions_pending", "Questions waiting for an answer")


def _register_database_collector() -> None:
    try:
        REGISTRY.register(DatabaseCollector())
    except ValueError:
        pass  # already registered (the module was loaded twice)


_register_database_collector()
