"""Webhooks, end to end: an owner adds an endpoint over REST, a real Daphne POSTs each question's
news to a real receiver on loopback that checks the Standard Webhooks signature, the answer comes
back through the REST API, and the same turn goes on. Retries keep their webhook-id, Retry-After
is heeded, 410 and repeated failures disable the endpoint, and only owners manage any of it."""

import os
import queue
import re
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

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


def test_a_failing_delivery_is_retried_under_the_same_id_and_retry_after_is_heeded(
    make_server, people, receiver
):
    server = make_server(PARLEY_DELIVERY_BACKOFF_SECONDS="0.2", PARLEY_DELIVERY_POLL_SECONDS="0.1")
    alice, bob = server.client(people.alice), server.client(people.bob)
    created = add_endpoint(alice, receiver)
    # 500, then 429 asking for 2 s (the backoff would be 0.4 s), then 200.
    receiver.answers = [500, (429, {"Retry-After": "2"})]
    cid = create_conversation(alice)
    start(alice, cid, [ask(kind="confirm", prompt="Deploy?")])
    pending = wait_pending(alice, cid)

    tries = receiver.wait_for(3)
    assert [t.answered for t in tries] == [500, 429, 200]
    # The same delivery each time: one webhook-id, one body, each try signed anew.
    assert len({t.id for t in tries}) == 1 and len({t.body for t in tries}) == 1
    assert all(t.refusal == "" and t.type == "question.asked" for t in tries)
    (delivery,) = settled(created["id"], 1)
    assert delivery.status == "sent" and delivery.attempts == 3
    (entry,) = delivery_log(alice, created["id"])
    assert entry["id"] == tries[0].id and entry["status"] == "sent"
    attempts = entry["attempts"]
    assert [(a["number"], a["ok"]) for a in attempts] == [(1, False), (2, False), (3, True)]
    assert attempts[0]["response"].startswith("500 Internal Server Error")
    assert attempts[1]["response"].startswith("429 Too Many Requests")
    assert attempts[2]["response"].startswith("200 OK")

    def moment(text):
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    waited = moment(attempts[2]["started_at"]) - moment(attempts[1]["finished_at"])
    assert waited.total_seconds() >= 1.9, waited

    # Answered now: the outcome arrives next, and the question's news was sent once.
    assert reply(bob, pending["id"], answer=True).status_code == 200
    receiver.wait_for(1, event_type="question.resolved")
    assert [t.id for t in receiver.of_type("question.asked")] == [tries[0].id] * 3
    assert len(receiver.received) == 4


def test_an_endpoint_failing_for_good_in_a_row_is_disabled_and_enabled_again(
    make_server, people, receiver
):
    server = make_server(
        PARLEY_DELIVERY_ATTEMPTS="1",
        PARLEY_WEBHOOK_DISABLE_AFTER="2",
        PARLEY_DELIVERY_BACKOFF_SECONDS="0.1",
    )
    alice, bob = server.client(people.alice), server.client(people.bob)
    created = add_endpoint(alice, receiver)
    receiver.answers = [500, 502]
    cid = create_conversation(alice)
    start(alice, cid, [ask(kind="confirm", prompt="First?"), ask(kind="confirm", prompt="Second?")])
    first = wait_pending(alice, cid)

    # One attempt each (PARLEY_DELIVERY_ATTEMPTS=1): the question fails for good ...
    (asked,) = settled(created["id"], 1)
    assert asked.status == "failed" and asked.reason.startswith("500")
    endpoint = alice.get(f"/api/webhooks/{created['id']}/").json()
    assert (endpoint["enabled"], endpoint["failures_in_a_row"]) == (True, 1)
    # ... and so does its outcome: two in a row, and the endpoint is disabled, saying why.
    assert reply(bob, first["id"], answer=True).status_code == 200
    settled(created["id"], 2)
    endpoint = alice.get(f"/api/webhooks/{created['id']}/").json()
    assert endpoint["enabled"] is False and endpoint["failures_in_a_row"] == 2
    assert endpoint["disabled_reason"] == "Disabled after 2 deliveries in a row failed for good."
    # The next question is not sent to it (asked before the endpoint was disabled, its
    # delivery is skipped; after, none is made).
    second = wait_until(
        lambda: (p := wait_pending(alice, cid))["id"] != first["id"] and p, what="the second"
    )
    wait_until(
        lambda: not Delivery.objects.filter(selection_id=second["id"], status="pending").exists(),
        what="the second question's delivery skipped",
    )
    assert {d.status for d in Delivery.objects.filter(selection_id=second["id"])} <= {"skipped"}
    assert len(receiver.received) == 2

    # An owner enables it again: its failures and the reason are cleared, and it works.
    enabled = alice.patch(f"/api/webhooks/{created['id']}/", json={"enabled": True})
    assert enabled.status_code == 200, enabled.text
    assert (enabled.json()["enabled"], enabled.json()["failures_in_a_row"]) == (True, 0)
    assert enabled.json()["disabled_reason"] == ""
    assert reply(bob, second["id"], answer=False).status_code == 200
    failed, resolved = receiver.wait_for(2, event_type="question.resolved")
    assert (failed.answered, resolved.answered) == (502, 200)
    assert resolved.event["data"]["selection"]["id"] == second["id"]
    finished(alice, cid)


