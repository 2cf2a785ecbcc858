"""Questions by email, end to end: a real Daphne sends through a real SMTP server (aiosmtpd); the
answer link in what arrives opens the question (answering nothing), a POST with it answers, and
the same turn goes on. Links are for one person and one question, and refuse everyone else."""

import re

import httpx
import pytest

from selection.models import Selection
from tests.conftest import log_in, wait_until
from tests.helpers import ask, create_conversation, finished, outcomes, start, wait_pending

pytestmark = pytest.mark.django_db(transaction=True)

LINK = re.compile(r"(http://127\.0\.0\.1:\d+/answer/[^/\s]+/#k=[^\s\"<]+)")


@pytest.fixture
def mailing_server(make_server, mailbox):
    return make_server(PARLEY_EMAIL_URL=mailbox.url, PARLEY_EMAIL_FROM="Parley <team@parley.test>")


def _text(message) -> str:
    return message.get_body(preferencelist=("plain",)).get_content()


def _link(message) -> str:
    return LINK.search(_text(message)).group(1)


def _opened(link: str, client: httpx.Client | None = None, token: str | None = None):
    """What the link's page asks the API for, as its script does (the page itself is the same
    for everyone: the signature is in the fragment, which a browser never sends)."""
    page, _, fragment = link.partition("#k=")
    base, _, selection = page.rstrip("/").partition("/answer/")
    client = client or httpx.Client(timeout=20)
    return client.get(
        f"{base}/api/selections/{selection}/link/",
        headers={"X-Parley-Link": fragment if token is None else token},
    )


def test_a_question_for_bob_is_emailed_to_him_and_answered_from_its_link(
    mailing_server, people, mailbox
):
    server = mailing_server
    alice = server.client(people.alice)
    cid = create_conversation(alice, title="Release plan")
    question = ask(
        kind="choice",
        prompt="Which build ships?",
        options=[
            {"label": "Release candidate 2", "value": "rc2", "description": "Tested on Friday"},
            {"label": "Nightly", "value": "nightly"},
        ],
        addressee="bob",
    )
    start(alice, cid, [{"say": "Checking the builds."}, question])
    pending = wait_pending(alice, cid)

    (message,) = mailbox.wait_for(1)
    assert message["To"] == "bob@example.com"
    assert message["From"] == "Parley <team@parley.test>"
    assert message["Subject"] == "A question for you in “Release plan”"
    # The delivery's id is the Message-ID (its idempotency key).
    assert re.fullmatch(r"<dlv_[0-9a-f]{16}@127\.0\.0\.1>", message["Message-ID"])
    text = _text(message)
    assert "Which build ships?" in text
    assert "- Release candidate 2: Tested on Friday" in text and "- Nightly" in text
    assert "Asked by the agent, in Alice’s turn, for Bob." in text
    assert "Which build ships?" in text and '"say": "Checking the builds."' in text  # the input
    assert "It expires at " in text and "(UTC)" in text
    html = message.get_body(preferencelist=("html",)).get_content()
    link = _link(message)
    assert f'href="{link.replace("&", "&amp;")}"' in html
    # Nobody else was mailed: the question is Bob's (Alice, its owner, keeps the default).
    assert [m["To"] for m in mailbox.messages] == ["bob@example.com"]

    # Opening the link (as a mail scanner would) answers nothing: the page, then what its
    # script reads with the link.
    anonymous = httpx.Client(timeout=20)
    page = anonymous.get(link)
    assert page.status_code == 200, page.text
    assert page.headers["Cache-Control"] == "no-store"
    assert page.headers["Referrer-Policy"] == "no-referrer"
    shown = _opened(link, anonymous)
    assert shown.status_code == 200, shown.text
    shown = shown.json()
    assert shown["selection"]["id"] == pending["id"]
    assert shown["selection"]["status"] == "pending"
    assert shown["me"]["username"] == "bob" and shown["role"] == "member"
    assert shown["conversation"] == {"id": cid, "title": "Release plan"}
    assert shown["started_by"]["username"] == "alice"
    assert '"say": "Checking the builds."' in shown["input"]
    assert Selection.objects.get(pk=pending["id"]).status == "pending"

    # The link signs Bob in for this question only: it reads and answers it ...
    token = link.split("#k=")[1]
    headers = {"X-Parley-Link": token}
    read = anonymous.get(f"{server.url}/api/selections/{pending['id']}/", headers=headers)
    assert read.status_code == 200 and read.json()["prompt"] == "Which build ships?"
    # ... and nothing else of Parley.
    for path in ("/api/workspaces/", f"/api/conversations/{cid}/events/", "/api/waiting/"):
        assert anonymous.get(f"{server.url}{path}", headers=headers).status_code == 401
    answered = anonymous.post(
        f"{server.url}/api/selections/{pending['id']}/reply/",
        headers=headers,
        json={"answer": "rc2"},
    )
    assert answered.status_code == 200, answered.text
    assert answered.json()["answered_by"]["username"] == "bob"
    assert answered.json()["answered_via"] == "link"

    # The same turn goes on with Bob's answer.
    events = finished(alice, cid)
    assert outcomes(events) == [{"status": "answered", "value": "rc2", "by": "bob"}]
    (resolved,) = [e for e in events if e["type"] == "selection.resolved"]
    assert resolved["data"]["answered_via"] == "link"

    # Opened again, the link shows who settled it and how; a second answer changes nothing.
    settled = _opened(link, anonymous).json()["selection"]
    assert (settled["status"], settled["answer"], settled["answered_by"]["username"]) == (
        "answered",
        "rc2",
        "bob",
    )
    again = anonymous.post(
        f"{server.url}/api/selections/{pending['id']}/reply/",
        headers=headers,
        json={"answer": "nightly"},
    )
    assert again.status_code == 409
    assert Selection.objects.get(pk=pending["id"]).answer == "rc2"
    # The link's signature never reached the server's log (Daphne writes every request there).
    assert f"/answer/{pending['id']}/" in server.log_text()
    assert token not in server.log_text()


