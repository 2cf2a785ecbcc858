"""Questions in Slack, end to end: a real Daphne talks to a local server speaking Slack's Web API
(through slack_sdk) and takes clicks signed as Slack signs them. A question for a person is a
direct message to their Slack user (matched by email), one for anyone a post to the workspace's
channel; a click answers as the person the clicker is, with their rights, and the same turn goes
on; once settled anywhere, the message says who answered, how and where."""

import copy
import time
from datetime import timedelta

import httpx
import pytest
from axes.models import AccessAttempt
from django.db.models import Sum
from django.utils import timezone

from reach.models import Attempt, Delivery, SlackUser, WorkspaceReach
from reach.preferences import preference_update
from reach.slack_answers import NOT_YOURS, UNKNOWN_PERSON
from selection.models import Selection
from tests.conftest import wait_until
from tests.helpers import ask, create_conversation, finished, outcomes, reply, start, wait_pending
from tests.slack_server import SlackServer

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "xoxb-test"
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"


@pytest.fixture
def slack():
    server = SlackServer(token=TOKEN).start()
    server.add_user("U0ALICE", "alice@example.com", "Alice")
    server.add_user("U0BOB", "Bob@Example.com", "Bob")  # Slack keeps the case people typed
    server.add_user("U0CAROL", "carol@example.com", "Carol")
    server.add_user("U0DAVE", "dave@example.com", "Dave")
    server.add_user("U0EVE", "eve@elsewhere.example", "Eve")  # nobody in Parley
    server.channels.add("C0TEAM")
    yield server
    server.stop()


@pytest.fixture
def slack_parley(make_server, slack):
    """Start a Daphne connected to the Slack server; at the end, its log holds neither the bot
    token nor the signing secret."""
    started = []

    def start_server(**extra):
        server = make_server(
            PARLEY_SLACK_BOT_TOKEN=TOKEN,
            PARLEY_SLACK_SIGNING_SECRET=SECRET,
            PARLEY_SLACK_API_URL=slack.api_url,
            PARLEY_DELIVERY_BACKOFF_SECONDS="0.2",
            PARLEY_DELIVERY_POLL_SECONDS="0.2",
            **extra,
        )
        started.append(server)
        return server

    yield start_server
    for server in started:
        log = server.log_text()
        assert TOKEN not in log and SECRET not in log
        assert "#k=" not in log and "?k=" not in log  # nor an answer link


def click(server, slack, user, message, action_id, **kwargs):
    return slack.click(
        server.url,
        signing_secret=SECRET,
        user=user,
        message=message,
        action_id=action_id,
        **kwargs,
    )


def delivery_to(address: str, cause: str = "asked") -> Delivery:
    return Delivery.objects.get(channel="slack", address=address, cause=cause)


def recorded(address: str, cause: str = "asked") -> Delivery:
    return wait_until(
        lambda: Delivery.objects.filter(
            channel="slack", address=address, cause=cause, status__in=("sent", "failed", "skipped")
        ).first(),
        what=f"the Slack delivery to {address} to be recorded",
    )


RELEASE = ask(
    kind="choice",
    prompt="Which build ships?",
    options=[
        {"label": "Release candidate 2", "value": "rc2", "description": "Tested on Friday"},
        {"label": "Nightly", "value": "nightly"},
    ],
    addressee="bob",
)


