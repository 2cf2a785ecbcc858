"""The Django admin, the OpenAPI schema and docs, and the demo seed."""

import re

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model

from conversations import services
from conversations.models import Membership, Turn, Workspace
from tests.conftest import manage


@pytest.fixture
def finished_turn(people, conversation):
    turn, _ = services.turn_start(conversation=conversation, user=people.bob.user, input="hello")
    services.turn_events_append(
        conversation_id=conversation.pk,
        turn_id=turn.pk,
        process=turn.runner,
        batch=1,
        events=[
            ("message.delta", {"text": "Hi "}),
            ("message.delta", {"text": "<b>there</b>"}),
            ("message.completed", {"text": "Hi <b>there</b>"}),
        ],
    )
    services.turn_finish(turn_id=turn.pk, status=Turn.Status.COMPLETED)
    return turn


def test_admin_lists_every_model(admin_client, finished_turn):
    for name in ["workspace", "membership", "conversation", "turn", "turnevent", "watcher"]:
        response = admin_client.get(f"/admin/conversations/{name}/")
        assert response.status_code == 200, name


def test_admin_turn_page_shows_its_event_timeline(admin_client, finished_turn):
    # The admin quotes ids in its URLs: "_" is its escape character (t_40… would be t@…).
    page = admin_client.get(f"/admin/conversations/turn/{quote(finished_turn.pk)}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    rows = re.findall(r"<tr><td>([^<]+)</td><td>[^<]+</td><td><code>([^<]+)</code></td>", html)
    assert rows == [
        ("1", "turn.started"),
        ("2–3", "message.delta ×2"),
        ("4", "message.completed"),
        ("5", "turn.completed"),
    ]
    assert "Bob: hello" in html
    assert "Hi &lt;b&gt;there&lt;/b&gt;" in html and "<b>there" not in html  # escaped
    assert f'href="/conversations/{finished_turn.conversation_id}/"' in html  # its live page


def test_admin_conversation_pages_link_to_the_live_page(admin_client, finished_turn):
    live = f'href="/conversations/{finished_turn.conversation_id}/"'
    listing = admin_client.get("/admin/conversations/conversation/").content.decode()
    assert live in listing
    page = admin_client.get(
        f"/admin/conversations/conversation/{quote(finished_turn.conversation_id)}/change/"
    ).content.decode()
    assert "View on site" in page


def test_admin_workspace_page_shows_its_members(admin_client, people):
    page = admin_client.get(f"/admin/conversations/workspace/{people.workspace.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert (
        "memberships-TOTAL_FORMS" in html
        and str(people.files_root if hasattr(people, "files_root") else "team") in html
    )


def test_the_openapi_schema_describes_the_api(client, db):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = response.json()
    for path in [
        "/api/workspaces/",
        "/api/conversations/",
        "/api/conversations/{conversation_id}/turns/",
        "/api/conversations/{conversation_id}/events/",
        "/api/conversations/{conversation_id}/tail/",
        "/api/conversations/{conversation_id}/in-flight/",
        "/api/in-flight/",
    ]:
        assert path in schema["paths"], path
    tail = schema["paths"]["/api/conversations/{conversation_id}/tail/"]["get"]
    assert "text/event-stream" in tail["responses"]["200"]["content"]
    assert "tokenAuth" in schema["components"]["securitySchemes"]


def test_the_docs_page_is_served_without_a_network(client, db):
    page = client.get("/api/docs/")
    assert page.status_code == 200
    assert b"swagger-ui" in page.content and b"cdn.jsdelivr" not in page.content


def test_seed_demo_is_idempotent_and_prints_credentials(transactional_db, tmp_path):
    first = manage("seed_demo", PARLEY_FILES_ROOT=str(tmp_path))
    # What people change of the demo stays so: a file renamed is not put back.
    notes = tmp_path / "demo" / "notes"
    (notes / "ideas.md").rename(notes / "ideas-2026.md")
    second = manage("seed_demo", PARLEY_FILES_ROOT=str(tmp_path))
    workspace = Workspace.objects.get(slug="demo")
    roles = dict(workspace.memberships.values_list("user__username", "role"))
    assert roles == {
        "alice": Membership.Role.OWNER,
        "bob": Membership.Role.MEMBER,
        "carol": Membership.Role.VIEWER,
    }
    assert get_user_model().objects.get(username="bob").check_password("bob-parley")
    assert get_user_model().objects.get(username="alice").is_superuser
    assert "alice-parley" in first and "copied 8 sample files" in first
    assert "copied" not in second and "seeded" not in second
    assert not (notes / "ideas.md").exists() and (notes / "ideas-2026.md").is_file()
    assert (tmp_path / "demo" / "reports" / "q4-plan.md").is_file()
    # Its conversations, seeded once by real turns of the builtin agent.
    titles = dict(workspace.conversations.values_list("title", "turns__status"))
    assert titles == {
        "Getting started": "completed",
        "Summarize the Q3 report": "completed",
        "Where is the budget mentioned?": "awaiting_input",
    }
    # A fresh demo key each run (a key is kept only as its hash): the last one printed works,
    # the one before is revoked, and each person keeps one demo token.
    from accounts.tokens import user_and_token_for

    keys = [re.search(r"alice .* token: (\S+)", out).group(1) for out in (first, second)]
    assert keys[0] != keys[1] and keys[1].startswith("prl_")
    assert user_and_token_for(keys[0]) is None
    assert user_and_token_for(keys[1])[0].username == "alice"
    alice = get_user_model().objects.get(username="alice")
    assert alice.api_tokens.filter(name="Demo token", revoked_at__isnull=True).count() == 1
    # Conversations deleted (as the admin deletes them) are not put back either.
    workspace.conversations.all().delete()
    third = manage("seed_demo", PARLEY_FILES_ROOT=str(tmp_path))
    assert "seeded" not in third and not workspace.conversations.exists()


def test_admin_links_and_redirects_survive_ids_that_look_like_its_escapes(
    admin_client, people, conversation
):
    from selection.services import selection_request

    turn, _ = services.turn_start(conversation=conversation, user=people.bob.user, input="hi")
    # "_40" is how the admin escapes "@": a naive URL would name another id.
    question = selection_request(
        selection_id="s_40ab40ab40ab40ab",
        turn_id=turn.pk,
        ordinal=1,
        fields={"kind": "text", "prompt": "Well?"},
        timeout_seconds=60,
        process=turn.runner,
    )
    answered = admin_client.post(
        f"/admin/selection/selection/{question.pk}/answer/",
        {"action": "dismiss", "answer": ""},
    )
    assert answered.status_code == 302
    page = admin_client.get(answered["Location"])
    assert page.status_code == 200 and "s_40ab40ab40ab40ab" in page.content.decode()
    listing = admin_client.get("/admin/selection/selection/").content.decode()
    change = re.search(r'href="([^"]+/change/)"', listing).group(1)
    assert admin_client.get(change).status_code == 200
