"""The outbox: deliveries are written with the question's event (none for a question rolled
back), sent at least once (a process killed mid-send leaves its delivery to the next, under the
same Message-ID, and nothing is sent twice to one address), retried with backoff after a refusal,
never sent to a person who lost access meanwhile, and counted in /metrics. Reminders and
escalations mail the people they name."""

import re
import signal

import pytest
from django.db import transaction
from django.utils import timezone

from conversations.models import Membership
from conversations.questions import new_selection_id
from conversations.services import turn_start
from reach.models import Attempt, Delivery, Preference
from selection.models import Selection
from selection.services import selection_request
from tests.conftest import kill, wait_until
from tests.helpers import ask, create_conversation, samples, start, wait_pending

pytestmark = pytest.mark.django_db(transaction=True)


def _everyone_hears_everything(people) -> None:
    for person in (people.alice, people.bob):
        Preference.objects.create(user=person.user, email="all")


def test_a_question_rolled_back_leaves_no_delivery_and_one_committed_leaves_its_own(
    people, conversation, settings
):
    settings.PARLEY_EMAIL_URL = "smtp://127.0.0.1:9"  # set up (nothing is sent here)
    _everyone_hears_everything(people)
    turn, _ = turn_start(conversation=conversation, user=people.alice.user, input="Plan")
    question = {
        "turn_id": turn.pk,
        "fields": {"kind": "confirm", "prompt": "Go?"},
        "timeout_seconds": 300,
        "process": turn.runner,
    }

    class RolledBack(Exception):
        pass

    with pytest.raises(RolledBack), transaction.atomic():
        selection_request(selection_id=new_selection_id(), ordinal=1, **question)
        assert Delivery.objects.count() == 2  # written in the same transaction ...
        raise RolledBack
    assert Delivery.objects.count() == 0  # ... and gone with it
    selection = selection_request(selection_id=new_selection_id(), ordinal=2, **question)
    assert sorted(Delivery.objects.values_list("address", "cause", "selection_id")) == [
        ("alice@example.com", "asked", selection.pk),
        ("bob@example.com", "asked", selection.pk),
    ]


def test_a_process_killed_mid_send_leaves_it_to_the_next_and_nobody_gets_it_twice(
    make_server, people, mailbox
):
    _everyone_hears_everything(people)
    env = {"PARLEY_EMAIL_URL": mailbox.url, "PARLEY_DELIVERY_CLAIM_SECONDS": "2"}
    first = make_server(**env)
    alice = first.client(people.alice)
    cid = create_conversation(alice)
    # Bob's message is held by the SMTP server before it is accepted; Alice's goes through.
    mailbox.hold_to = "bob@example.com"
    start(alice, cid, [ask(kind="confirm", prompt="Ship it?")])
    question = wait_pending(alice, cid)
    assert mailbox.holding.wait(30)
    wait_until(
        lambda: Delivery.objects.filter(address="alice@example.com", status="sent").exists(),
        what="Alice's email recorded as sent",
    )
    kill(first)
    mailbox.release.set()  # the sender is gone: its message was never handed over
    wait_until(lambda: mailbox.refused, what="the SMTP server to drop the dead sender's message")

    second = make_server(**env)
    (bob_delivery,) = Delivery.objects.filter(address="bob@example.com")
    wait_until(
        lambda: Delivery.objects.get(pk=bob_delivery.pk).status == "sent",
        what="Bob's email sent by the new process",
    )
    messages = mailbox.wait_for(2)
    assert sorted(m["To"] for m in messages) == ["alice@example.com", "bob@example.com"]
    (to_bob,) = mailbox.to("bob@example.com")
    assert to_bob["Message-ID"].startswith(f"<{bob_delivery.pk}@")
    # Two attempts: the first never finished (its process died), the second by the new one.
    attempts = list(Attempt.objects.filter(delivery_id=bob_delivery.pk).order_by("number"))
    assert [(a.number, a.finished_at is None, a.ok) for a in attempts] == [
        (1, True, False),
        (2, False, True),
    ]
    assert attempts[0].process != attempts[1].process
    assert Delivery.objects.get(address="alice@example.com").attempts == 1
    assert Selection.objects.get(pk=question["id"]).status == "pending"
    second.client(people.alice).close()


