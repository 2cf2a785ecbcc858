"""The Django admin keeps a workspace's owner, as the members page does: lowering, moving or
deleting its last owner (the membership's change form, its delete view, the bulk delete action,
the memberships inline on the workspace's page) is refused with an error message, and nothing
changes (no membership, no audit entry, no admin history); with another owner, it is done.
And an API token's person, and a sent invitation's address, role, workspace and inviter, cannot
be edited there."""

import re
from datetime import timedelta
from html import unescape
from html.parser import HTMLParser

import pytest
from django.contrib.admin.models import LogEntry
from django.utils import timezone

from accounts.models import ApiToken, AuditEntry, Invitation
from conversations.models import Membership

MEMBERSHIPS = "/admin/conversations/membership/"


class _Form(HTMLParser):
    """The values a browser would submit from a page's form (its first ``<form>`` with
    ``form_id``): inputs, checked boxes, selected options, text areas."""

    def __init__(self, form_id: str):
        super().__init__()
        self.form_id, self.inside, self.data = form_id, False, []
        self._select, self._textarea = None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and a.get("id") == self.form_id:
            self.inside = True
        if not self.inside:
            return
        if tag == "input" and a.get("name") and a.get("type") not in ("submit", "button", "file"):
            if a.get("type") not in ("checkbox", "radio"):
                self.data.append((a["name"], a.get("value", "")))
            elif "checked" in a:
                self.data.append((a["name"], a.get("value", "on")))
        elif tag == "select":
            self._select = a.get("name")
        elif tag == "option" and self._select and "selected" in a:
            self.data.append((self._select, a.get("value", "")))
        elif tag == "textarea":
            self._textarea = a.get("name")
            self.data.append((self._textarea, ""))

    def handle_data(self, data):
        if self._textarea:
            name, value = self.data.pop()
            self.data.append((name, value + data))

    def handle_endtag(self, tag):
        if tag == "form":
            self.inside = False
        elif tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None


def _form(client, path: str, form_id: str) -> dict:
    parser = _Form(form_id)
    parser.feed(client.get(path).content.decode())
    data = {}
    for name, value in parser.data:
        data.setdefault(name, []).append(value)
    assert data, f"no form {form_id} on {path}"
    return data


def _message(client, response) -> str:
    """The admin's message on the page a refused POST went back to."""
    assert response.status_code == 302, response.content[:2000]
    page = unescape(client.get(response["Location"]).content.decode())
    return " ".join(re.search(r'<li class="error">([^<]*)</li>', page).group(1).split())


def _state(people) -> tuple:
    return (
        sorted(
            Membership.objects.filter(workspace=people.workspace).values_list(
                "user__username", "role"
            )
        ),
        AuditEntry.objects.count(),
        LogEntry.objects.count(),
    )


def _membership(people, person) -> Membership:
    return Membership.objects.get(workspace=people.workspace, user=person.user)


@pytest.fixture
def admin(admin_client, people):
    return admin_client


def test_the_last_owner_is_not_lowered_moved_or_deleted_from_the_membership_admin(admin, people):
    alice = _membership(people, people.alice)
    change = f"{MEMBERSHIPS}{alice.pk}/change/"
    before = _state(people)

    lowered = {**_form(admin, change, "membership_form"), "role": "member"}
    message = _message(admin, admin.post(change, lowered))
    assert message == (
        "Nothing was changed: alice is the workspace's only owner: a workspace always keeps an "
        "owner. Make someone else an owner (or transfer ownership) before you lower their role."
    )
    moved = {**_form(admin, change, "membership_form"), "workspace": people.other_workspace.pk}
    assert "before you move them" in _message(admin, admin.post(change, moved))

    delete = f"{MEMBERSHIPS}{alice.pk}/delete/"
    assert "before you remove them" in _message(admin, admin.post(delete, {"post": "yes"}))

    bulk = {
        "action": "delete_selected",
        "_selected_action": [alice.pk, _membership(people, people.bob).pk],
        "post": "yes",
    }
    assert "alice is the workspace's only owner" in _message(admin, admin.post(MEMBERSHIPS, bulk))
    assert _state(people) == before  # nothing: not bob either, no audit, no admin history

    # With a second owner, the first may go (the same rule, not a blanket refusal).
    carol = _membership(people, people.carol)
    carol.role = Membership.Role.OWNER
    carol.save()
    both = {**bulk, "_selected_action": [alice.pk, carol.pk]}
    message = _message(admin, admin.post(MEMBERSHIPS, both))
    assert message.startswith("Nothing was changed: alice and carol are the workspace's only")
    assert admin.post(change, lowered).status_code == 302
    assert _membership(people, people.alice).role == "member"
    assert AuditEntry.objects.filter(action="role_changed", subject_name="alice").exists()


def test_the_last_owner_is_kept_on_the_workspaces_memberships_inline(admin, people):
    page = f"/admin/conversations/workspace/{people.workspace.pk}/change/"
    alice = _membership(people, people.alice)
    data = _form(admin, page, "workspace_form")
    row = next(
        key.removesuffix("-id")
        for key, value in data.items()
        if re.fullmatch(r"memberships-\d+-id", key) and value == [str(alice.pk)]
    )
    before = _state(people)

    lowered = {**data, f"{row}-role": "viewer"}
    message = _message(admin, admin.post(page, lowered))
    assert "alice is the workspace's only owner" in message
    assert "before you lower or remove them" in message
    deleted = {**data, f"{row}-DELETE": "on"}
    assert "alice is the workspace's only owner" in _message(admin, admin.post(page, deleted))
    assert _state(people) == before

    # Made an owner in the same save, Carol keeps the workspace owned: Alice may be lowered.
    carol_row = next(
        key.removesuffix("-id")
        for key, value in data.items()
        if re.fullmatch(r"memberships-\d+-id", key)
        and value == [str(_membership(people, people.carol).pk)]
    )
    handed = {**lowered, f"{carol_row}-role": "owner"}
    assert admin.post(page, handed).status_code == 302
    assert _state(people)[0] == [("alice", "viewer"), ("bob", "member"), ("carol", "owner")]


def test_a_tokens_person_and_a_sent_invitations_terms_are_not_editable_in_the_admin(admin, people):
    token = ApiToken.objects.get(user=people.bob.user)
    change = f"/admin/accounts/apitoken/{token.pk}/change/"
    form = _form(admin, change, "apitoken_form")
    assert "user" not in form
    moved = {**form, "user": people.alice.user.pk, "name": "renamed"}
    assert admin.post(change, moved).status_code == 302
    token.refresh_from_db()
    assert (token.user, token.name) == (people.bob.user, "renamed")

    invitation = Invitation.objects.create(
        workspace=people.workspace,
        email="erin@example.com",
        role="viewer",
        invited_by=people.alice.user,
        expires_at=timezone.now() + timedelta(days=7),
    )
    change = f"/admin/accounts/invitation/{invitation.pk}/change/"
    form = _form(admin, change, "invitation_form")
    assert not {"email", "role", "workspace", "invited_by"} & set(form)
    edited = {
        **form,
        "email": "mallory@example.com",
        "role": "owner",
        "workspace": people.other_workspace.pk,
        "invited_by": people.dave.user.pk,
    }
    assert admin.post(change, edited).status_code == 302
    invitation.refresh_from_db()
    assert (
        invitation.email,
        invitation.role,
        invitation.workspace,
        invitation.invited_by,
    ) == ("erin@example.com", "viewer", people.workspace, people.alice.user)