def test_a_link_refuses_anyone_but_its_person_and_any_other_question(
    mailing_server, people, mailbox
):
    server = mailing_server
    alice = server.client(people.alice)
    cid = create_conversation(alice)
    start(alice, cid, [ask(kind="confirm", prompt="Deploy?", addressee="bob"), ask(kind="text")])
    first = wait_pending(alice, cid)
    link = _link(mailbox.wait_for(1)[0])
    token = link.split("#k=")[1]
    anonymous = httpx.Client(timeout=20)
    reply_url = f"{server.url}/api/selections/{first['id']}/reply/"

    # A tampered link: refused, counted as a failed sign-in, nothing changes.
    forged = anonymous.post(
        reply_url, headers={"X-Parley-Link": token[:-2] + "xx"}, json={"answer": True}
    )
    assert forged.status_code == 401
    assert forged.json()["error"]["code"] == "authentication_failed"
    damaged = _opened(link, anonymous, token=token[:-2] + "xx")
    assert damaged.status_code == 401 and "This link is not valid" in damaged.text

    # Carol, signed in to Parley in this browser, opens Bob's link: refused, as is its POST.
    carol = log_in(server, "carol")
    shown = _opened(link, carol)
    assert shown.status_code == 403 and "This link is for Bob" in shown.json()["error"]["message"]
    assert "Deploy?" not in shown.text
    carol_posts = carol.post(
        reply_url,
        headers={"X-Parley-Link": token, "X-CSRFToken": carol.cookies["csrftoken"]},
        json={"answer": True},
    )
    assert carol_posts.status_code == 403

    # The link for the first question does not open another.
    pending = Selection.objects.get(pk=first["id"])
    assert pending.status == "pending"
    other = _opened(f"{server.url}/answer/s_0000000000000000/#k={token}", anonymous)
    assert other.status_code == 404

    # Bob removed from the workspace: his link shows nothing and answers nothing.
    people.workspace.memberships.filter(user=people.bob.user).delete()
    shown = _opened(link, anonymous)
    assert shown.status_code == 404 and "Deploy?" not in shown.text
    refused = anonymous.post(reply_url, headers={"X-Parley-Link": token}, json={"answer": True})
    assert refused.status_code == 404
    assert Selection.objects.get(pk=first["id"]).status == "pending"


def test_an_expired_question_s_link_answers_nothing(make_server, people, mailbox):
    server = make_server(PARLEY_EMAIL_URL=mailbox.url)
    alice = server.client(people.alice)
    cid = create_conversation(alice)
    start(alice, cid, [ask(kind="confirm", prompt="Still there?", addressee="bob", timeout=2)])
    pending = wait_pending(alice, cid)
    link = _link(mailbox.wait_for(1)[0])
    wait_until(
        lambda: Selection.objects.get(pk=pending["id"]).status == "expired",
        what="the question's expiry",
    )
    token = link.split("#k=")[1]
    late = httpx.post(
        f"{server.url}/api/selections/{pending['id']}/reply/",
        headers={"X-Parley-Link": token},
        json={"answer": True},
        timeout=20,
    )
    assert late.status_code == 410
    assert Selection.objects.get(pk=pending["id"]).status == "expired"
    # The link still shows how it ended.
    assert _opened(link).json()["selection"]["status"] == "expired"