def test_a_refused_send_is_retried_but_never_reaches_someone_who_lost_access(
    make_server, people, mailbox
):
    _everyone_hears_everything(people)
    # Every message to Bob is refused for now (451: try later); Alice's go through.
    mailbox.refuse_to = "bob@example.com"
    server = make_server(PARLEY_EMAIL_URL=mailbox.url, PARLEY_DELIVERY_BACKOFF_SECONDS="1")
    alice = server.client(people.alice)
    cid = create_conversation(alice)
    start(alice, cid, [ask(kind="confirm", prompt="Ship it?")])
    wait_pending(alice, cid)
    wait_until(
        lambda: Delivery.objects.filter(address="bob@example.com", attempts__gte=2).exists(),
        what="Bob's delivery tried again after the refusal",
    )
    bob_delivery = Delivery.objects.get(address="bob@example.com")
    assert bob_delivery.status == "pending" and bob_delivery.reason.startswith("451")
    Membership.objects.filter(user=people.bob.user).delete()
    # The server goes on refusing Bob: a send already past its access check when he was removed
    # (a loaded machine makes that likely) is refused, not delivered, so what drops the delivery
    # is the next try's check, and only it. Its next try comes at its time, which the doubling
    # backoff may have put seconds away (the test may see the second attempt late): wait for it.
    # (A try in flight now is recorded with the next backoff, 2**attempts seconds at most.)
    now = Delivery.objects.get(pk=bob_delivery.pk)
    wait = max(0.0, (now.next_attempt_at - timezone.now()).total_seconds()) + 2**now.attempts
    wait_until(
        lambda: Delivery.objects.get(pk=bob_delivery.pk).status == "skipped",
        timeout=30 + wait,
        what="Bob's delivery dropped",
    )
    assert Delivery.objects.get(pk=bob_delivery.pk).reason == "Bob may no longer answer it."
    assert [m["To"] for m in mailbox.messages] == ["alice@example.com"]


def test_reminders_and_escalations_mail_the_people_they_name(make_server, people, mailbox):
    server = make_server(
        PARLEY_EMAIL_URL=mailbox.url,
        PARLEY_REMIND_AFTER="0.2",
        PARLEY_ESCALATE_AFTER="0.4",
        PARLEY_TURN_LEASE_SECONDS="3",
    )
    bob = server.client(people.bob)
    cid = create_conversation(bob)
    start(
        bob,
        cid,
        [ask(kind="text", prompt="Release notes?", addressee="bob", timeout=8, escalate=True)],
    )
    wait_pending(bob, cid)
    messages = mailbox.wait_for(3)
    # (Django folds a long encoded subject from its first line; mail programs unfold it.)
    said = [(m["To"], m["Subject"].strip()) for m in messages]
    assert said == [
        ("bob@example.com", "A question for you in “Questions”"),
        ("bob@example.com", "Reminder: a question waits for you in “Questions”"),
        ("alice@example.com", "Nobody has answered yet in “Questions”"),
    ]
    # Alice, the owner it is escalated to, gets her own link, signed for her.
    link = re.search(r"/answer/\S+", messages[2].get_body(("plain",)).get_content()).group(0)
    assert link != re.search(r"/answer/\S+", messages[0].get_body(("plain",)).get_content()).group(
        0
    )


def test_deliveries_are_counted_in_metrics(make_server, people, mailbox):
    server = make_server(PARLEY_EMAIL_URL=mailbox.url)
    bob = server.client(people.bob)
    cid = create_conversation(bob)
    start(bob, cid, [ask(kind="confirm", prompt="Ok?", addressee="bob")])
    wait_pending(bob, cid)
    mailbox.wait_for(1)
    wait_until(lambda: Delivery.objects.filter(status="sent").exists(), what="the delivery")
    scraped = samples(server.client().get("/metrics").text)
    assert scraped[("parley_deliveries_total", (("channel", "email"), ("outcome", "sent")))] == 1
    assert scraped[("parley_delivery_attempts_total", (("channel", "email"), ("ok", "true")))] == 1
    assert scraped[("parley_outbox_deliveries", (("channel", "email"), ("status", "sent")))] == 1
    assert scraped[("parley_outbox_deliveries", (("channel", "email"), ("status", "pending")))] == 0


def test_a_process_stopped_mid_send_finishes_it_and_it_is_never_sent_again(
    make_server, people, mailbox
):
    _everyone_hears_everything(people)
    server = make_server(PARLEY_EMAIL_URL=mailbox.url, PARLEY_DELIVERY_CLAIM_SECONDS="2")
    alice = server.client(people.alice)
    cid = create_conversation(alice)
    mailbox.hold_to = "bob@example.com"
    start(alice, cid, [ask(kind="confirm", prompt="Ship it?")])
    wait_pending(alice, cid)
    assert mailbox.holding.wait(30)
    # A deploy stops the process while Bob's email is on its way: it waits for that send.
    server.process.send_signal(signal.SIGTERM)
    mailbox.release.set()
    assert server.process.wait(timeout=60) == 0
    (bob_delivery,) = Delivery.objects.filter(address="bob@example.com")
    assert (bob_delivery.status, bob_delivery.attempts) == ("sent", 1)
    assert sorted(m["To"] for m in mailbox.messages) == ["alice@example.com", "bob@example.com"]
    assert not mailbox.refused