def test_a_410_ends_the_delivery_and_disables_the_endpoint(make_server, people, receiver):
    server = make_server()
    alice = server.client(people.alice)
    created = add_endpoint(alice, receiver)
    receiver.answers = [410]
    cid = create_conversation(alice)
    start(alice, cid, [ask(kind="confirm", prompt="Anyone?")])
    wait_pending(alice, cid)
    (delivery,) = settled(created["id"], 1)
    assert delivery.status == "failed" and delivery.attempts == 1
    endpoint = alice.get(f"/api/webhooks/{created['id']}/").json()
    assert endpoint["enabled"] is False
    assert endpoint["disabled_reason"].startswith("Disabled: it answered 410 Gone")
    assert len(receiver.received) == 1


def test_a_delivery_waiting_for_a_retry_is_skipped_once_its_endpoint_is_disabled(
    make_server, people, receiver
):
    server = make_server(PARLEY_DELIVERY_BACKOFF_SECONDS="1", PARLEY_DELIVERY_POLL_SECONDS="0.1")
    alice = server.client(people.alice)
    created = add_endpoint(alice, receiver)
    receiver.answers = [503]  # no Retry-After: the backoff
    cid = create_conversation(alice)
    start(alice, cid, [ask(kind="confirm", prompt="Anyone?")])
    wait_pending(alice, cid)
    receiver.wait_for(1)
    disabled = alice.patch(f"/api/webhooks/{created['id']}/", json={"enabled": False})
    assert (
        disabled.status_code == 200 and disabled.json()["disabled_reason"] == "Disabled by Alice."
    )
    (delivery,) = settled(created["id"], 1)
    assert delivery.status == "skipped"
    assert delivery.reason == "The webhook endpoint is disabled: Disabled by Alice."
    assert len(receiver.received) == 1
    (entry,) = delivery_log(alice, created["id"])
    assert entry["status"] == "skipped" and len(entry["attempts"]) == 1


def test_an_endpoint_refuses_to_post_to_a_url_that_is_not_http(make_server, people, receiver):
    # Made over REST only http(s) is taken; one changed behind its back is refused when sent.
    server = make_server()
    alice = server.client(people.alice)
    created = add_endpoint(alice, receiver)
    WebhookEndpoint.objects.filter(pk=created["id"]).update(url="file:///etc/passwd")
    cid = create_conversation(alice)
    start(alice, cid, [ask(kind="confirm", prompt="Anyone?")])
    wait_pending(alice, cid)
    (delivery,) = settled(created["id"], 1)
    assert delivery.status == "failed" and delivery.attempts == 1
    assert delivery.reason == "Refused: a webhook's URL must be http or https."
    assert receiver.received == []


