"""Each person decides what reaches them: their own settings over REST (/api/me/notifications/)
and on their page (/settings/notifications/), defaults until they choose, bad input refused with
nothing changed, nobody reading another's; and quiet hours that hold email back until they end
(planned with the real database, and sent through a real SMTP server once the window is over)."""

import re
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from conversations import services
from reach.models import Delivery, Preference, SlackUser
from reach.preferences import preference_update
from reach.sender import claim_due
from selection.services import selection_request
from tests.conftest import log_in, wait_until
from tests.helpers import ask, create_conversation, shown, start, wait_pending
from tests.slack_server import SlackServer

ME = "/api/me/notifications/"
PAGE = "/settings/notifications/"
DEFAULTS = {
    "email": "addressed",
    "slack": "addressed",
    "browser": "all",
    "quiet_from": None,
    "quiet_until": None,
    "timezone": "UTC",
    "chosen": False,
}


@pytest.fixture
def slack():
    # Slack's Web API as a local server (nobody here is a Slack user: what is posted is
    # skipped, after one lookup each).
    server = SlackServer(token="xoxb-test-token").start()
    yield server
    server.stop()


@pytest.fixture
def server(make_server, mailbox, slack):
    # Email and Slack set up.
    return make_server(
        PARLEY_EMAIL_URL=mailbox.url,
        PARLEY_SLACK_BOT_TOKEN="xoxb-test-token",
        PARLEY_SLACK_SIGNING_SECRET="test-signing-secret",
        PARLEY_SLACK_API_URL=slack.api_url,
    )


def settings_of(body: dict) -> dict:
    return {name: value for name, value in body.items() if name != "channels"}


def form_token(page) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)


def test_a_person_has_the_defaults_and_sees_which_channels_reach_them(server, people):
    SlackUser.objects.create(
        user=people.bob.user, email="bob@example.com", slack_id="U0BOB", looked_up_at=timezone.now()
    )
    SlackUser.objects.create(
        user=people.carol.user, email="carol@example.com", slack_id="", looked_up_at=timezone.now()
    )
    with server.client(people.bob) as bob:
        body = bob.get(ME).json()
    assert settings_of(body) == DEFAULTS
    assert body["channels"] == {
        "email": {"set_up": True, "address": "bob@example.com"},
        "slack": {"set_up": True, "matched": True},
        "browser": {"set_up": True},
    }
    with server.client(people.carol) as carol:
        assert carol.get(ME).json()["channels"]["slack"] == {"set_up": True, "matched": False}
    # Alice was never looked up: Slack will when it first has something for her.
    with server.client(people.alice) as alice:
        assert alice.get(ME).json()["channels"]["slack"] == {"set_up": True, "matched": None}
    assert not Preference.objects.exists()  # reading chose nothing


def test_without_email_or_slack_set_up_the_settings_say_so(make_server, people):
    server = make_server()
    with server.client(people.bob) as bob:
        body = bob.get(ME).json()
    assert body["channels"] == {
        "email": {"set_up": False, "address": "bob@example.com"},
        "slack": {"set_up": False, "matched": None},
        "browser": {"set_up": True},
    }
    page = log_in(server, "bob").get(PAGE)
    assert "Email is not set up on this server" in page.text
    assert "Slack is not set up on this server" in page.text


def test_a_person_changes_their_own_settings_and_nobody_else_s(server, people):
    with server.client(people.bob) as bob:
        changed = bob.put(
            ME,
            json={
                "email": "all",
                "browser": "addressed",
                "quiet_from": "22:00",
                "quiet_until": "07:30",
                "timezone": "Europe/Paris",
            },
        )
        assert changed.status_code == 200, changed.text
        expected = {
            **DEFAULTS,
            "email": "all",
            "browser": "addressed",
            "quiet_from": "22:00",
            "quiet_until": "07:30",
            "timezone": "Europe/Paris",
            "chosen": True,
        }
        assert settings_of(changed.json()) == expected
        assert settings_of(bob.get(ME).json()) == expected
        # What is left out stays as it is; null ends the quiet hours.
        again = bob.put(ME, json={"slack": "off", "quiet_from": None, "quiet_until": None})
        assert settings_of(again.json()) == {
            **expected,
            "slack": "off",
            "quiet_from": None,
            "quiet_until": None,
        }
        # There is no way to name someone else: a query is ignored, a field refused.
        assert settings_of(bob.get(f"{ME}?user=alice").json())["slack"] == "off"
        refused = bob.put(ME, json={"user": "alice", "email": "off"})
        assert refused.status_code == 400
        assert refused.json()["error"]["message"].startswith("user: not a setting")
    with server.client(people.alice) as alice:
        assert settings_of(alice.get(ME).json()) == DEFAULTS
    stored = Preference.objects.get()
    assert (stored.user, stored.email, stored.slack) == (people.bob.user, "all", "off")
    # Nobody signed in: nothing to read or change.
    with server.client() as anonymous:
        assert anonymous.get(ME).status_code == 401
        assert anonymous.put(ME, json={"email": "off"}).status_code == 401
        page = anonymous.get(PAGE)
        assert page.status_code == 302 and page.headers["Location"].startswith("/login/")


