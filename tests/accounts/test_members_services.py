"""The members services on the real database: roles, removal, transfer, a workspace always
keeps an owner (also when two owners lower each other at once), invitations accepted once (also
when two accepts race), and the audit log: what owners may read, and that it is append-only."""

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.contrib import admin as django_admin
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import connections
from django.test import RequestFactory, override_settings
from django.utils import timezone

from accounts import audit
from accounts.audit_log import workspace_audit
from accounts.invitations import (
    InvitationRefused,
    account_create_and_accept,
    invitation_accept,
    invitation_open,
    invitation_token,
)
from accounts.members import member_remove, member_role_change, members, ownership_transfer
from accounts.models import ApiToken, AuditEntry, Invitation, hash_key, new_key
from conversations.models import Membership
from core.errors import ApplicationError

Action = AuditEntry.Action


def _role(people, who) -> str | None:
    row = Membership.objects.filter(workspace=people.workspace, user=who.user).first()
    return row.role if row else None


def _invitation(people, email="erin@example.com", role="member", **fields) -> Invitation:
    now = timezone.now()
    fields.setdefault("invited_by", people.alice.user)
    return Invitation.objects.create(
        workspace=people.workspace,
        email=email,
        role=role,
        expires_at=now + timedelta(days=7),
        **fields,
    )


def test_the_only_owner_cannot_be_lowered_or_removed(people):
    for attempt in (
        lambda: member_role_change(
            workspace=people.workspace, username="alice", role="member", actor=people.alice.user
        ),
        lambda: member_remove(
            workspace=people.workspace, username="alice", actor=people.alice.user
        ),
    ):
        with pytest.raises(ApplicationError) as refused:
            attempt()
        assert refused.value.code == "last_owner" and refused.value.status == 409
        assert "only owner" in refused.value.message
    assert _role(people, people.alice) == "owner"
    assert not AuditEntry.objects.filter(action__in=[Action.ROLE_CHANGED, Action.MEMBER_REMOVED])


def test_a_role_change_and_a_removal_are_audited_with_their_actor(people):
    member_role_change(
        workspace=people.workspace, username="bob", role="viewer", actor=people.alice.user
    )
    member_remove(workspace=people.workspace, username="carol", actor=people.alice.user)
    assert _role(people, people.bob) == "viewer" and _role(people, people.carol) is None
    removed, changed = AuditEntry.objects.filter(workspace=people.workspace)[:2]
    assert (changed.action, changed.actor_name, changed.subject_name) == (
        "role_changed",
        "alice",
        "bob",
    )
    assert changed.detail == {"role": "viewer", "before": "member"}
    assert (removed.action, removed.subject_name, removed.detail) == (
        "member_removed",
        "carol",
        {"role": "viewer"},
    )
    # The same role again changes and records nothing.
    member_role_change(
        workspace=people.workspace, username="bob", role="viewer", actor=people.alice.user
    )
    assert AuditEntry.objects.filter(action=Action.ROLE_CHANGED).count() == 1


def test_one_no_longer_an_owner_changes_no_role_and_removes_no_one(people):
    # Alice passed the page's check, then lost ownership before her change took the lock.
    ownership_transfer(workspace=people.workspace, username="bob", actor=people.alice.user)
    before = AuditEntry.objects.count()
    for attempt in (
        lambda: member_role_change(
            workspace=people.workspace, username="bob", role="viewer", actor=people.alice.user
        ),
        lambda: member_role_change(
            workspace=people.workspace, username="alice", role="owner", actor=people.alice.user
        ),
        lambda: member_remove(
            workspace=people.workspace, username="carol", actor=people.alice.user
        ),
    ):
        with pytest.raises(ApplicationError) as refused:
            attempt()
        assert refused.value.code == "forbidden" and refused.value.status == 403
        assert "Only the workspace's owners" in refused.value.message
    assert (_role(people, people.alice), _role(people, people.bob)) == ("member", "owner")
    assert _role(people, people.carol) == "viewer"
    assert AuditEntry.objects.count() == before


def test_transfer_makes_the_member_owner_and_the_owner_a_member(people):
    ownership_transfer(workspace=people.workspace, username="bob", actor=people.alice.user)
    assert (_role(people, people.alice), _role(people, people.bob)) == ("member", "owner")
    entry = AuditEntry.objects.get(action=Action.OWNERSHIP_TRANSFERRED)
    assert (entry.actor_name, entry.subject_name) == ("alice", "bob")
    # Alice is no longer an owner: she may not transfer it again.
    with pytest.raises(ApplicationError) as refused:
        ownership_transfer(workspace=people.workspace, username="carol", actor=people.alice.user)
    assert refused.value.status == 403
    with pytest.raises(ApplicationError) as refused:
        ownership_transfer(workspace=people.workspace, username="dave", actor=people.bob.user)
    assert refused.value.status == 404  # dave is not in the workspace


