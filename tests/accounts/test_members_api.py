"""The members, invitations and audit REST API through a real Daphne, and invitations emailed
through a real SMTP server whose link is followed: owners only (member and viewer 403, stranger
404), clear JSON errors, nothing changed on bad input; membership changes in the admin audited."""

import re
from datetime import datetime, timedelta

import httpx
import pytest
from django.utils import timezone

from accounts.models import AuditEntry, Invitation
from conversations.models import Membership
from tests.conftest import log_in
from tests.helpers import admin_of, post_form, shown

pytestmark = pytest.mark.django_db(transaction=True)

LINK = re.compile(r"http://127\.0\.0\.1:\d+/invitations/open/#k=(\S+)")
OPEN = "/invitations/open/"


@pytest.fixture
def live(make_server, mailbox):
    return make_server(PARLEY_EMAIL_URL=mailbox.url, PARLEY_EMAIL_FROM="Parley <team@parley.test>")


def _said(page) -> str:
    """A page's words, without its tags."""
    return " ".join(re.sub(r"<[^>]+>", "", shown(page)).split())


def _roles(people) -> dict:
    return dict(
        Membership.objects.filter(workspace=people.workspace).values_list("user__username", "role")
    )


def _signature(message) -> str:
    """The signature an emailed invitation carries, in its link's fragment."""
    return LINK.search(message.get_body(preferencelist=("plain",)).get_content()).group(1)


def _open(client, signature: str, **fields):
    """The invitation's page posted as its script posts it: the signature in the body."""
    return post_form(client, OPEN, {"k": signature, **fields})


