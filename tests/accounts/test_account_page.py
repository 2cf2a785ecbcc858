"""A person's own account, in-process (Django's test client, the real database): the signed link
that confirms a new email address (its person, its address, the address it was made under, its
time), a taken address refused whatever its case, password change and reset refused where there
is no password, and reset requests throttled per address. The browser's side, with real mail, is
tests/browser/test_account_settings.py."""

import re

import pytest
from django.core import mail, signing
from django.core.cache import cache

from accounts.email_change import SALT, email_change_confirm, email_change_request
from accounts.models import AuditEntry
from accounts.password_pages import reset_mail_settled
from core.errors import ApplicationError
from tests.helpers import signed_in_the_past

LINK = re.compile(r"/settings/account/email/confirm/#k=(\S+)")


@pytest.fixture(autouse=True)
def mailing(settings):
    # Django's test runner keeps mail in mail.outbox; a PARLEY_EMAIL_URL says email is set up.
    settings.PARLEY_EMAIL_URL = "smtp://127.0.0.1:25"
    cache.clear()  # the rates' counts
    yield
    cache.clear()


def _token(message) -> str:
    return LINK.search(message.body).group(1)


def test_a_new_address_changes_only_once_its_link_is_confirmed(
    people, django_capture_on_commit_callbacks
):
    alice = people.alice.user
    assert email_change_request(user=alice, new_email=" alice@new.example ") == "alice@new.example"
    (message,) = mail.outbox
    assert message.to == ["alice@new.example"]
    assert message.subject == "Confirm your new email address for Parley"
    token = _token(message)
    alice.refresh_from_db()
    assert alice.email == "alice@example.com"  # not yet

    with django_capture_on_commit_callbacks(execute=True):
        changed = email_change_confirm(token=token, signed_in=alice)
    assert (changed.old, changed.new) == ("alice@example.com", "alice@new.example")
    alice.refresh_from_db()
    assert alice.email == "alice@new.example"
    notice = mail.outbox[1]
    assert notice.to == ["alice@example.com"]
    assert "changed from alice@example.com to alice@new.example" in notice.body
    assert token not in notice.body
    entry = AuditEntry.objects.get(action="email_changed")
    assert (entry.actor, entry.subject) == (alice, alice)
    assert entry.detail == {"old": "alice@example.com", "new": "alice@new.example"}

    # Spent: the address it was made under is gone.
    with pytest.raises(ApplicationError) as refused:
        email_change_confirm(token=token, signed_in=alice)
    assert (refused.value.code, refused.value.status) == ("link_used", 410)


def test_an_earlier_link_stops_working_after_a_further_change(people):
    alice = people.alice.user
    email_change_request(user=alice, new_email="first@new.example")
    email_change_request(user=alice, new_email="second@new.example")
    first, second = (_token(message) for message in mail.outbox)
    email_change_confirm(token=second, signed_in=alice)
    with pytest.raises(ApplicationError) as refused:
        email_change_confirm(token=first, signed_in=alice)
    assert refused.value.code == "link_used"
    alice.refresh_from_db()
    assert alice.email == "second@new.example"


def test_a_link_does_not_work_again_once_the_address_is_back_to_what_it_was(people):
    # A to B with a link, then B back to A with another: the first link, posted again within
    # its hours, finds the address it was made under, but not the change it was made after.
    alice = people.alice.user
    email_change_request(user=alice, new_email="b@new.example")
    to_b = _token(mail.outbox[-1])
    email_change_confirm(token=to_b, signed_in=alice)
    alice.refresh_from_db()
    email_change_request(user=alice, new_email="alice@example.com")
    email_change_confirm(token=_token(mail.outbox[-1]), signed_in=alice)
    with pytest.raises(ApplicationError) as refused:
        email_change_confirm(token=to_b, signed_in=None)
    assert (refused.value.code, refused.value.status) == ("link_used", 410)
    alice.refresh_from_db()
    assert alice.email == "alice@example.com"
    assert AuditEntry.objects.filter(action="email_changed").count() == 2


def test_taken_addresses_are_told_no_more_often_than_the_rate(people, settings):
    settings.PARLEY_EMAIL_CHANGE_RATE = "5/hour"
    alice = people.alice.user
    for _ in range(5):
        with pytest.raises(ApplicationError) as refused:
            email_change_request(user=alice, new_email="bob@example.com")
        assert refused.value.code == "email_taken"
    with pytest.raises(ApplicationError) as refused:
        email_change_request(user=alice, new_email="bob@example.com")
    assert (refused.value.code, refused.value.status) == ("throttled", 429)


@pytest.mark.parametrize("address", ["bob@example.com", "BOB@Example.COM"])
def test_an_address_another_account_has_is_refused_whatever_its_case(people, address):
    with pytest.raises(ApplicationError) as refused:
        email_change_request(user=people.alice.user, new_email=address)
    assert (refused.value.code, refused.value.status) == ("email_taken", 409)
    assert "Another account already uses this email address" in refused.value.message
    assert mail.outbox == []


def test_an_address_taken_after_the_link_was_sent_is_refused_on_confirming(people):
    alice, bob = people.alice.user, people.bob.user
    email_change_request(user=alice, new_email="shared@new.example")
    bob.email = "Shared@New.example"
    bob.save()
    with pytest.raises(ApplicationError) as refused:
        email_change_confirm(token=_token(mail.outbox[0]), signed_in=alice)
    assert refused.value.code == "email_taken"
    alice.refresh_from_db()
    assert alice.email == "alice@example.com"