def test_webhooks_go_to_public_addresses_only_unless_the_operator_lets_them_in(
    make_server, people, receiver
):
    # The receiver listens on loopback, as a service inside the network would.
    server = make_server(PARLEY_WEBHOOK_PRIVATE_ADDRESSES="0")
    alice = server.client(people.alice)
    for url in ("http://127.0.0.1:9/hook", "http://[::1]/hook", "http://169.254.169.254/latest"):
        refused = alice.post("/api/workspaces/team/webhooks/", json={"url": url})
        assert refused.status_code == 400, refused.text
        assert "is not a public address" in refused.json()["error"]["message"]
    assert not WebhookEndpoint.objects.exists()
    # A name is checked when something is sent: one that resolves inside is refused then, for
    # good, and nothing reaches the receiver (nor does the test event).
    named = receiver.url.replace("127.0.0.1", "localhost")
    created = alice.post("/api/workspaces/team/webhooks/", json={"url": named})
    assert created.status_code == 201, created.text
    receiver.secret = created.json()["secret"]
    test = alice.post(f"/api/webhooks/{created.json()['id']}/test/").json()
    assert test["ok"] is False and "which is not a public address" in test["response"]
    cid = create_conversation(alice)
    start(alice, cid, [ask(kind="confirm", prompt="Anyone?")])
    wait_pending(alice, cid)
    (delivery,) = settled(created.json()["id"], 1)
    assert delivery.status == "failed" and delivery.attempts == 1
    assert delivery.reason.startswith("Refused: localhost resolves to ")
    assert receiver.received == []
    # The operator lets them in: the same endpoint is reached.
    inside = make_server(PARLEY_WEBHOOK_PRIVATE_ADDRESSES="1")
    test = inside.client(people.alice).post(f"/api/webhooks/{created.json()['id']}/test/")
    assert test.json()["ok"] is True
    assert [event.type for event in receiver.received] == ["webhook.test"]


def test_a_test_event_is_signed_and_says_how_it_went(make_server, people, receiver):
    server = make_server()
    alice = server.client(people.alice)
    created = add_endpoint(alice, receiver)
    sent = alice.post(f"/api/webhooks/{created['id']}/test/")
    assert sent.status_code == 200, sent.text
    assert sent.json()["ok"] is True and sent.json()["response"].startswith("200 OK")
    (test,) = receiver.received
    assert test.refusal == "" and test.type == "webhook.test"
    assert test.event["data"]["endpoint"] == created["id"]
    receiver.answers = [500]
    failed = alice.post(f"/api/webhooks/{created['id']}/test/").json()
    assert failed["ok"] is False and failed["response"].startswith("500")
    # Not in the delivery log (it is no question's news).
    assert delivery_log(alice, created["id"]) == []


def test_a_reminder_and_an_escalation_name_whom_they_call_on(make_server, people, receiver):
    # Upkeep every second; reminded at a fifth of the question's time, escalated at half.
    server = make_server(
        PARLEY_TURN_LEASE_SECONDS="3", PARLEY_REMIND_AFTER="0.2", PARLEY_ESCALATE_AFTER="0.5"
    )
    alice = server.client(people.alice)
    created = add_endpoint(alice, receiver, event_types=["question.reminded", "question.escalated"])
    cid = create_conversation(alice)
    start(
        alice,
        cid,
        [ask(kind="text", prompt="Which budget?", addressee="bob", timeout=8, escalate=True)],
    )
    pending = wait_pending(alice, cid)
    reminded, escalated = receiver.wait_for(2)
    assert (reminded.type, escalated.type) == ("question.reminded", "question.escalated")
    for news in (reminded, escalated):
        assert news.refusal == "" and news.event["data"]["selection"]["id"] == pending["id"]
    assert [p["username"] for p in reminded.event["data"]["to"]] == ["bob"]
    assert [p["username"] for p in escalated.event["data"]["to"]] == ["alice"]
    assert escalated.event["data"]["selection"]["escalated_at"] is not None
    assert reply(alice, pending["id"], answer="Q3").status_code == 200
    finished(alice, cid)
    # It chose neither the question nor its outcome: nothing else came.
    assert not Delivery.objects.filter(endpoint_id=created["id"], cause__in=["asked", "settled"])
    assert len(receiver.received) == 2


# Who may, and what is refused -------------------------------------------------------------------


def _endpoint_rows() -> list[tuple]:
    return list(
        WebhookEndpoint.objects.order_by("pk").values_list(
            "pk", "url", "description", "event_types", "enabled", "secret"
        )
    )


