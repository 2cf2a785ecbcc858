"""Webhooks, end to end: an owner adds an endpoint over REST, a real Daphne POSTs each question's
news to a real receiver on loopback that checks the Standard Webhooks signature, the answer comes
back through the REST API, and the same turn goes on. Retries keep their webhook-id, Retry-After
is heeded, 410 and repeated failures disable the endpoint, and only owners manage any of it."""

import json
from datetime import datetime

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from reach.models import Delivery, WebhookEndpoint, WorkspaceReach
from tests.conftest import wait_until
from tests.helpers import ask, create_conversation, finished, outcomes, reply, start, wait_pending
from tests.webhook_server import Receiver

pytestmark = pytest.mark.django_db(transaction=True)

ALL_TYPES = ["question.asked", "question.reminded", "question.escalated", "question.resolved"]
SHIP = ask(
    kind="choice",
    prompt="Which build ships?",
    options=[
        {"label": "Release candidate 2", "value": "rc2"},
        {"label": "Nightly", "value": "nightly"},
    ],
)


@pytest.fixture
def receiver():
    receiver = Receiver().start()
    yield receiver
    receiver.stop()


def add_endpoint(client, receiver: Receiver, **body) -> dict:
    """An endpoint for ``receiver`` made over REST; the receiver is given its secret."""
    response = client.post("/api/workspaces/team/webhooks/", json={"url": receiver.url, **body})
    assert response.status_code == 201, response.text
    created = response.json()
    receiver.secret = created["secret"]
    return created


def delivery_log(client, endpoint_id: str) -> list[dict]:
    response = client.get(f"/api/webhooks/{endpoint_id}/deliveries/")
    assert response.status_code == 200, response.text
    return response.json()["results"]


def settled(endpoint_id: str, count: int) -> list[Delivery]:
    """The endpoint's deliveries, once ``count`` of them are no longer pending."""
    return wait_until(
        lambda: (
            (
                done := list(
                    Delivery.objects.filter(endpoint_id=endpoint_id)
                    .exclude(status=Delivery.Status.PENDING)
                    .order_by("created_at")
                )
            )
            and len(done) >= count
            and done
        ),
        what=f"{count} deliveries to {endpoint_id} done",
    )


def test_a_question_reaches_the_receiver_signed_and_its_rest_answer_resolves_it(
    make_server, people, receiver
):
    server = make_server()
    alice, bob = server.client(people.alice), server.client(people.bob)
    created = add_endpoint(alice, receiver, description="Our team bot")
    secret = created["secret"]
    assert secret.startswith("whsec_") and len(Webhook(secret)._whsecret) >= 24
    assert created["event_types"] == ALL_TYPES and created["enabled"] is True
    # The secret is in the create answer only: never in a list or a read.
    listed = alice.get("/api/workspaces/team/webhooks/")
    assert listed.status_code == 200 and [e["id"] for e in listed.json()] == [created["id"]]
    read = alice.get(f"/api/webhooks/{created['id']}/")
    assert read.json()["url"] == receiver.url and read.json()["description"] == "Our team bot"
    for answer in (listed, read):
        assert "secret" not in answer.text and secret not in answer.text

    cid = create_conversation(alice, title="Release plan")
    start(alice, cid, [{"say": "Checking the builds."}, SHIP])
    pending = wait_pending(alice, cid)

    (asked,) = receiver.wait_for(1)
    assert asked.refusal == "" and asked.answered == 200
    assert asked.headers["content-type"] == "application/json"
    assert asked.id.startswith("dlv_")
    delivery = Delivery.objects.get(pk=asked.id)
    assert (delivery.cause, delivery.channel, delivery.endpoint_id) == (
        "asked",
        "webhook",
        created["id"],
    )
    event = asked.event
    assert event["type"] == "question.asked"
    assert datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00"))
    data = event["data"]
    assert data["selection"]["id"] == pending["id"]
    assert data["selection"]["prompt"] == "Which build ships?"
    assert data["selection"]["status"] == "pending"
    assert [o["value"] for o in data["selection"]["options"]] == ["rc2", "nightly"]
    assert data["conversation"] == {
        "id": cid,
        "title": "Release plan",
        "url": f"{server.url}/conversations/{cid}/#question-{pending['id']}",
    }
    assert data["workspace"] == {"id": "team", "name": "The Team"}
    assert data["asked_for"]["username"] == "alice"
    assert "Checking the builds." in data["input"]

    # The signature is real: another secret, or a changed body, fails verification.
    with pytest.raises(WebhookVerificationError):
        Webhook("whsec_" + "A" * 44).verify(asked.body, asked.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(asked.body.replace(b"rc2", b"rc3"), asked.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(asked.body, {**asked.headers, "webhook-id": "dlv_0000000000000000"})

    # The receiver's side answers through the REST API, as Bob.
    answered = reply(bob, pending["id"], answer="rc2")
    assert answered.status_code == 200, answered.text
    events = finished(alice, cid)
    assert outcomes(events) == [{"status": "answered", "value": "rc2", "by": "bob"}]

    (resolved,) = receiver.wait_for(1, event_type="question.resolved")
    assert resolved.refusal == "" and resolved.id != asked.id
    selection = resolved.event["data"]["selection"]
    assert (selection["id"], selection["status"], selection["answer"]) == (
        pending["id"],
        "answered",
        "rc2",
    )
    assert selection["answered_by"]["username"] == "bob"
    assert selection["answered_via"] == "api"

    # The delivery log: both, sent at their first attempt, with what the receiver said.
    settled(created["id"], 2)
    log = delivery_log(alice, created["id"])
    assert [(d["event_type"], d["status"], d["question"]) for d in log] == [
        ("question.resolved", "sent", pending["id"]),
        ("question.asked", "sent", pending["id"]),
    ]
    assert [d["id"] for d in log] == [resolved.id, asked.id]
    for entry in log:
        (attempt,) = entry["attempts"]
        assert attempt["ok"] is True and attempt["response"].startswith("200 OK")
        assert attempt["started_at"] and attempt["finished_at"] and entry["sent_at"]
        assert entry["next_attempt_at"] is None and entry["conversation"] == cid
    assert len(receiver.received) == 2
    # Nothing of the secret reached the server's log.
    assert secret not in server.log_text() and secret[6:] not in server.log_text()