def test_a_question_for_bob_is_a_direct_message_answered_by_its_button(slack_parley, people, slack):
    server = slack_parley()
    alice = server.client(people.alice)
    cid = create_conversation(alice, title="Release plan")
    start(alice, cid, [{"say": "Checking the builds."}, RELEASE])
    pending = wait_pending(alice, cid)

    dm = slack.wait_message("D0BOB")
    # Bob was found by his email (Slack's case aside), with the bot token.
    (lookup,) = slack.calls_of("users.lookupByEmail")
    assert lookup.args == {"email": "bob@example.com"} and lookup.authorized
    (post,) = slack.calls_of("chat.postMessage")
    assert post.authorized and post.args["channel"] == "U0BOB"
    # What it says is what Parley says: the question, its options, who asked for whom and why,
    # where, and when it expires.
    assert dm.text == "A question for you in “Release plan”: Which build ships?"
    shown = dm.shown_text()
    assert shown.splitlines()[:2] == ["A question for you", "Which build ships?"]
    assert "Choose:\n• Release candidate 2: Tested on Friday\n• Nightly" in shown
    assert "Asked by the agent, in Alice’s turn, for Bob." in shown
    assert "In “Release plan” (The Team)." in shown
    assert "It expires at " in shown and "(UTC)." in shown
    assert '"say": "Checking the builds."' in shown
    assert f"/conversations/{cid}/#question-{pending['id']}|Open the conversation>" in shown
    assert [b["text"]["text"] for b in dm.buttons()] == ["Release candidate 2", "Nightly"]
    # Nobody else heard of it (Alice keeps the default: questions addressed to her).
    assert [m.channel for m in slack.messages.values()] == ["D0BOB"]
    sent = recorded("bob@example.com")
    assert (sent.status, sent.reference) == ("sent", f"D0BOB:{dm.ts}")
    assert SlackUser.objects.get(user=people.bob.user).slack_id == "U0BOB"

    # Bob clicks "Release candidate 2": Slack gets its empty 200 at once.
    response, reply_url = click(server, slack, "U0BOB", dm, "choice-0")
    assert (response.status_code, response.content) == (200, b"")

    # The same turn goes on with Bob's answer, given in Slack.
    events = finished(alice, cid)
    assert outcomes(events) == [{"status": "answered", "value": "rc2", "by": "bob"}]
    (resolved,) = [e for e in events if e["type"] == "selection.resolved"]
    assert resolved["data"]["answered_via"] == "slack"
    assert resolved["data"]["answered_by"]["username"] == "bob"

    # The message now says who answered, how and where, and has no buttons.
    slack.wait_updated(dm)
    assert dm.blocks[0]["text"]["text"] == "Answered by Bob in Slack: Release candidate 2"
    assert dm.buttons() == []
    assert "Which build ships?" in dm.shown_text()
    (update,) = slack.calls_of("chat.update")
    assert update.authorized and (update.args["channel"], update.args["ts"]) == ("D0BOB", dm.ts)
    assert recorded(sent.pk, "settled").status == "sent"  # addressed by the message it edits
    # Bob was told nothing more: the message says it.
    assert not [body for url, body in slack.replies if url == reply_url]
    # Matched once, by email; the click was mapped by the Slack id kept since.
    assert len(slack.calls_of("users.lookupByEmail")) == 1
    assert slack.calls_of("users.info") == []


