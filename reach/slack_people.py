"""Who is who on Slack, matched by email: a person's Slack user (``users.lookupByEmail``, for a
direct message) and the person a clicking Slack user is (``users.info``'s email, for an answer),
both kept in ``SlackUser`` and looked up again once the person's email has changed."""

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.utils import timezone

from .models import SlackUser
from .slack_api import CLICK_TIMEOUT_SECONDS, slack_client

# "No Slack user has this email" is asked again after this long (they may have joined since);
# a Slack user found is kept until the person's email changes.
NOBODY_KEPT = timedelta(hours=1)


def normal_email(email: str | None) -> str:
    return (email or "").strip().lower()


def known_slack_id(user) -> str | None:
    """The person's Slack id as last looked up for their current email: an id, "" if no Slack
    user had that email (within ``NOBODY_KEPT``), or None if it is to be looked up."""
    known = SlackUser.objects.filter(user=user).first()
    if known is None or normal_email(known.email) != normal_email(user.email):
        return None
    if not known.slack_id and known.looked_up_at < timezone.now() - NOBODY_KEPT:
        return None
    return known.slack_id


def slack_user_remember(*, user, email: str, slack_id: str) -> None:
    """Keep who ``user`` is on Slack, as found for ``email`` ("" for nobody)."""
    SlackUser.objects.update_or_create(
        user=user,
        defaults={
            "email": normal_email(email),
            "slack_id": slack_id,
            "looked_up_at": timezone.now(),
        },
    )


def person_of_slack_id(slack_id: str):
    """The active person already matched to ``slack_id`` for the email they have now; None if
    there is none (or their email has changed since): then ask Slack (see
    :func:`slack_email_of`)."""
    matches = [
        known.user
        for known in SlackUser.objects.filter(slack_id=slack_id, user__is_active=True)
        .exclude(slack_id="")
        .select_related("user")
        if normal_email(known.email) == normal_email(known.user.email)
    ]
    return matches[0] if len(matches) == 1 else None


def slack_email_of(slack_id: str) -> str:
    """The email of a Slack user's profile (``users.info``; the app needs ``users:read.email``),
    "" if Slack shows none. Raises slack_sdk's errors (network work: call it off the database
    threads)."""
    found = slack_client(timeout=CLICK_TIMEOUT_SECONDS).users_info(user=slack_id)
    return normal_email(((found.get("user") or {}).get("profile") or {}).get("email"))


def person_with_email(*, email: str, slack_id: str):
    """The one active person whose email is ``email`` (case aside), remembered as Slack's
    ``slack_id``; None if nobody or several have it (then nobody is guessed)."""
    if not email:
        return None
    people = list(get_user_model().objects.filter(email__iexact=email, is_active=True)[:2])
    if len(people) != 1:
        return None
    slack_user_remember(user=people[0], email=email, slack_id=slack_id)
    return people[0]
