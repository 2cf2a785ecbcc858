"""The outbox on two processes (PostgreSQL, Redis): every delivery of many questions asked at
once on both is sent exactly once, claimed by one process or the other (SKIP LOCKED), never
both."""

from collections import Counter

from reach.models import Attempt, Delivery, Preference
from tests.conftest import wait_until
from tests.helpers import ask, create_conversation, start, wait_pending

QUESTIONS = 40


def test_many_questions_on_two_processes_are_each_mailed_once(make_node, people, mailbox):
    for person in (people.alice, people.bob):
        Preference.objects.create(user=person.user, email="all")
    env = {"PARLEY_EMAIL_URL": mailbox.url, "PARLEY_DELIVERY_POLL_SECONDS": "0.5"}
    nodes = [make_node(**env), make_node(**env)]
    clients = [node.client(people.alice) for node in nodes]
    conversations = []
    for n in range(QUESTIONS):
        client = clients[n % 2]
        cid = create_conversation(client, title=f"Q{n}")
        start(client, cid, [ask(kind="confirm", prompt=f"Question {n}?")])
        conversations.append((client, cid))
    for client, cid in conversations:
        wait_pending(client, cid, timeout=60)

    expected = 2 * QUESTIONS
    wait_until(
        lambda: Delivery.objects.filter(status="sent").count() == expected,
        timeout=120,
        what=f"{expected} deliveries sent",
    )
    messages = mailbox.wait_for(expected)
    ids = Counter(message["Message-ID"] for message in messages)
    assert len(ids) == expected and set(ids.values()) == {1}
    assert len(mailbox.messages) == expected
    assert set(Delivery.objects.values_list("attempts", flat=True)) == {1}
    assert Attempt.objects.count() == expected
    # Both processes sent their share (each is nudged by what it commits).
    assert len(set(Attempt.objects.values_list("process", flat=True))) == 2
    for client in clients:
        client.close()