@pytest.mark.parametrize(
    "body, says",
    [
        ({"email": "sometimes"}, "email: "),
        ({"slack": True}, "slack: "),
        ({"browser": None}, "browser: "),
        ({"quiet_from": "25:00", "quiet_until": "07:00"}, "quiet_from: must be a time of day"),
        ({"quiet_from": 2200, "quiet_until": "07:00"}, "quiet_from: must be a string"),
        ({"quiet_until": "07:00"}, "give both (or neither)"),
        ({"timezone": "Mars/Olympus_Mons"}, "timezone: a time zone's name"),
        ({"timezone": 1}, "timezone: must be a string"),
        # One good setting with a bad one: neither is saved.
        ({"email": "off", "timezone": "Nowhere"}, "timezone: "),
        ({"colour": "blue"}, "colour: not a setting"),
        ([], "Expected a dictionary"),
    ],
)
def test_bad_settings_are_refused_and_change_nothing(server, people, body, says):
    with server.client(people.bob) as bob:
        bob.put(ME, json={"email": "all", "timezone": "Asia/Tokyo"})
        before = bob.get(ME).json()
        refused = bob.put(ME, json=body)
        assert refused.status_code == 400, refused.text
        assert refused.headers["content-type"] == "application/json"
        error = refused.json()["error"]
        assert error["code"] == "invalid" and says in error["message"], error
        assert bob.get(ME).json() == before
    stored = Preference.objects.get(user=people.bob.user)
    assert (stored.email, stored.timezone, stored.quiet_from) == ("all", "Asia/Tokyo", None)


def test_the_settings_page_shows_the_defaults_and_saves_a_person_s_choices(server, people):
    bob = log_in(server, "bob")
    home = bob.get("/")
    assert re.search(r'<a href="/settings/account/"[^>]*id="settings-link"', home.text)
    page = bob.get(PAGE)
    assert page.status_code == 200
    text = shown(page)
    assert "You have not chosen yet: these are the defaults" in text
    assert "Sent to bob@example.com." in text
    assert "Slack will look you up by your email (bob@example.com)" in text
    checked = dict(re.findall(r'name="(email|slack|browser)" value="(\w+)"[^>]*checked', text))
    assert checked == {"email": "addressed", "slack": "addressed", "browser": "all"}
    assert re.search(r'<option value="UTC" selected>UTC</option>', text)

    saved = bob.post(
        PAGE,
        data={
            "csrfmiddlewaretoken": form_token(page),
            "email": "off",
            "slack": "all",
            "browser": "addressed",
            "quiet_from": "21:15",
            "quiet_until": "06:45",
            "timezone": "America/New_York",
        },
        headers={"Referer": f"{server.url}{PAGE}"},
    )
    assert saved.status_code == 302 and saved.headers["Location"] == PAGE
    page = bob.get(PAGE)
    text = shown(page)
    assert "Your notification settings are saved." in text
    assert "You have not chosen yet" not in text
    checked = dict(re.findall(r'name="(email|slack|browser)" value="(\w+)"[^>]*checked', text))
    assert checked == {"email": "off", "slack": "all", "browser": "addressed"}
    assert 'name="quiet_from" value="21:15"' in text and 'name="quiet_until" value="06:45"' in text
    assert '<option value="America/New_York" selected>' in text
    # The page's header carries the browser's choice to people.js.
    assert 'data-browser-notifications="addressed"' in text
    with server.client(people.bob) as api:
        assert settings_of(api.get(ME).json()) == {
            "email": "off",
            "slack": "all",
            "browser": "addressed",
            "quiet_from": "21:15",
            "quiet_until": "06:45",
            "timezone": "America/New_York",
            "chosen": True,
        }


