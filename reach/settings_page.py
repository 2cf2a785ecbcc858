"""The person's own notification settings page (``/settings/notifications/``): per channel
(email, Slack, the browser) which questions reach them, their quiet hours and time zone, saved
through the same service as the API; and the context processor that tells every page's script
what the person chose for the browser (see people.js)."""

from zoneinfo import available_timezones

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.utils.functional import SimpleLazyObject

from core.errors import ApplicationError

from .models import Reach
from .preferences import CHANNELS, preference_for, preference_update
from .reachable import reachable


def time_zones() -> list[tuple[str, str]]:
    return [(name, name) for name in sorted(available_timezones())]


class NotificationsForm(forms.Form):
    """One person's choices; the service (preference_update) has the last word on each."""

    email = forms.ChoiceField(choices=Reach.choices, widget=forms.RadioSelect, label="Email")
    slack = forms.ChoiceField(choices=Reach.choices, widget=forms.RadioSelect, label="Slack")
    browser = forms.ChoiceField(
        choices=Reach.choices, widget=forms.RadioSelect, label="Browser notifications"
    )
    quiet_from = forms.TimeField(
        required=False,
        label="Quiet from",
        widget=forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
    )
    quiet_until = forms.TimeField(
        required=False,
        label="until",
        widget=forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
    )
    timezone = forms.ChoiceField(label="Time zone")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["timezone"].choices = time_zones()

    def clean(self):
        data = super().clean()
        starts, ends = data.get("quiet_from"), data.get("quiet_until")
        if (starts is None) != (ends is None) and not self.errors:
            raise forms.ValidationError(
                "Give both times for quiet hours (or leave both empty for none)."
            )
        return data


@login_required
def notification_settings(request):
    """GET: the form with the person's choices (the defaults if they never chose); POST: save
    them (then back here, with a message), or show what is wrong (400), changing nothing."""
    preference = preference_for(request.user)
    status = 200
    if request.method == "POST":
        form = NotificationsForm(request.POST)
        if form.is_valid():
            try:
                preference_update(user=request.user, **form.cleaned_data)
            except ApplicationError as error:
                form.add_error(None, error.message)
            else:
                messages.success(request, "Your notification settings are saved.")
                return redirect("notification-settings")
        status = 400
    else:
        form = NotificationsForm(
            initial={
                **{channel: getattr(preference, channel) for channel in CHANNELS},
                "quiet_from": preference.quiet_from,
                "quiet_until": preference.quiet_until,
                "timezone": preference.timezone,
            }
        )
    context = {
        "form": form,
        "channels": [
            (form[channel], reachable_info)
            for channel, reachable_info in reachable(request.user).items()
        ],
        "chosen": preference.pk is not None,
    }
    return render(request, "reach/notifications.html", context, status=status)


def browser_choice(request) -> dict:
    """A context processor: ``browser_notifications`` (off, addressed or all), the person's
    choice for the browser, read only if the page shows it (signed in)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"browser_notifications": SimpleLazyObject(lambda: preference_for(user).browser)}