def test_a_tampered_an_expired_or_someone_else_s_link_changes_nothing(people, settings):
    alice, bob = people.alice.user, people.bob.user
    email_change_request(user=alice, new_email="alice@new.example")
    token = _token(mail.outbox[0])
    payload = signing.loads(token, salt=SALT)
    forged = signing.dumps({**payload, "e": "mallory@evil.example"}, salt="another salt")
    old = signed_in_the_past(payload, salt=SALT, hours=settings.PARLEY_EMAIL_CHANGE_HOURS + 1)
    for bad, code, status, signed_in in [
        (token[:-3] + "xyz", "link_invalid", 400, alice),
        (forged, "link_invalid", 400, alice),
        ("", "link_invalid", 400, alice),
        (old, "link_expired", 410, alice),
        (token, "forbidden", 403, bob),
    ]:
        with pytest.raises(ApplicationError) as refused:
            email_change_confirm(token=bad, signed_in=signed_in)
        assert (refused.value.code, refused.value.status) == (code, status)
    alice.refresh_from_db()
    assert alice.email == "alice@example.com"
    assert not AuditEntry.objects.filter(action="email_changed").exists()


def test_email_changes_are_refused_past_their_rate(people, settings):
    settings.PARLEY_EMAIL_CHANGE_RATE = "2/hour"
    alice = people.alice.user
    email_change_request(user=alice, new_email="one@new.example")
    email_change_request(user=alice, new_email="two@new.example")
    with pytest.raises(ApplicationError) as refused:
        email_change_request(user=alice, new_email="three@new.example")
    assert (refused.value.code, refused.value.status) == ("throttled", 429)
    assert len(mail.outbox) == 2


def test_without_email_a_new_address_cannot_be_asked_for(people, settings, client):
    settings.PARLEY_EMAIL_URL = ""
    client.force_login(people.alice.user)
    page = client.get("/settings/account/")
    assert "This server does not send email" in page.content.decode()
    refused = client.post("/settings/account/", {"action": "email", "email": "a@new.example"})
    assert refused.status_code == 409
    assert mail.outbox == []


def test_the_account_page_refuses_a_taken_address_with_a_clear_message(people, client):
    client.force_login(people.alice.user)
    refused = client.post("/settings/account/", {"action": "email", "email": "Carol@example.com"})
    assert refused.status_code == 409
    assert "Another account already uses this email address" in refused.content.decode()
    assert mail.outbox == []


def test_a_password_change_is_audited_and_keeps_the_session(people, client):
    client.force_login(people.bob.user)
    done = client.post(
        "/settings/account/password/",
        {
            "old_password": "bob-pw",
            "new_password1": "a-long-new-secret-41",
            "new_password2": "a-long-new-secret-41",
        },
    )
    assert done.status_code == 302 and done["Location"] == "/settings/account/"
    assert client.get("/settings/account/").status_code == 200  # still signed in
    entry = AuditEntry.objects.get(action="password_changed")
    assert entry.subject == people.bob.user and entry.detail == {}


def test_no_password_change_for_an_account_without_a_password(people, client):
    bob = people.bob.user
    bob.set_unusable_password()
    bob.save()
    client.force_login(bob)
    assert "has no Parley password" in client.get("/settings/account/").content.decode()
    refused = client.post(
        "/settings/account/password/",
        {"old_password": "", "new_password1": "x-long-secret-9", "new_password2": "x-long-9"},
    )
    assert refused.status_code == 403
    assert "has no Parley password" in refused.content.decode()
    bob.refresh_from_db()
    assert not bob.has_usable_password()


def test_with_password_sign_in_off_there_is_no_change_or_reset(people, client, settings):
    settings.PARLEY_PASSWORD_LOGIN = False
    assert "Forgot your password?" not in client.get("/login/").content.decode()
    for path in ("/password-reset/", "/reset/"):
        assert client.get(path).status_code == 404
    assert client.post("/password-reset/", {"email": "bob@example.com"}).status_code == 404
    assert reset_mail_settled() and mail.outbox == []
    client.force_login(people.bob.user)
    assert client.get("/settings/account/password/").status_code == 403
    assert "through single sign-on" in client.get("/settings/account/").content.decode()


def test_reset_requests_are_throttled_per_address_whatever_its_case(people, client, settings):
    settings.PARLEY_PASSWORD_RESET_RATE = "2/hour"
    for address in ("bob@example.com", "BOB@example.com"):
        assert client.post("/password-reset/", {"email": address}).status_code == 302
    refused = client.post("/password-reset/", {"email": "Bob@Example.com"})
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert "Too many password resets were asked for this address" in refused.content.decode()
    # Another address is counted on its own; an unknown one the same way as a known one.
    assert client.post("/password-reset/", {"email": "carol@example.com"}).status_code == 302
    for _ in range(2):
        assert client.post("/password-reset/", {"email": "nobody@example.com"}).status_code == 302
    assert client.post("/password-reset/", {"email": "nobody@example.com"}).status_code == 429
    assert reset_mail_settled()  # sent after the response, by two sender threads: any order
    assert sorted(m.to for m in mail.outbox) == [["bob@example.com"]] * 2 + [["carol@example.com"]]


def test_reset_requests_are_throttled_per_client(people, client, settings):
    settings.PARLEY_PASSWORD_RESET_CLIENT_RATE = "3/hour"
    for n in range(3):
        assert client.post("/password-reset/", {"email": f"x{n}@example.com"}).status_code == 302
    refused = client.post("/password-reset/", {"email": "bob@example.com"})
    assert refused.status_code == 429
    assert "Too many password resets were asked from your address" in refused.content.decode()
    assert reset_mail_settled() and mail.outbox == []
