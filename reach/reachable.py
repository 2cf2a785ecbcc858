"""How a person can be reached on this server, as their settings show it: which channels are set
up, their address on each, and whether Slack knows them, read from what is stored (no network
call: Slack is asked when something is first sent there)."""

from .models import SlackUser
from .outbox import email_is_set_up, slack_is_set_up


def slack_match(user) -> bool | None:
    """Whether the person's email matched a Slack user when it was last looked up: None if it
    was never looked up (or was for an email they no longer have)."""
    found = SlackUser.objects.filter(user=user).first()
    if found is None or found.email.lower() != (user.email or "").lower():
        return None
    return bool(found.slack_id)


def reachable(user) -> dict:
    """``{"email": {"set_up", "address"}, "slack": {"set_up", "matched"}, "browser":
    {"set_up"}}``: ``matched`` (True, False, or None for not looked up yet) only when Slack
    is set up."""
    slack = slack_is_set_up()
    return {
        "email": {"set_up": email_is_set_up(), "address": user.email or ""},
        "slack": {"set_up": slack, "matched": slack_match(user) if slack else None},
        "browser": {"set_up": True},
    }
