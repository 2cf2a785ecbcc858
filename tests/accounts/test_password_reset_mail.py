"""A password reset's email goes out after the response, through a real Daphne and a real SMTP
server that holds the message's DATA reply until the test lets it go: the reset page answers
while the mail server still holds the message, and the email arrives once it is let go. So a
known address answers no slower than an unknown one (whose request sends nothing)."""

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.helpers import post_form
from tests.smtp_server import CEILING

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def live(make_server, mailbox):
    return make_server(PARLEY_EMAIL_URL=mailbox.url, PARLEY_EMAIL_FROM="Parley <team@parley.test>")


def _ask_reset(live, address: str) -> httpx.Response:
    with httpx.Client(base_url=live.url, timeout=CEILING * 2) as browser:
        return post_form(browser, "/password-reset/", {"email": address})


def test_the_reset_answers_while_the_mail_server_still_holds_its_email(live, people, mailbox):
    mailbox.hold_to = "bob@example.com"
    with ThreadPoolExecutor(max_workers=1) as asking:
        try:
            asked = asking.submit(_ask_reset, live, "Bob@Example.com")
            # The mail server has the message, and holds its reply to DATA...
            assert mailbox.holding.wait(CEILING), "the reset email never reached the mail server"
            # ...and the page has answered all the same: it did not wait for the mail server.
            response = asked.result(timeout=CEILING)
            assert not mailbox.release.is_set()
        finally:
            mailbox.release.set()
    assert response.status_code == 302 and response.headers["Location"] == "/password-reset/sent/"
    (message,) = mailbox.wait_for(1)
    assert message["To"] == "bob@example.com"
    assert message["Subject"] == "Reset your Parley password"
    assert "/reset/#u=" in message.get_body(preferencelist=("plain",)).get_content()
    assert mailbox.refused == []

    # An address without an account gets the same answer.
    unknown = _ask_reset(live, "nobody@example.com")
    assert unknown.status_code == 302 and unknown.headers["Location"] == "/password-reset/sent/"