def test_a_question_for_anyone_goes_to_the_workspace_channel(slack_parley, people, slack):
    WorkspaceReach.objects.create(workspace=people.workspace, slack_channel="C0TEAM")
    server = slack_parley(PARLEY_LOG_LEVEL="DEBUG")
    alice = server.client(people.alice)
    cid = create_conversation(alice, title="Ops")
    start(alice, cid, [ask(kind="confirm", prompt="Restart the cache?"), ask(kind="text")])
    first = wait_pending(alice, cid)

    post = slack.wait_message("C0TEAM")
    assert post.text == "A new question in “Ops”: Restart the cache?"
    assert "Asked by the agent, in Alice’s turn, for anyone in The Team who may answer." in (
        post.shown_text()
    )
    assert [(b["text"]["text"], b["action_id"]) for b in post.buttons()] == [
        ("Yes", "confirm-yes"),
        ("No", "confirm-no"),
    ]
    # Nobody was messaged directly: by default people hear of the questions for them.
    assert list(slack.messages) == [("C0TEAM", post.ts)]

    # Bob (not yet known to Parley by his Slack id) clicks No: matched by his profile's email.
    response, _ = click(server, slack, "U0BOB", post, "confirm-no")
    assert response.status_code == 200
    (info,) = slack.calls_of("users.info")
    assert info.args == {"user": "U0BOB"} and info.authorized
    wait_until(lambda: Selection.objects.get(pk=first["id"]).status == "answered")
    answered = Selection.objects.get(pk=first["id"])
    assert (answered.answer, answered.answered_by, answered.answered_via) == (
        False,
        people.bob.user,
        "slack",
    )
    slack.wait_updated(post)
    assert post.blocks[0]["text"]["text"] == "Answered by Bob in Slack: no"

    # The text question: its post has one button, which gives each clicker their own link.
    second = wait_until(
        lambda: (p := wait_pending(alice, cid)) and p["id"] != first["id"] and p,
        what="the second question",
    )
    text_post = slack.wait_for(
        lambda: [m for m in slack.messages.values() if m.ts != post.ts], "the second post"
    )[0]
    assert [(b["text"]["text"], b["action_id"]) for b in text_post.buttons()] == [
        ("Answer in Parley", "answer-link")
    ]
    response, reply_url = click(server, slack, "U0BOB", text_post, "answer-link")
    assert response.status_code == 200
    told = slack.wait_reply(reply_url)
    assert (told["response_type"], told["replace_original"]) == ("ephemeral", False)
    link = told["text"].split("<", 1)[1].split("|", 1)[0]
    assert f"/answer/{second['id']}/#k=" in link
    # The link is Bob's, and answers the question.
    token = link.split("#k=")[1]
    answered = httpx.post(
        f"{server.url}/api/selections/{second['id']}/reply/",
        headers={"X-Parley-Link": token},
        json={"answer": "Done"},
        timeout=20,
    )
    assert answered.status_code == 200 and answered.json()["answered_by"]["username"] == "bob"
    events = finished(alice, cid)
    assert [o["value"] for o in outcomes(events)] == [False, "Done"]
    slack.wait_updated(text_post)
    assert text_post.blocks[0]["text"]["text"] == "Answered by Bob from an answer link: “Done”"
    assert text_post.buttons() == []


def test_clicks_by_a_viewer_a_stranger_or_someone_else_are_refused(slack_parley, people, slack):
    WorkspaceReach.objects.create(workspace=people.workspace, slack_channel="C0TEAM")
    server = slack_parley()
    alice = server.client(people.alice)
    cid = create_conversation(alice)
    start(alice, cid, [ask(kind="confirm", prompt="Deploy?")])
    pending = wait_pending(alice, cid)
    post = slack.wait_message("C0TEAM")

    refusals = {
        "U0CAROL": "Viewers may watch but not answer questions. Nothing was answered.",
        "U0DAVE": NOT_YOURS,
        "U0EVE": UNKNOWN_PERSON,
    }
    for user, said in refusals.items():
        response, reply_url = click(server, slack, user, post, "confirm-yes")
        assert response.status_code == 200
        assert slack.wait_reply(reply_url) == {
            "text": said,
            "response_type": "ephemeral",
            "replace_original": False,
        }
    assert Selection.objects.get(pk=pending["id"]).status == "pending"
    assert slack.calls_of("chat.update") == []
    assert post.history == []
    # Eve, whom nobody in Parley matches, was not remembered as anyone.
    assert not SlackUser.objects.filter(slack_id="U0EVE").exists()

    # A question for Alice (an owner): Bob, a member, may not answer her message's buttons.
    reply(alice, pending["id"], answer=False)
    finished(alice, cid)
    start(alice, cid, [ask(kind="confirm", prompt="Rotate the keys?", addressee="alice")])
    for_alice = wait_pending(alice, cid)
    dm = slack.wait_message("D0ALICE")
    response, reply_url = click(server, slack, "U0BOB", dm, "confirm-yes")
    assert response.status_code == 200
    assert slack.wait_reply(reply_url)["text"] == (
        "This question is for Alice; only they or an owner may answer it. Nothing was answered."
    )
    assert Selection.objects.get(pk=for_alice["id"]).status == "pending"