def _error(response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code, response.text
    return response.json()["error"]["message"]


def test_only_owners_reach_members_invitations_and_audit(live, people):
    paths = [
        ("get", "/api/workspaces/team/members/", None),
        ("get", "/api/workspaces/team/invitations/", None),
        ("get", "/api/workspaces/team/audit/", None),
        ("post", "/api/workspaces/team/invitations/", {"email": "x@example.com"}),
        ("patch", "/api/workspaces/team/members/bob/", {"role": "viewer"}),
        ("delete", "/api/workspaces/team/members/bob/", None),
        ("post", "/api/workspaces/team/transfer/", {"username": "bob"}),
    ]
    before = _roles(people)
    for who, status in ((people.bob, 403), (people.carol, 403), (people.dave, 404)):
        with live.client(who) as client:
            for method, path, body in paths:
                response = client.request(method, path, json=body)
                _error(response, status, {403: "forbidden", 404: "not_found"}[status])
    with httpx.Client(base_url=live.url, timeout=20) as nobody:
        assert nobody.get("/api/workspaces/team/members/").status_code == 401
    assert _roles(people) == before and not Invitation.objects.exists()

    with live.client(people.alice) as alice:
        listed = alice.get("/api/workspaces/team/members/").json()
    assert [(m["person"]["username"], m["role"], m["source"]) for m in listed] == [
        ("alice", "owner", "admin"),
        ("bob", "member", "admin"),
        ("carol", "viewer", "admin"),
    ]


def test_owner_changes_roles_removes_and_transfers_with_clear_errors(live, people):
    with live.client(people.alice) as alice:
        before = _roles(people)
        for body, code in (
            ({"role": "king"}, "invalid"),
            ({"role": "viewer", "extra": 1}, "invalid"),
            ({}, "invalid"),
        ):
            _error(alice.patch("/api/workspaces/team/members/bob/", json=body), 400, code)
        _error(
            alice.patch("/api/workspaces/team/members/zed/", json={"role": "viewer"}),
            404,
            "not_found",
        )
        message = _error(
            alice.patch("/api/workspaces/team/members/alice/", json={"role": "member"}),
            409,
            "last_owner",
        )
        assert "always keeps an owner" in message
        _error(alice.delete("/api/workspaces/team/members/alice/"), 409, "last_owner")
        _error(
            alice.post("/api/workspaces/team/transfer/", json={"username": "dave"}),
            404,
            "not_found",
        )
        assert _roles(people) == before

        changed = alice.patch("/api/workspaces/team/members/carol/", json={"role": "member"})
        assert changed.status_code == 200 and changed.json()["role"] == "member"
        assert alice.delete("/api/workspaces/team/members/carol/").status_code == 204
        moved = alice.post("/api/workspaces/team/transfer/", json={"username": "bob"})
        assert moved.status_code == 200, moved.text
        assert _roles(people) == {"alice": "member", "bob": "owner"}
        # Alice is a member now: the members API is no longer hers.
        _error(alice.get("/api/workspaces/team/members/"), 403, "forbidden")

    with live.client(people.bob) as bob:
        page = bob.get("/api/workspaces/team/audit/", params={"limit": 2}).json()
        assert page["count"] >= 3
        assert [e["action"] for e in page["results"]] == ["ownership_transferred", "member_removed"]
        _error(bob.get("/api/workspaces/team/audit/", params={"limit": 0}), 400, "invalid_limit")


def test_an_invitation_is_emailed_and_its_link_accepted_once(live, people, mailbox):
    with live.client(people.alice) as alice:
        for body, status, code in (
            ({"email": "not an address"}, 400, "invalid"),
            ({"email": "erin@example.com", "role": "emperor"}, 400, "invalid"),
            ({"email": "BOB@example.com"}, 409, "already_member"),
        ):
            _error(alice.post("/api/workspaces/team/invitations/", json=body), status, code)
        assert not Invitation.objects.exists() and mailbox.messages == []

        alice.post("/api/workspaces/team/invitations/", json={"email": "erin@example.com"}).json()
        sent = alice.post(
            "/api/workspaces/team/invitations/",
            json={"email": "erin@example.com", "role": "viewer"},
        )
        assert sent.status_code == 201, sent.text
        invitation = sent.json()
        assert invitation["role"] == "viewer" and invitation["invited_by"]["username"] == "alice"
        # The second replaced the first: one pending.
        pending = alice.get("/api/workspaces/team/invitations/").json()
        assert [p["id"] for p in pending] == [invitation["id"]]

    old, new = mailbox.wait_for(2)
    assert new["To"] == "erin@example.com" and new["From"] == "Parley <team@parley.test>"
    assert new["Subject"] == "Alice invited you to The Team on Parley"
    text = new.get_body(preferencelist=("plain",)).get_content()
    assert "as a viewer" in text and "The Team" in text
    signature, old_signature = _signature(new), _signature(old)

    with httpx.Client(base_url=live.url, timeout=20) as stranger:
        page = stranger.get(OPEN)  # what the link's GET fetches: no signature, nothing shown
        assert page.status_code == 200 and "Open the invitation" in shown(page)
        assert "erin@example.com" not in shown(page)
        gone = _open(stranger, old_signature)
        assert gone.status_code == 410 and "withdrawn" in shown(gone)
        shown_page = _open(stranger, signature)
        assert shown_page.status_code == 200
        assert "Alice invited erin@example.com to The Team as a viewer" in _said(shown_page)
        assert _open(stranger, signature[:-2] + "xx").status_code == 404
    assert not Membership.objects.filter(user__email="erin@example.com").exists()

    with httpx.Client(base_url=live.url, timeout=20) as browser:
        signup = {"action": "signup", "username": "erin", "name": "Erin"}
        weak = _open(browser, signature, **signup, password="erin")
        assert weak.status_code == 400 and "password:" in shown(weak)
        joined = _open(browser, signature, **signup, password="correct horse 42!")
        assert joined.status_code == 302, joined.text
    assert _roles(people)["erin"] == "viewer"
    with httpx.Client(base_url=live.url, timeout=20) as again:
        assert _open(again, signature).status_code == 410
    # The signature reached no log (the server's, its access log included) and no audit entry.
    assert signature not in live.log_text() and old_signature not in live.log_text()
    assert not any(signature in str(e.detail) for e in AuditEntry.objects.all())
    actions = list(
        AuditEntry.objects.filter(workspace=people.workspace).values_list("action", flat=True)
    )
    assert actions[:3] == ["member_added", "invitation_accepted", "invitation_sent"]


def test_an_invitation_is_a_member_for_seven_days_and_a_reinvite_starts_afresh(live, people):
    with live.client(people.alice) as alice:
        first = alice.post("/api/workspaces/team/invitations/", json={"email": "erin@example.com"})
        assert first.status_code == 201, first.text
        again = alice.post("/api/workspaces/team/invitations/", json={"email": "erin@example.com"})
        assert again.status_code == 201, again.text
    assert first.json()["role"] == "member"
    expires = datetime.fromisoformat(first.json()["expires_at"])
    assert timedelta(days=7) - timedelta(minutes=5) < expires - timezone.now() <= timedelta(days=7)
    assert datetime.fromisoformat(again.json()["expires_at"]) > expires
    kept = Invitation.objects.get(email="erin@example.com", revoked_at__isnull=True)
    assert kept.role == "member" and kept.expires_at > expires


def test_a_refused_email_keeps_no_invitation(make_server, people, mailbox):
    # Django logs a 5xx answer at ERROR (django.request): this 502 is on purpose.
    live = make_server(
        allow_errors_from=("django.request",),
        PARLEY_EMAIL_URL=mailbox.url,
        PARLEY_EMAIL_FROM="Parley <team@parley.test>",
    )
    mailbox.refuse_to = "frank@example.com"
    with live.client(people.alice) as alice:
        response = alice.post(
            "/api/workspaces/team/invitations/", json={"email": "frank@example.com"}
        )
        _error(response, 502, "email_failed")
    assert not Invitation.objects.filter(email="frank@example.com").exists()


def test_revoked_and_wrong_account_links_change_nothing(live, people, mailbox):
    with live.client(people.alice) as alice:
        invitation = alice.post(
            "/api/workspaces/team/invitations/", json={"email": "dave@example.com"}
        ).json()
    signature = _signature(mailbox.wait_for(1)[0])

    bob = log_in(live, "bob")
    page = _open(bob, signature)
    assert page.status_code == 200 and "you are signed in as bob" in _said(page)
    refused = _open(bob, signature, action="accept")
    assert refused.status_code == 403 and "This invitation is for dave@example.com" in _said(
        refused
    )
    with live.client(people.bob) as bob_api:
        _error(bob_api.delete(f"/api/invitations/{invitation['id']}/"), 403, "forbidden")
    with live.client(people.alice) as alice:
        assert alice.delete(f"/api/invitations/{invitation['id']}/").status_code == 200
        _error(alice.delete(f"/api/invitations/{invitation['id']}/"), 409, "not_pending")
    dave = log_in(live, "dave")
    assert _open(dave, signature).status_code == 410
    assert _open(dave, signature, action="accept").status_code == 410
    assert "dave" not in _roles(people)
    assert signature not in live.log_text()


def test_without_email_invitations_are_refused(server, people):
    with server.client(people.alice) as alice:
        response = alice.post("/api/workspaces/team/invitations/", json={"email": "e@example.com"})
        _error(response, 409, "email_not_set_up")
    assert not Invitation.objects.exists()


def test_membership_changes_in_the_admin_are_audited(server, people):
    admin = admin_of(server, people)
    membership = Membership.objects.get(workspace=people.workspace, user=people.bob.user)
    changed = post_form(
        admin,
        f"/admin/conversations/membership/{membership.pk}/change/",
        {
            "user": people.bob.user.pk,
            "workspace": people.workspace.pk,
            "role": "viewer",
            "source": "admin",
        },
    )
    assert changed.status_code == 302, changed.text
    entry = AuditEntry.objects.get(action="role_changed")
    assert (entry.actor_name, entry.subject_name, entry.detail["role"]) == (
        "alice",
        "bob",
        "viewer",
    )
    assert entry.detail["before"] == "member" and entry.detail["by"] == "admin"
    deleted = post_form(
        admin, f"/admin/conversations/membership/{membership.pk}/delete/", {"post": "yes"}
    )
    assert deleted.status_code == 302
    assert AuditEntry.objects.filter(action="member_removed", subject_name="bob").exists()
