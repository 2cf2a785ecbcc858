"""Where a question went, through a real Daphne and a real SMTP server: its deliveries over REST
(to anyone who may see the question, and nobody else) and on its admin page, each saying where it
went and whether that worked; a failed one sent again from the admin."""

import re

import pytest
from django.contrib.admin.utils import quote
from django.utils import timezone

from conversations.events import format_ts
from reach.models import Attempt, Delivery
from tests.conftest import wait_until
from tests.helpers import (
    admin_of,
    ask,
    create_conversation,
    message_after,
    run_admin_action,
    shown,
    start,
    wait_pending,
)
from tests.smtp_server import Mailbox

pytestmark = pytest.mark.django_db(transaction=True)


def deliveries_url(selection_id: str) -> str:
    return f"/api/selections/{selection_id}/deliveries/"


def sent(delivery_id: str) -> Delivery:
    return wait_until(
        lambda: Delivery.objects.filter(pk=delivery_id, status="sent").first(),
        what=f"{delivery_id} recorded as sent",
    )


def clock(moment) -> str:
    return f"{timezone.localtime(moment):%H:%M:%S}"


def test_an_emailed_question_and_its_reminder_show_where_they_went(make_server, people, mailbox):
    # Upkeep every second; Bob is reminded a fifth of the way to the expiry.
    server = make_server(
        PARLEY_EMAIL_URL=mailbox.url, PARLEY_TURN_LEASE_SECONDS="3", PARLEY_REMIND_AFTER="0.2"
    )
    with server.client(people.alice) as alice:
        cid = create_conversation(alice, title="Release")
        start(alice, cid, [ask(kind="confirm", prompt="Ship it?", addressee="bob", timeout=20)])
        question = wait_pending(alice, cid)
    asked, reminded = mailbox.wait_for(2)
    assert asked["Subject"].strip() == "A question for you in “Release”"
    assert reminded["Subject"].strip() == "Reminder: a question waits for you in “Release”"
    first = sent(Delivery.objects.get(selection_id=question["id"], cause="asked").pk)
    second = sent(Delivery.objects.get(selection_id=question["id"], cause="reminded").pk)

    expected = [
        {
            "id": first.pk,
            "channel": "email",
            "cause": "asked",
            "went": "Emailed Bob",
            "to": "Bob",
            "recipient": {"id": people.bob.user.pk, "username": "bob", "name": "Bob"},
            "status": "sent",
            "status_text": f"sent {clock(first.sent_at)}",
            "reason": "",
            "attempts": 1,
            "created_at": format_ts(first.created_at),
            "next_attempt_at": None,
            "sent_at": format_ts(first.sent_at),
        },
        {
            "id": second.pk,
            "channel": "email",
            "cause": "reminded",
            "went": "Reminded Bob by email",
            "to": "Bob",
            "recipient": {"id": people.bob.user.pk, "username": "bob", "name": "Bob"},
            "status": "sent",
            "status_text": f"sent {clock(second.sent_at)}",
            "reason": "",
            "attempts": 1,
            "created_at": format_ts(second.created_at),
            "next_attempt_at": None,
            "sent_at": format_ts(second.sent_at),
        },
    ]
    # Anyone who may see the question reads it: Alice (who owns the workspace) and Bob.
    for person in (people.alice, people.bob):
        with server.client(person) as client:
            response = client.get(deliveries_url(question["id"]))
            assert response.status_code == 200, response.text
            assert response.json() == expected
            # Names, not addresses; no link.
            assert "@" not in response.text and "?k=" not in response.text

    # Nobody else learns anything.
    with server.client(people.dave) as dave:
        refused = dave.get(deliveries_url(question["id"]))
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"
    with server.client(people.carol) as carol:
        assert carol.get(deliveries_url(question["id"])).status_code == 403
    with server.client() as anonymous:
        assert anonymous.get(deliveries_url(question["id"])).status_code == 401
    with server.client(people.alice) as alice:
        assert alice.get(deliveries_url("s_0000000000000000")).status_code == 404

    # The question's admin page says where it went, and when.
    admin = admin_of(server, people)
    page = shown(admin.get(f"/admin/selection/selection/{quote(question['id'])}/change/"))
    assert "Where it went" in page
    assert f"Emailed Bob: sent {clock(first.sent_at)}" in page
    assert f"Reminded Bob by email: sent {clock(second.sent_at)}" in page
    # Each delivery's own page, with its attempts.
    page = shown(admin.get(f"/admin/reach/delivery/{quote(first.pk)}/change/"))
    assert "250 accepted" in page and "bob@example.com" in page
    listing = shown(admin.get("/admin/reach/delivery/?status__exact=sent&cause__exact=reminded"))
    assert second.pk in listing and first.pk not in listing


def test_a_failed_delivery_is_sent_again_from_the_admin(make_server, people):
    # An SMTP server that is not there yet (its port kept), and one try per delivery.
    box = Mailbox().start()
    port, url = box.controller.port, box.url
    box.stop()
    server = make_server(PARLEY_EMAIL_URL=url, PARLEY_DELIVERY_ATTEMPTS="1")
    with server.client(people.alice) as alice:
        cid = create_conversation(alice, title="Release")
        start(alice, cid, [ask(kind="text", prompt="Release notes?", addressee="bob")])
        question = wait_pending(alice, cid)
    delivery = wait_until(
        lambda: Delivery.objects.filter(selection_id=question["id"], status="failed").first(),
        what="the delivery failed for good",
    )
    with server.client(people.bob) as bob:
        (failed,) = bob.get(deliveries_url(question["id"])).json()
    assert (failed["went"], failed["status"], failed["attempts"]) == ("Emailed Bob", "failed", 1)
    assert re.match(r"ConnectionRefusedError: \[Errno \d+\]", failed["reason"]), failed
    assert failed["status_text"] == f"failed: {failed['reason']}"

    # The mail server is back; the admin sends it again, under the same id.
    mailbox = Mailbox().start(port=port)
    try:
        admin = admin_of(server, people)
        done = run_admin_action(admin, "/admin/reach/delivery/", "send_again", [delivery.pk])
        assert message_after(admin, done) == "1 delivery will be sent again now."
        (message,) = mailbox.wait_for(1)
        assert message["To"] == "bob@example.com"
        assert delivery.pk in message["Message-ID"]
        again = sent(delivery.pk)
        assert again.attempts == 2
        tries = list(Attempt.objects.filter(delivery=again).values_list("number", "ok"))
        assert tries == [(1, False), (2, True)]
        # A delivery that did not fail is left as it is.
        done = run_admin_action(admin, "/admin/reach/delivery/", "send_again", [delivery.pk])
        assert message_after(admin, done) == (
            "0 deliveries will be sent again now. 1 delivery had not failed: left as they were."
        )
        assert len(mailbox.messages) == 1
    finally:
        mailbox.stop()
