"""Slack's Web API as Parley calls it, through the official ``slack_sdk``: a client made from the
settings (the bot token, the API's address, a timeout), and what a failed call says: Slack's own
error code (never the token), whether trying again can help, and after how long."""

from django.conf import settings
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

# A send waits this long for Slack; a click's request (which Slack wants answered within 3 s)
# waits less.
SEND_TIMEOUT_SECONDS = 10
CLICK_TIMEOUT_SECONDS = 2

# Errors Slack answers with (HTTP 200, "ok": false) that mean "not now": trying again can help.
# Every other error is a refusal that no retry changes (invalid_auth, channel_not_found,
# not_in_channel, users_not_found, invalid_blocks, ...).
TRANSIENT_ERRORS = frozenset(
    {"internal_error", "fatal_error", "service_unavailable", "request_timeout", "ratelimited"}
)


def slack_client(*, timeout: int = SEND_TIMEOUT_SECONDS) -> WebClient:
    # slack_sdk's default retry handlers retry a failed connection once; everything else is
    # the outbox's to retry, with its backoff.
    return WebClient(
        token=settings.PARLEY_SLACK_BOT_TOKEN,
        base_url=settings.PARLEY_SLACK_API_URL,
        timeout=timeout,
    )


def error_code(error: SlackApiError) -> str:
    """Slack's error code ("channel_not_found"), or "" if its answer carried none."""
    data = error.response.data
    return str(data.get("error") or "") if isinstance(data, dict) else ""


def said(error: SlackApiError) -> str:
    """What Slack said, as an attempt records it: its error code, with the HTTP status when it
    was not 200 ("HTTP 503: service_unavailable")."""
    code = error_code(error) or "no error code"
    status = error.response.status_code
    return code if status == 200 else f"HTTP {status}: {code}"


def is_final(error: SlackApiError) -> bool:
    """Whether no retry can help: a refusal. 429, a 5xx or a transient error is worth another
    try."""
    status = error.response.status_code
    if status == 429 or status >= 500:
        return False
    return error_code(error) not in TRANSIENT_ERRORS


def retry_after(error: SlackApiError) -> float | None:
    """The seconds Slack asked to wait (its ``Retry-After``, on a 429), if it said."""
    if error.response.status_code != 429:
        return None
    return _retry_after(error.response.headers)


def _retry_after(headers) -> float | None:
    for name, value in (headers or {}).items():
        if name.lower() == "retry-after":
            try:
                return max(1.0, float(value[0] if isinstance(value, list) else value))
            except (TypeError, ValueError):
                return None
    return None