@pytest.mark.parametrize(
    "change, says",
    [
        ({"quiet_until": ""}, "Give both times for quiet hours"),
        ({"quiet_from": "late"}, "Enter a valid time."),
        ({"timezone": "Mars/Olympus_Mons"}, "Select a valid choice."),
        ({"email": "sometimes"}, "Select a valid choice."),
    ],
)
def test_the_settings_page_shows_what_is_wrong_and_saves_nothing(server, people, change, says):
    bob = log_in(server, "bob")
    page = bob.get(PAGE)
    form = {
        "csrfmiddlewaretoken": form_token(page),
        "email": "all",
        "slack": "off",
        "browser": "off",
        "quiet_from": "22:00",
        "quiet_until": "07:00",
        "timezone": "Europe/Berlin",
        **change,
    }
    refused = bob.post(PAGE, data=form, headers={"Referer": f"{server.url}{PAGE}"})
    assert refused.status_code == 400
    text = shown(refused)
    assert says in text
    assert 'class="form-error" role="alert"' in text
    # What the person typed is kept on the page, and nothing was saved.
    assert f'name="quiet_from" value="{form["quiet_from"]}"' in text
    assert not Preference.objects.exists()


@pytest.fixture
def turn(people, conversation):
    turn, _ = services.turn_start(conversation=conversation, user=people.alice.user, input="hi")
    return turn


def test_a_delivery_planned_in_quiet_hours_waits_until_they_end(settings, people, turn):
    """Planned with the real database and clock: a window around now, in a zone that is not
    the server's."""
    settings.PARLEY_EMAIL_URL = "smtp://127.0.0.1:9"
    zone = "Asia/Kathmandu"  # UTC+05:45
    local = timezone.now().astimezone(ZoneInfo(zone))
    ends = (local + timedelta(hours=2)).replace(microsecond=0)
    preference_update(
        user=people.bob.user,
        email="all",
        quiet_from=(local - timedelta(hours=1)).time(),
        quiet_until=ends.time(),
        timezone=zone,
    )
    # Alice hears of every question too, and has no quiet hours.
    preference_update(user=people.alice.user, email="all")
    selection_request(
        selection_id="s_quietquietquietq",
        turn_id=turn.pk,
        ordinal=1,
        fields={"kind": "text", "prompt": "Which budget?"},
        timeout_seconds=6 * 3600,
        process=turn.runner,
    )
    for_bob = Delivery.objects.get(recipient=people.bob.user)
    for_alice = Delivery.objects.get(recipient=people.alice.user)
    assert (for_bob.channel, for_bob.status) == ("email", "pending")
    assert for_bob.next_attempt_at == ends
    assert for_alice.next_attempt_at <= timezone.now()
    # The sender claims what is due: Alice's, not Bob's.
    assert claim_due(process="test") == [for_alice.pk]
    assert claim_due(process="test") == []


def test_after_quiet_hours_the_email_is_sent(server, people, mailbox):
    """End to end: Bob's quiet hours end a few seconds from now; the question's email waits
    for their end, then arrives."""
    zone = "America/St_Johns"  # UTC-03:30 (or -02:30)
    local = timezone.now().astimezone(ZoneInfo(zone))
    ends = (local + timedelta(seconds=6)).replace(microsecond=0)
    with server.client(people.bob) as bob:
        quiet = bob.put(
            ME,
            json={
                "quiet_from": (local - timedelta(minutes=1)).strftime("%H:%M:%S"),
                "quiet_until": ends.strftime("%H:%M:%S"),
                "timezone": zone,
            },
        )
        assert quiet.status_code == 200, quiet.text
    with server.client(people.alice) as alice:
        cid = create_conversation(alice, title="Budget")
        start(alice, cid, [ask(kind="confirm", prompt="Approve the budget?", addressee="bob")])
        pending = wait_pending(alice, cid)
    delivery = Delivery.objects.get(selection_id=pending["id"], channel="email")
    assert delivery.next_attempt_at == ends
    if timezone.now() < ends:
        assert mailbox.messages == []  # still quiet
    (message,) = mailbox.wait_for(1)
    assert message["To"] == "bob@example.com"
    assert message["Subject"] == "A question for you in “Budget”"
    sent = wait_until(
        lambda: Delivery.objects.filter(pk=delivery.pk, status="sent").first(),
        what="the delivery recorded as sent",
    )
    assert sent.sent_at >= ends