def test_last_seen_is_the_later_of_sign_in_and_token_use(people):
    earlier, later = timezone.now() - timedelta(days=2), timezone.now() - timedelta(hours=1)
    people.bob.user.last_login = earlier
    people.bob.user.save()
    key = new_key()
    ApiToken.objects.create(
        user=people.bob.user,
        name="ci",
        key_hash=hash_key(key),
        key_start=key[:12],
        last_used_at=later,
    )
    seen = {m.user.username: m.last_seen for m in members(workspace=people.workspace)}
    assert seen["bob"] == later and seen["carol"] is None
    assert next(m.user.username for m in members(workspace=people.workspace)) == "alice"


def _in_threads(*calls):
    """Run the calls at once, each in a thread of its own (its own connection); their outcomes."""
    start = threading.Barrier(len(calls))

    def run(call):
        start.wait(timeout=10)
        try:
            return call()
        except ApplicationError as error:
            return error
        finally:
            connections.close_all()

    with ThreadPoolExecutor(len(calls)) as pool:
        return [future.result(timeout=30) for future in [pool.submit(run, c) for c in calls]]


@pytest.mark.django_db(transaction=True)
def test_two_owners_lowering_each_other_at_once_leave_one_owner(people):
    member_role_change(
        workspace=people.workspace, username="bob", role="owner", actor=people.alice.user
    )
    for _ in range(3):
        outcomes = _in_threads(
            lambda: member_role_change(
                workspace=people.workspace, username="alice", role="member", actor=people.bob.user
            ),
            lambda: member_role_change(
                workspace=people.workspace, username="bob", role="member", actor=people.alice.user
            ),
        )
        # The second to take the lock is no longer an owner: refused (before the last-owner
        # rule, which would refuse it too).
        refused = [o for o in outcomes if isinstance(o, ApplicationError)]
        assert [r.code for r in refused] == ["forbidden"], outcomes
        owners = Membership.objects.filter(workspace=people.workspace, role="owner")
        assert owners.count() == 1
        # Both owners again for the next round.
        Membership.objects.filter(
            workspace=people.workspace, user__in=[people.alice.user, people.bob.user]
        ).update(role="owner")


def test_an_invitation_is_unusable_once_its_inviter_is_no_longer_an_owner(people):
    token = invitation_token(_invitation(people, email="dave@example.com", role="owner"))
    ownership_transfer(workspace=people.workspace, username="bob", actor=people.alice.user)
    before = AuditEntry.objects.count()
    for attempt in (
        lambda: invitation_open(token),
        lambda: invitation_accept(token=token, user=people.dave.user),
    ):
        with pytest.raises(InvitationRefused) as refused:
            attempt()
        assert (refused.value.code, refused.value.status) == ("inviter_not_owner", 410)
        assert "alice is no longer an owner of The Team" in refused.value.message
    assert _role(people, people.dave) is None
    assert AuditEntry.objects.count() == before
    # One sent by no one known (its inviter's account deleted) opens for no one either.
    orphan = invitation_token(_invitation(people, email="dave@example.com", invited_by=None))
    with pytest.raises(InvitationRefused, match="no longer an owner"):
        invitation_accept(token=orphan, user=people.dave.user)
    # Bob, an owner, invites: that one is accepted.
    mine = _invitation(people, email="dave@example.com", role="viewer", invited_by=people.bob.user)
    assert invitation_accept(token=invitation_token(mine), user=people.dave.user).joined
    assert _role(people, people.dave) == "viewer"


@pytest.mark.django_db(transaction=True)
def test_two_accepts_of_one_invitation_at_once_one_wins(people):
    for round_ in range(3):
        Membership.objects.filter(workspace=people.workspace, user=people.dave.user).delete()
        invitation = _invitation(people, email="dave@example.com", role="viewer")
        token = invitation_token(invitation)
        outcomes = _in_threads(
            lambda token=token: invitation_accept(token=token, user=people.dave.user),
            lambda token=token: invitation_accept(token=token, user=people.dave.user),
        )
        refused = [o for o in outcomes if isinstance(o, ApplicationError)]
        assert [r.code for r in refused] == ["invitation_used"], outcomes
        assert _role(people, people.dave) == "viewer"
        accepted = AuditEntry.objects.filter(action=Action.INVITATION_ACCEPTED)
        assert accepted.count() == round_ + 1