def test_only_owners_manage_webhooks_and_channels(server, people):
    alice = server.client(people.alice)
    created = alice.post(
        "/api/workspaces/team/webhooks/", json={"url": "https://example.com/hook"}
    ).json()
    hook = f"/api/webhooks/{created['id']}"
    before = _endpoint_rows()
    calls = [
        ("get", "/api/workspaces/team/webhooks/", None),
        ("post", "/api/workspaces/team/webhooks/", {"url": "https://example.com/other"}),
        ("get", f"{hook}/", None),
        ("patch", f"{hook}/", {"enabled": False}),
        ("delete", f"{hook}/", None),
        ("get", f"{hook}/deliveries/", None),
        ("post", f"{hook}/test/", None),
        ("get", "/api/workspaces/team/channels/", None),
        ("put", "/api/workspaces/team/channels/", {"slack_channel": "C0123ABC"}),
    ]
    for who, status, code in (
        ("bob", 403, "forbidden"),
        ("carol", 403, "forbidden"),
        ("dave", 404, "not_found"),
        (None, 401, "not_authenticated"),
    ):
        client = server.client(getattr(people, who) if who else None)
        for method, path, body in calls:
            kwargs = {"json": body} if body is not None else {}
            response = client.request(method.upper(), path, **kwargs)
            assert response.status_code == status, (who, method, path, response.text)
            assert response.json()["error"]["code"] == code, (who, path)
            assert "example.com" not in response.text and created["secret"] not in response.text
    assert _endpoint_rows() == before
    assert not WorkspaceReach.objects.exists()
    # Dave owns another workspace: he sees its endpoints, not the team's.
    dave = server.client(people.dave)
    assert dave.get("/api/workspaces/other/webhooks/").json() == []
    # An owner removed from the workspace loses it at once.
    people.workspace.memberships.filter(user=people.alice.user).delete()
    assert alice.get(f"{hook}/").status_code == 404
    assert alice.get("/api/workspaces/team/webhooks/").status_code == 404


