"""Error pages through Django's whole stack: the 500 page shows when the database is what
failed, API paths keep the API's error shape, 403 and 400 get Parley's pages too, and every
page carries the Content-Security-Policy."""

import logging

import pytest
from django.http import HttpResponse
from django.test import Client, RequestFactory

from core.middleware import ContentSecurityPolicyMiddleware, content_security_policy

# These tests do not ask for the database, so pytest-django refuses every query: a request
# that needs one fails as it would with the database down (reading the session is the first).
SESSION = "0123456789abcdefghijklmnopqrstuv"


@pytest.fixture
def failing_client():
    client = Client(raise_request_exception=False)
    client.cookies["sessionid"] = SESSION
    return client


def test_a_page_that_fails_without_its_database_gets_parleys_500_page(failing_client, caplog):
    with caplog.at_level(logging.ERROR, logger="django.request"):
        response = failing_client.get("/")
    assert response.status_code == 500
    html = response.content.decode()
    assert '<h1 id="error-heading">Something went wrong on our side</h1>' in html
    assert "<title>Something went wrong · Parley</title>" in html
    assert '<a href="/" class="error-home">Go to Parley\'s home page</a>' in html
    assert "/static/parley/parley.css" in html  # styled like every page
    assert response["Content-Security-Policy"] == content_security_policy("testserver")
    # "The error has been logged", as the page says.
    assert [record.status_code for record in caplog.records] == [500]
    assert "Database access not allowed" in str(response.exc_info[1])


def test_an_api_path_that_fails_answers_in_the_apis_error_shape(failing_client):
    response = failing_client.get("/api/workspaces/")
    assert response.status_code == 500
    assert response.json() == {
        "error": {"code": "server_error", "message": "Something went wrong on our side."}
    }
    assert "Content-Security-Policy" not in response  # a policy is for pages


def test_the_policy_is_set_on_pages_that_have_none_and_kept_on_those_that_do(settings):
    settings.ALLOWED_HOSTS = ["parley.example"]
    request = RequestFactory().get("/", HTTP_HOST="parley.example:8443")

    def page(request):
        return HttpResponse("<p>hi</p>")

    def own_policy(request):
        response = HttpResponse("<p>hi</p>")
        response["Content-Security-Policy"] = "default-src 'none'"
        return response

    policy = ContentSecurityPolicyMiddleware(page)(request)["Content-Security-Policy"]
    assert "script-src 'self';" in policy and "unsafe" not in policy
    assert "connect-src 'self' ws://parley.example:8443 wss://parley.example:8443;" in policy
    kept = ContentSecurityPolicyMiddleware(own_policy)(request)["Content-Security-Policy"]
    assert kept == "default-src 'none'"
    # A host not served here (answered with a 400 page) gets the policy, with no socket in it.
    stranger = RequestFactory().get("/", HTTP_HOST="evil.example")
    policy = ContentSecurityPolicyMiddleware(page)(stranger)["Content-Security-Policy"]
    assert "connect-src 'self';" in policy and "evil" not in policy


def test_a_refused_admin_page_gets_parleys_403_page(admin_client):
    # Turns are made by conversations, never by hand: the admin refuses to add one.
    response = admin_client.get("/admin/conversations/turn/add/")
    assert response.status_code == 403
    html = response.content.decode()
    assert '<h1 id="error-heading">You may not do that</h1>' in html
    assert "Back to your workspaces" in html  # they are signed in
    assert "Content-Security-Policy" in response


def test_a_request_for_a_host_not_served_gets_parleys_400_page(client):
    response = client.get("/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    html = response.content.decode()
    assert '<h1 id="error-heading">Parley could not understand that request</h1>' in html
    assert "connect-src 'self';" in response["Content-Security-Policy"]


def test_a_form_refused_by_its_csrf_check_gets_parleys_page():
    client = Client(enforce_csrf_checks=True)
    response = client.post("/login/", {"username": "alice", "password": "x"})
    assert response.status_code == 403
    html = response.content.decode()
    assert '<h1 id="error-heading">That form had expired</h1>' in html
    assert "Content-Security-Policy" in response