def test_a_question_answered_in_parley_first_updates_its_message_and_refuses_a_late_click(
    slack_parley, people, slack
):
    server = slack_parley()
    alice = server.client(people.alice)
    cid = create_conversation(alice)
    start(alice, cid, [ask(kind="confirm", prompt="Ship it?", addressee="bob")])
    pending = wait_pending(alice, cid)
    dm = slack.wait_message("D0BOB")
    as_posted = copy.deepcopy(dm)  # what Bob's Slack still shows when he clicks

    # Alice (an owner) answers through the API first: Bob's message says so.
    assert reply(alice, pending["id"], answer=True).status_code == 200
    assert outcomes(finished(alice, cid)) == [{"status": "answered", "value": True, "by": "alice"}]
    slack.wait_updated(dm)
    assert dm.blocks[0]["text"]["text"] == "Answered by Alice through the API: yes"
    assert dm.buttons() == []

    # Bob's late click is told who answered and how, and changes nothing.
    response, reply_url = click(server, slack, "U0BOB", as_posted, "confirm-no")
    assert response.status_code == 200
    assert slack.wait_reply(reply_url)["text"] == (
        "Too late: this question was answered by Alice through the API: yes."
    )
    settled = Selection.objects.get(pk=pending["id"])
    assert (settled.answer, settled.answered_by, settled.answered_via) == (
        True,
        people.alice.user,
        "api",
    )
    assert len(slack.calls_of("chat.update")) == 1