def test_accepting_checks_the_address_and_a_member_keeps_what_they_have(people):
    token = invitation_token(_invitation(people, email="DAVE@Example.com", role="owner"))
    with pytest.raises(ApplicationError) as refused:
        invitation_accept(token=token, user=people.bob.user)
    assert refused.value.code == "wrong_account" and "DAVE@Example.com" in refused.value.message
    accepted = invitation_accept(token=token, user=people.dave.user)  # case-insensitive
    assert accepted.joined and accepted.membership.source == "invitation"
    assert accepted.membership.role == "owner"
    actions = list(AuditEntry.objects.values_list("action", flat=True))
    assert actions[:2] == ["member_added", "invitation_accepted"]

    # Bob is in already: the invitation is used, his role stays.
    token = invitation_token(_invitation(people, email="bob@example.com", role="owner"))
    accepted = invitation_accept(token=token, user=people.bob.user)
    assert not accepted.joined and _role(people, people.bob) == "member"


@pytest.mark.parametrize(
    "fields, code, status",
    [
        ({"revoked_at": timezone.now()}, "invitation_revoked", 410),
        ({"accepted_at": timezone.now()}, "invitation_used", 410),
        ({"expires_at": timezone.now() - timedelta(seconds=1)}, "invitation_expired", 410),
    ],
)
def test_links_that_no_longer_work(people, fields, code, status):
    invitation = _invitation(people, email="dave@example.com")
    Invitation.objects.filter(pk=invitation.pk).update(**fields)
    with pytest.raises(InvitationRefused) as refused:
        invitation_accept(token=invitation_token(invitation), user=people.dave.user)
    assert (refused.value.code, refused.value.status) == (code, status)
    assert _role(people, people.dave) is None


def test_a_tampered_link_is_not_found(people):
    token = invitation_token(_invitation(people))
    for bad in (token[:-2] + "xx", "", "nonsense"):
        with pytest.raises(InvitationRefused) as refused:
            invitation_open(bad)
        assert refused.value.status == 404


def test_signing_up_takes_the_invited_address_and_the_password_validators(people):
    token = invitation_token(_invitation(people, email="erin@example.com"))
    with pytest.raises(ApplicationError) as refused:
        account_create_and_accept(token=token, username="bob", name="Erin", password="123")
    assert "bob is taken" in refused.value.message and "password:" in refused.value.message
    user, accepted = account_create_and_accept(
        token=token, username="erin", name="Erin", password="a long and good passphrase"
    )
    assert user.email == "erin@example.com" and user.check_password("a long and good passphrase")
    assert accepted.joined and accepted.membership.role == "member"


def test_with_password_sign_in_off_an_invitation_makes_no_account(people):
    invitation = _invitation(people, email="erin@example.com")
    token = invitation_token(invitation)
    with override_settings(PARLEY_PASSWORD_LOGIN=False), pytest.raises(ApplicationError) as refused:
        account_create_and_accept(
            token=token, username="erin", name="Erin", password="a long and good passphrase"
        )
    assert (refused.value.code, refused.value.status) == ("password_login_off", 403)
    assert not get_user_model().objects.filter(email__iexact="erin@example.com").exists()
    invitation.refresh_from_db()
    assert invitation.accepted_at is None


def test_the_audit_log_is_append_only(people):
    entry = audit.record(Action.ROLE_CHANGED, actor=people.alice.user, workspace=people.workspace)
    entry.detail = {"role": "owner"}
    with pytest.raises(ValidationError):
        entry.save()
    with pytest.raises(ValidationError):
        entry.delete()
    assert AuditEntry.objects.get(pk=entry.pk).detail == {}
    model_admin = django_admin.site._registry[AuditEntry]
    request = RequestFactory().get("/")
    request.user = people.alice.user
    people.alice.user.is_superuser = people.alice.user.is_staff = True
    assert not model_admin.has_change_permission(request, entry)
    assert not model_admin.has_delete_permission(request, entry)
    assert not model_admin.has_add_permission(request)


def test_owners_read_their_workspace_and_their_members_sign_ins(people):
    audit.record(Action.SIGNED_IN, actor=people.bob.user, subject=people.bob.user)
    audit.record(Action.SIGN_IN_FAILED, subject_name="carol")
    audit.record(Action.SIGNED_IN, actor=people.dave.user, subject=people.dave.user)
    audit.record(Action.ROLE_CHANGED, actor=people.dave.user, workspace=people.other_workspace)
    # Alice (a member, and an admin) revoked Dave's token: about Dave, not shown to the team.
    audit.record(Action.TOKEN_REVOKED, actor=people.alice.user, subject=people.dave.user)
    audit.record(Action.MEMBER_REMOVED, actor=people.alice.user, workspace=people.workspace)
    seen = [(e.action, e.subject_name) for e in workspace_audit(workspace=people.workspace)]
    assert seen == [("member_removed", ""), ("sign_in_failed", "carol"), ("signed_in", "bob")]
