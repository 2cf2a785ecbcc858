"""A workspace's settings page, through a real Daphne as a browser without JavaScript uses it:
only owners open it; its forms set the Slack channel and add, disable, enable and delete webhook
endpoints, a new endpoint's secret shown on the answer to its form and never again."""

import re

import pytest

from reach.models import WebhookEndpoint, WorkspaceReach
from tests.conftest import log_in

pytestmark = pytest.mark.django_db(transaction=True)

PAGE = "/workspaces/team/settings/"


def _csrf(page) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)


def post_form(client, data: dict):
    token = _csrf(client.get(PAGE))
    return client.post(
        PAGE,
        data={"csrfmiddlewaretoken": token, **data},
        headers={"Referer": f"{client.base_url}{PAGE}"},
    )


def test_only_owners_open_the_settings_page_and_see_its_link(server, people):
    alice = log_in(server, "alice")
    page = alice.get(PAGE)
    assert page.status_code == 200
    assert "no-store" in page.headers["Cache-Control"]
    assert "The Team: where its questions go" in page.text
    assert "No webhook endpoints yet." in page.text
    assert 'href="/workspaces/team/settings/"' in alice.get("/").text
    for who, status in (("bob", 403), ("carol", 403), ("dave", 404)):
        client = log_in(server, who)
        assert client.get(PAGE).status_code == status, who
        assert PAGE not in client.get("/").text, who
        # Nor do its forms do anything for them.
        refused = client.post(
            PAGE,
            data={
                "csrfmiddlewaretoken": client.cookies["csrftoken"],
                "action": "add",
                "url": "https://example.com/hook",
            },
            headers={"Referer": f"{server.url}{PAGE}"},
        )
        assert refused.status_code == status, who
    # Dave owns his own workspace: its page is his.
    assert 'href="/workspaces/other/settings/"' in log_in(server, "dave").get("/").text
    anonymous = server.client()
    assert anonymous.get(PAGE).status_code == 302
    assert not WebhookEndpoint.objects.exists()


def test_an_owner_adds_an_endpoint_sees_its_secret_once_and_manages_it(server, people):
    alice = log_in(server, "alice")
    added = post_form(
        alice,
        {
            "action": "add",
            "url": "https://example.com/hook",
            "description": "Team bot",
            "event_types": ["question.asked", "question.resolved"],
        },
    )
    # The form redirects to the page, which shows the secret once.
    assert added.status_code == 302, added.text
    endpoint = WebhookEndpoint.objects.get()
    added = alice.get(PAGE)
    assert (endpoint.url, endpoint.description, endpoint.event_types) == (
        "https://example.com/hook",
        "Team bot",
        ["question.asked", "question.resolved"],
    )
    shown = re.search(r'<code class="secret" id="new-secret">([^<]+)</code>', added.text)
    assert shown and shown.group(1) == endpoint.secret
    assert "Copy it now: it is not shown again." in added.text
    assert "no-store" in added.headers["Cache-Control"]
    # Never again: not on the page, nor in the server's log.
    again = alice.get(PAGE)
    assert endpoint.secret not in again.text and "https://example.com/hook" in again.text
    assert "question.asked, question.resolved" in again.text
    assert "Nothing delivered yet." in again.text

    disabled = post_form(alice, {"action": "disable", "endpoint": endpoint.pk})
    assert disabled.status_code == 302
    endpoint.refresh_from_db()
    assert (endpoint.enabled, endpoint.disabled_reason) == (False, "Disabled by Alice.")
    page = alice.get(PAGE).text
    assert "Disabled by Alice." in page and "https://example.com/hook: disabled." in page
    post_form(alice, {"action": "enable", "endpoint": endpoint.pk})
    endpoint.refresh_from_db()
    assert (endpoint.enabled, endpoint.disabled_reason) == (True, "")

    deleted = post_form(alice, {"action": "delete", "endpoint": endpoint.pk})
    assert deleted.status_code == 302
    assert not WebhookEndpoint.objects.exists()
    assert "deleted, with its delivery log" in alice.get(PAGE).text
    assert endpoint.secret not in server.log_text()


def test_bad_forms_say_why_and_store_nothing(server, people):
    alice = log_in(server, "alice")
    for data, says in (
        ({"action": "add", "url": "ftp://example.com/"}, "must be an http or https URL"),
        ({"action": "add", "url": "https://example.com/"}, "event_types: a list of one or more"),
        (
            {"action": "add", "url": "https://example.com/", "event_types": ["question.nope"]},
            "question.nope is not one of",
        ),
        ({"action": "channel", "slack_channel": "#general"}, "a Slack channel&#x27;s id"),
        ({"action": "nothing"}, "The form asked for nothing this page does."),
    ):
        answer = post_form(alice, data)
        assert answer.status_code == 400, data
        assert says in answer.text, (data, answer.text[-2000:])
        assert 'class="form-error" role="alert"' in answer.text
    unknown = post_form(alice, {"action": "disable", "endpoint": "whk_0000000000000000"})
    assert unknown.status_code == 404
    assert not WebhookEndpoint.objects.exists()
    assert not WorkspaceReach.objects.exists()
    # What was typed stays in the form; what is saved stays in the other.
    post_form(alice, {"action": "channel", "slack_channel": "C0123ABC"})
    kept = post_form(alice, {"action": "add", "url": "ftp://example.com/", "description": "Bot"})
    assert 'value="ftp://example.com/"' in kept.text and 'value="Bot"' in kept.text
    assert 'value="C0123ABC"' in kept.text
    kept = post_form(alice, {"action": "channel", "slack_channel": "nope"})
    assert 'value="nope"' in kept.text


def test_an_owner_sets_the_slack_channel(server, people):
    alice = log_in(server, "alice")
    saved = post_form(alice, {"action": "channel", "slack_channel": "C0123ABC"})
    assert saved.status_code == 302
    assert WorkspaceReach.objects.get(workspace=people.workspace).slack_channel == "C0123ABC"
    page = alice.get(PAGE).text
    assert 'value="C0123ABC"' in page and "posted to Slack channel C0123ABC" in page
    post_form(alice, {"action": "channel", "slack_channel": ""})
    assert WorkspaceReach.objects.get(workspace=people.workspace).slack_channel == ""