def test_bad_signatures_and_replays_are_401_and_change_nothing(slack_parley, people, slack):
    server = slack_parley()
    alice = server.client(people.alice)
    cid = create_conversation(alice)
    start(alice, cid, [ask(kind="confirm", prompt="Drop the table?", addressee="bob")])
    pending = wait_pending(alice, cid)
    dm = slack.wait_message("D0BOB")

    forged = "v0=" + "0" * 64
    old = int(time.time()) - 6 * 60  # signed right, six minutes ago: a replay
    for refused in (
        dict(signature=forged),
        dict(signed=False),
        dict(timestamp=old),
        dict(signing_secret="not-the-secret"),
    ):
        kwargs = {"signing_secret": SECRET, **refused}
        response, _ = slack.click(
            server.url, user="U0BOB", message=dm, action_id="confirm-yes", **kwargs
        )
        assert response.status_code == 401, refused
        assert response.json()["error"]["code"] == "authentication_failed"
    # Nor does what Slack never sends: a timestamp that is no number, a body that is no text.
    endpoint = f"{server.url}/integrations/slack/interactions/"
    now = str(int(time.time()))
    for stamp, body in (("soon", b"payload=%7B%7D"), (now, b"payload=\xff")):
        headers = {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": forged}
        assert httpx.post(endpoint, headers=headers, content=body, timeout=20).status_code == 401
    assert httpx.get(endpoint, timeout=20).status_code == 405
    assert Selection.objects.get(pk=pending["id"]).status == "pending"
    assert slack.replies == [] and slack.calls_of("users.info") == []
    # Each counted as a failed sign-in from its address (as a wrong API token is).
    failures = AccessAttempt.objects.filter(ip_address="127.0.0.1").aggregate(
        n=Sum("failures_since_start")
    )["n"]
    assert failures == 6

    # Signed right and fresh, the same click answers.
    response, _ = click(server, slack, "U0BOB", dm, "confirm-yes")
    assert response.status_code == 200
    assert outcomes(finished(alice, cid)) == [{"status": "answered", "value": True, "by": "bob"}]


def test_an_address_sending_bad_signatures_is_locked_out(slack_parley, people, slack):
    server = slack_parley(PARLEY_LOGIN_ADDRESS_FAILURE_LIMIT="2")
    alice = server.client(people.alice)
    cid = create_conversation(alice)
    start(alice, cid, [ask(kind="confirm", prompt="Drop the table?", addressee="bob")])
    pending = wait_pending(alice, cid)
    dm = slack.wait_message("D0BOB")
    response, _ = click(server, slack, "U0BOB", dm, "confirm-yes", signature="v0=bad")
    assert response.status_code == 401
    # The failure that reaches the limit locks the address (as a wrong API token does) ...
    response, _ = click(server, slack, "U0BOB", dm, "confirm-yes", signature="v0=bad")
    assert response.status_code == 429
    # ... and even a right signature from there is refused, unread.
    response, _ = click(server, slack, "U0BOB", dm, "confirm-yes")
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "locked_out"
    assert int(response.headers["Retry-After"]) > 0
    assert Selection.objects.get(pk=pending["id"]).status == "pending"


def test_a_person_removed_before_the_message_is_sent_receives_nothing(slack_parley, people, slack):
    # Bob's quiet hours hold the message back, long enough for him to be removed meanwhile.
    now = timezone.now()
    preference_update(
        user=people.bob.user,
        quiet_from=(now - timedelta(hours=1)).time().replace(microsecond=0),
        quiet_until=(now + timedelta(hours=1)).time().replace(microsecond=0),
    )
    server = slack_parley()
    alice = server.client(people.alice)
    cid = create_conversation(alice)
    start(alice, cid, [ask(kind="confirm", prompt="Merge?", addressee="bob")])
    wait_pending(alice, cid)
    held = delivery_to("bob@example.com")
    assert held.status == "pending" and held.next_attempt_at > now + timedelta(minutes=30)

    people.workspace.memberships.filter(user=people.bob.user).delete()
    Delivery.objects.filter(pk=held.pk).update(next_attempt_at=timezone.now())
    skipped = recorded("bob@example.com")
    assert (skipped.status, skipped.reason) == ("skipped", "Bob may no longer answer it.")
    assert slack.calls == []


def test_slack_failing_is_retried_and_the_message_sent_once(slack_parley, people, slack):
    slack.fail("chat.postMessage", status=500, error="fatal_error")
    slack.fail("chat.postMessage", status=429, retry_after=1)
    server = slack_parley()
    alice = server.client(people.alice)
    cid = create_conversation(alice)
    start(alice, cid, [ask(kind="confirm", prompt="Ship it?", addressee="bob")])
    wait_pending(alice, cid)

    dm = slack.wait_message("D0BOB")
    sent = recorded("bob@example.com")
    assert (sent.status, sent.attempts, sent.reference) == ("sent", 3, f"D0BOB:{dm.ts}")
    posts = slack.calls_of("chat.postMessage")
    assert [call.status for call in posts] == [500, 429, 200]
    assert posts[2].at - posts[1].at >= 0.9  # Slack's Retry-After was kept
    assert len(slack.messages) == 1
    assert list(Attempt.objects.filter(delivery=sent).values_list("ok", "response")) == [
        (False, "HTTP 500: fatal_error"),
        (False, "HTTP 429: ratelimited"),
        (True, "ok"),
    ]
    # Bob's Slack id, found before the first failure, was kept: looked up once.
    assert len(slack.calls_of("users.lookupByEmail")) == 1


def test_slack_refusals_fail_for_good_and_say_slacks_error(slack_parley, people, slack):
    slack.channels_without_bot.add("C0QUIET")
    WorkspaceReach.objects.create(workspace=people.workspace, slack_channel="C0QUIET")
    server = slack_parley()
    alice = server.client(people.alice)
    cid = create_conversation(alice)
    start(alice, cid, [ask(kind="confirm", prompt="Anyone?")])
    pending = wait_pending(alice, cid)
    failed = recorded("#C0QUIET")
    assert (failed.status, failed.attempts, failed.reason) == ("failed", 1, "not_in_channel")

    # Answered: a message never posted is not updated.
    reply(alice, pending["id"], answer=True)
    finished(alice, cid)
    assert not Delivery.objects.filter(cause="settled").exists()

    # The bot's token revoked: Slack refuses it, and that is final too.
    slack.token = "xoxb-another"
    start(alice, cid, [ask(kind="confirm", prompt="Bob?", addressee="bob")])
    wait_pending(alice, cid)
    refused = recorded("bob@example.com")
    assert (refused.status, refused.attempts, refused.reason) == ("failed", 1, "invalid_auth")
    assert [call.authorized for call in slack.calls] == [True, False]


def test_a_person_slack_does_not_know_is_skipped_until_their_email_changes(
    slack_parley, people, slack
):
    del slack.users["U0BOB"]
    server = slack_parley()
    alice = server.client(people.alice)
    cid = create_conversation(alice)

    def ask_bob(prompt):
        start(alice, cid, [ask(kind="confirm", prompt=prompt, addressee="bob")])
        pending = wait_pending(alice, cid)
        delivery = wait_until(
            lambda: Delivery.objects.filter(
                selection_id=pending["id"], channel="slack", status__in=("sent", "skipped")
            ).first(),
            what="Bob's Slack delivery",
        )
        reply(alice, pending["id"], answer=True)
        finished(alice, cid)
        return delivery

    first = ask_bob("One?")
    assert (first.status, first.reason) == ("skipped", "Bob has no Slack user with their email.")
    assert list(Attempt.objects.filter(delivery=first).values_list("ok", "response")) == [
        (False, "Bob has no Slack user with their email.")
    ]
    assert SlackUser.objects.get(user=people.bob.user).slack_id == ""

    # Asked again soon: what Slack said is kept, and Slack is not asked again.
    second = ask_bob("Two?")
    assert (second.status, second.reason) == ("skipped", "Bob has no Slack user with their email.")
    assert len(slack.calls_of("users.lookupByEmail")) == 1

    # Bob's email changes to one Slack knows: he is looked up again, and messaged.
    slack.add_user("U0BOB2", "robert@example.com", "Bob")
    people.bob.user.email = "Robert@example.com"
    people.bob.user.save(update_fields=["email"])
    third = ask_bob("Three?")
    assert third.status == "sent" and third.reference.startswith("D0BOB2:")
    assert [c.args["email"] for c in slack.calls_of("users.lookupByEmail")] == [
        "bob@example.com",
        "robert@example.com",
    ]
    assert SlackUser.objects.get(user=people.bob.user).slack_id == "U0BOB2"


def test_many_options_fill_several_rows_and_other_kinds_open_the_readers_link(
    slack_parley, people, slack
):
    server = slack_parley()
    alice = server.client(people.alice)
    cid = create_conversation(alice)
    options = [{"label": f"Option {n} " + "x" * 80, "value": f"v{n}"} for n in range(30)]
    start(
        alice,
        cid,
        [
            ask(kind="choice", prompt="Pick one", options=options, addressee="bob"),
            ask(kind="text", prompt="Why?", addressee="bob"),
        ],
    )
    first = wait_pending(alice, cid)
    dm = slack.wait_message("D0BOB")
    rows = [block for block in dm.blocks if block["type"] == "actions"]
    assert [len(row["elements"]) for row in rows] == [25, 5]  # Slack's 25 to a row
    labels = [button["text"]["text"] for button in dm.buttons()]
    assert len(labels) == 30 and all(len(label) == 75 for label in labels)
    assert labels[27].startswith("Option 27 ") and labels[27].endswith("…")
    response, _ = click(server, slack, "U0BOB", dm, "choice-27")
    assert response.status_code == 200
    wait_until(lambda: Selection.objects.get(pk=first["id"]).answer == "v27")

    # A text question: Bob's message has a button opening his own answer link.
    second = wait_until(
        lambda: (p := wait_pending(alice, cid)) and p["id"] != first["id"] and p,
        what="the second question",
    )
    text_dm = slack.wait_for(
        lambda: [m for m in slack.messages.values() if m.ts != dm.ts], "the second message"
    )[0]
    (button,) = text_dm.buttons()
    assert (button["text"]["text"], button["action_id"]) == ("Answer in Parley", "open-answer-link")
    assert f"/answer/{second['id']}/#k=" in button["url"]
    # Slack tells Parley of a click on a link too: it answers nothing.
    response, reply_url = click(server, slack, "U0BOB", text_dm, "open-answer-link")
    assert (response.status_code, response.content) == (200, b"")
    assert Selection.objects.get(pk=second["id"]).status == "pending"
    # The link is Bob's: it answers as him. (Not opened here with a GET: Daphne's access log
    # would write it down, which the check of the log below refuses.)
    token = button["url"].split("#k=")[1]
    answered = httpx.post(
        f"{server.url}/api/selections/{second['id']}/reply/",
        headers={"X-Parley-Link": token},
        json={"answer": "Because"},
        timeout=20,
    )
    assert answered.status_code == 200 and answered.json()["answered_by"]["username"] == "bob"
    assert [o["value"] for o in outcomes(finished(alice, cid))] == ["v27", "Because"]
    slack.wait_updated(text_dm)
    assert text_dm.blocks[0]["text"]["text"] == "Answered by Bob from an answer link: “Because”"
    assert not [body for url, body in slack.replies if url == reply_url]
