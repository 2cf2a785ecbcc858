"""What each person chose: which channels they hear on, of which questions, and their quiet
hours. The choices are read here in one place, with their defaults."""

from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from django.db import transaction

from core.errors import ApplicationError

from .models import Preference, Reach

CHANNELS = ("email", "slack", "browser")


def preference_for(user) -> Preference:
    """The person's choices: their row, or the defaults (unsaved) if they never chose."""
    try:
        return user.reach_preference
    except Preference.DoesNotExist:
        return Preference(user=user)


def hears(preference: Preference, channel: str, *, addressed: bool) -> bool:
    """Whether the person wants news of a question on ``channel``: one addressed to them (or
    that names them: an escalation), or any they may answer."""
    reach = getattr(preference, channel)
    return reach == Reach.ALL or (addressed and reach == Reach.ADDRESSED)


def quiet_until(preference: Preference, now: datetime) -> datetime | None:
    """The end of the quiet hours ``now`` falls in, if it does (email and Slack wait till
    then); None outside them, or with none set."""
    start, end = preference.quiet_from, preference.quiet_until
    if start is None or end is None or start == end:
        return None
    try:
        zone = ZoneInfo(preference.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        zone = ZoneInfo("UTC")
    local = now.astimezone(zone)
    today = local.time().replace(tzinfo=None)
    if start < end:
        inside = start <= today < end
    else:  # past midnight: 22:00 to 07:00
        inside = today >= start or today < end
    if not inside:
        return None
    ends = datetime.combine(local.date(), end, tzinfo=zone)
    if ends <= local:
        ends += timedelta(days=1)
    return ends


def _time_or_none(value, name: str) -> time | None:
    if value in (None, ""):
        return None
    if isinstance(value, time):
        return value
    try:
        return time.fromisoformat(str(value))
    except ValueError:
        raise ApplicationError("invalid", f"{name}: a time of day such as '22:00'.") from None


def preference_update(*, user, **changes) -> Preference:
    """Save the person's choices (any of ``email``, ``slack``, ``browser``: off, addressed or
    all; ``quiet_from``, ``quiet_until``: a time of day or null, both or neither; ``timezone``:
    an IANA name). Raises 400 ``invalid`` and changes nothing on a bad value."""
    unknown = set(changes) - {*CHANNELS, "quiet_from", "quiet_until", "timezone"}
    if unknown:
        raise ApplicationError("invalid", f"Unknown setting: {', '.join(sorted(unknown))}.")
    with transaction.atomic():
        preference, _ = Preference.objects.select_for_update().get_or_create(user=user)
        for channel in CHANNELS:
            if channel in changes:
                if changes[channel] not in Reach.values:
                    raise ApplicationError(
                        "invalid", f"{channel}: one of {', '.join(Reach.values)}."
                    )
                setattr(preference, channel, changes[channel])
        for name in ("quiet_from", "quiet_until"):
            if name in changes:
                setattr(preference, name, _time_or_none(changes[name], name))
        if (preference.quiet_from is None) != (preference.quiet_until is None):
            raise ApplicationError(
                "invalid", "quiet_from, quiet_until: give both (or neither) for quiet hours."
            )
        if "timezone" in changes:
            if changes["timezone"] not in available_timezones():
                raise ApplicationError(
                    "invalid", "timezone: a time zone's name, such as 'Europe/Paris'."
                )
            preference.timezone = changes["timezone"]
        preference.save()
    return preference