@pytest.mark.parametrize(
    "body, says",
    [
        ({}, "url: This field is required."),
        ({"url": "ftp://example.com/hook"}, "url: must be an http or https URL"),
        ({"url": "javascript:alert(1)"}, "url: must be an http or https URL"),
        ({"url": "http://"}, "url: must be an http or https URL"),
        ({"url": "example.com/hook"}, "url: must be an http or https URL"),
        ({"url": "https://example.com/a b"}, "url: may not contain spaces."),
        ({"url": "https://me:pw@example.com/"}, "url: may not hold a user name or password."),
        ({"url": "https://example.com:99999/"}, "url: not a URL."),
        ({"url": "https://example.com/" + "a" * 2000}, "url: at most 2000 characters."),
        ({"url": 42}, "url: must be a string."),
        ({"url": "https://example.com/", "event_types": ["question.nope"]}, "event_types.0"),
        ({"url": "https://example.com/", "event_types": []}, "event_types: a list of one or more"),
        ({"url": "https://example.com/", "event_types": "question.asked"}, "event_types"),
        ({"url": "https://example.com/", "description": "x" * 201}, "description: at most 200"),
        ({"url": "https://example.com/", "secret": "whsec_mine"}, "secret: not known here"),
    ],
)
def test_bad_endpoint_input_is_400_and_stores_nothing(server, people, body, says):
    alice = server.client(people.alice)
    response = alice.post("/api/workspaces/team/webhooks/", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid"
    assert says in response.json()["error"]["message"], response.json()
    assert not WebhookEndpoint.objects.exists()


def test_bad_changes_are_400_and_change_nothing(server, people):
    alice = server.client(people.alice)
    created = alice.post(
        "/api/workspaces/team/webhooks/",
        json={"url": "https://example.com/hook", "event_types": ["question.asked"]},
    ).json()
    before = _endpoint_rows()
    for body in (
        {"url": "ftp://example.com/"},
        {"event_types": ["question.asked", "question.nope"]},
        {"enabled": "false"},
        {"enabled": False, "url": "nope"},
        {"secret": "whsec_mine"},
        {"failures_in_a_row": 0},
    ):
        response = alice.patch(f"/api/webhooks/{created['id']}/", json=body)
        assert response.status_code == 400, (body, response.text)
        assert response.json()["error"]["code"] == "invalid"
    assert _endpoint_rows() == before
    # A good change: the event types kept in their order, whatever order they came in.
    changed = alice.patch(
        f"/api/webhooks/{created['id']}/",
        json={"event_types": ["question.resolved", "question.asked"], "description": "Bot"},
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["event_types"] == ["question.asked", "question.resolved"]
    assert changed.json()["description"] == "Bot" and "secret" not in changed.json()
    assert alice.delete(f"/api/webhooks/{created['id']}/").status_code == 204
    assert alice.get(f"/api/webhooks/{created['id']}/").status_code == 404
    assert not WebhookEndpoint.objects.exists()


def test_owners_read_and_set_the_workspace_s_slack_channel(server, people):
    alice = server.client(people.alice)
    channels = "/api/workspaces/team/channels/"
    assert alice.get(channels).json() == {"slack_channel": "", "slack_set_up": False}
    for bad in ("#general", "c0123abc", "C01", 123, None, "C0123ABC C0123ABD"):
        response = alice.put(channels, json={"slack_channel": bad})
        assert response.status_code == 400, (bad, response.text)
        assert response.json()["error"]["code"] == "invalid"
    assert alice.put(channels, json={}).status_code == 400
    assert alice.put(channels, json={"slack_channel": "C0123ABC", "x": 1}).status_code == 400
    assert not WorkspaceReach.objects.exists()
    put = alice.put(channels, json={"slack_channel": "C0123ABC"})
    assert put.status_code == 200 and put.json()["slack_channel"] == "C0123ABC"
    assert alice.get(channels).json()["slack_channel"] == "C0123ABC"
    assert WorkspaceReach.objects.get(workspace=people.workspace).slack_channel == "C0123ABC"
    assert alice.put(channels, json={"slack_channel": ""}).json()["slack_channel"] == ""


# README's receiver ------------------------------------------------------------------------------

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_receiver() -> str:
    """The Python of README's example receiver, exactly as README shows it."""
    text = README.read_text()
    block = text.split("<!-- webhook-receiver:", 1)[1].split("<!-- /webhook-receiver -->", 1)[0]
    return block.split("```python\n", 1)[1].split("```", 1)[0]


class Lines:
    """A process's output, line by line, read in a thread (so a wait is bounded)."""

    def __init__(self, process: subprocess.Popen):
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(process.stdout,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.put(line.rstrip("\n"))

    def next_matching(self, pattern: str, timeout: float = 30) -> re.Match:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            self.seen.append(line)
            if found := re.fullmatch(pattern, line):
                return found
        raise AssertionError(f"no line like {pattern!r} in {timeout} s; it said {self.seen}")


def test_the_readme_s_example_receiver_answers_a_question_and_the_turn_goes_on(
    make_server, people, tmp_path
):
    server = make_server()
    alice = server.client(people.alice)
    # Made first for its secret, then pointed at the receiver once it listens.
    created = alice.post(
        "/api/workspaces/team/webhooks/", json={"url": "http://127.0.0.1:9/"}
    ).json()
    script = tmp_path / "receiver.py"
    script.write_text(readme_receiver())
    receiver = subprocess.Popen(
        [sys.executable, str(script)],
        env={
            **os.environ,
            "PARLEY_URL": server.url,
            "PARLEY_TOKEN": people.bob.token,
            "PARLEY_WEBHOOK_SECRET": created["secret"],
            "PORT": "0",  # a free port, which it says
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        output = Lines(receiver)
        port = output.next_matching(r"listening on port (\d+)").group(1)
        moved = alice.patch(
            f"/api/webhooks/{created['id']}/", json={"url": f"http://127.0.0.1:{port}/"}
        )
        assert moved.status_code == 200, moved.text

        cid = create_conversation(alice, title="Release plan")
        start(alice, cid, [ask(kind="confirm", prompt="Deploy on Friday?")])
        pending = wait_pending(alice, cid)
        output.next_matching(rf"question\.asked {pending['id']} Deploy on Friday\?")
        # It answered, as Bob, over REST: the same turn goes on with his answer.
        events = finished(alice, cid)
        assert outcomes(events) == [{"status": "answered", "value": True, "by": "bob"}]
        output.next_matching(rf"question\.resolved {pending['id']} Deploy on Friday\?")
        answered = alice.get(f"/api/selections/{pending['id']}/").json()
        assert answered["answered_via"] == "api"
        settled(created["id"], 2)
        (asked, resolved) = reversed(delivery_log(alice, created["id"]))
        assert (asked["status"], resolved["status"]) == ("sent", "sent")
        assert asked["attempts"][0]["response"] == "204 No Content"
    finally:
        receiver.terminate()
        receiver.wait(timeout=10)
