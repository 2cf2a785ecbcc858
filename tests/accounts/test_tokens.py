"""People's API tokens over REST against a real Daphne: several named tokens, the key shown once
and kept as a hash, an expiry, the last use noted (at most once a minute), revoked by their
owner only; bad input changes nothing; a revoked or expired token is refused on every edge;
the audit log and the server's log never hold a key; and the migration that moves authtoken's
keys over keeps them working."""

import hashlib
from datetime import timedelta

import httpx
import pytest
import websockets
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from accounts.models import ApiToken, AuditEntry, hash_key
from accounts.tokens import LAST_USED_EVERY, token_create, token_revoke, user_and_token_for
from tests.conftest import log_in
from tests.helpers import closed_with
from tests.mcp_client import INITIALIZE

ACCEPT = "application/json, text/event-stream"


def _as(server, key: str, scheme: str = "Token") -> httpx.Client:
    return httpx.Client(
        base_url=server.url, headers={"Authorization": f"{scheme} {key}"}, timeout=30
    )


def test_a_person_makes_lists_uses_and_revokes_named_tokens(server, people):
    with server.client(people.bob) as bob:
        made = bob.post("/api/me/tokens/", json={"name": "laptop", "expires_in_days": 30})
        assert made.status_code == 201, made.text
        body = made.json()
        key = body["key"]
        assert key.startswith("prl_") and body["key_start"] == key[:12]
        assert body["name"] == "laptop" and body["last_used_at"] is None
        expires = timezone.datetime.fromisoformat(body["expires_at"])
        assert timedelta(days=29) < expires - timezone.now() <= timedelta(days=30)
        # Kept as its SHA-256: the database never holds the key.
        stored = ApiToken.objects.get(pk=body["id"])
        assert stored.key_hash == hashlib.sha256(key.encode()).hexdigest()
        assert key not in str(ApiToken.objects.filter(pk=body["id"]).values().get())
        listed = bob.get("/api/me/tokens/").json()
        assert {t["name"] for t in listed} == {"tests", "laptop"}
        assert all("key" not in t for t in listed)

    # The new key works, with either scheme; the one it was made with too.
    for scheme in ("Token", "Bearer"):
        with _as(server, key, scheme) as laptop:
            assert laptop.get("/api/workspaces/").json()[0]["slug"] == "team"
    stored.refresh_from_db()
    assert stored.last_used_at is not None

    # A token may revoke a token of its own person: the laptop's revokes itself.
    with _as(server, key) as laptop:
        assert laptop.delete(f"/api/me/tokens/{body['id']}/").status_code == 204
        refused = laptop.get("/api/workspaces/")
        assert refused.status_code == 401
        assert refused.headers["WWW-Authenticate"] == "Token"
    with server.client(people.bob) as bob:
        assert [t["name"] for t in bob.get("/api/me/tokens/").json()] == ["tests"]
        # Gone already: 404, as for another person's.
        assert bob.delete(f"/api/me/tokens/{body['id']}/").status_code == 404

    actions = list(
        AuditEntry.objects.filter(subject=people.bob.user)
        .order_by("at", "id")
        .values_list("action", "detail")
    )
    assert [a for a, _ in actions if a.startswith("token_")][-2:] == [
        "token_created",
        "token_revoked",
    ]
    made_entry = AuditEntry.objects.filter(action="token_created", detail__token=body["id"]).get()
    assert made_entry.detail["name"] == "laptop" and made_entry.actor == people.bob.user
    # No key anywhere in the audit log, nor in the server's log.
    everything = str(list(AuditEntry.objects.values()))
    assert key not in everything and key[12:] not in everything
    assert key[12:] not in server.log_text()


def test_another_persons_token_is_not_found_and_bad_input_changes_nothing(server, people):
    alices = ApiToken.objects.get(user=people.alice.user)
    before = ApiToken.objects.count(), AuditEntry.objects.count()
    with server.client(people.bob) as bob:
        assert bob.delete(f"/api/me/tokens/{alices.pk}/").status_code == 404
        assert bob.delete("/api/me/tokens/nope/").status_code == 404
        for bad in (
            {},
            {"name": ""},
            {"name": "   "},
            {"name": 7},
            {"name": "x" * 101},
            {"name": "ok", "expires_in_days": "30"},
            {"name": "ok", "expires_in_days": 0},
            {"name": "ok", "expires_in_days": 3651},
            {"name": "ok", "expires_in_days": True},
            {"name": "ok", "expires_at": "yesterday"},
            {"name": "ok", "expires_at": "2001-01-01T00:00:00Z"},
            {"name": "ok", "expires_at": "2999-01-01T00:00:00Z", "expires_in_days": 3},
            {"name": "ok", "scopes": ["all"]},
            ["name"],
        ):
            answer = bob.post("/api/me/tokens/", json=bad)
            assert answer.status_code == 400, (bad, answer.text)
            assert set(answer.json()["error"]) >= {"code", "message"}, answer.text
    alices.refresh_from_db()
    assert alices.revoked_at is None
    assert (ApiToken.objects.count(), AuditEntry.objects.count()) == before
    # The bounds themselves are allowed: 1 to 3650 days.
    with server.client(people.bob) as bob:
        for days in (1, 3650):
            made = bob.post("/api/me/tokens/", json={"name": "ok", "expires_in_days": days})
            assert made.status_code == 201, (days, made.text)


def test_create_token_makes_a_token_that_expires_as_asked(people, capsys):
    call_command("create_token", "bob", name="x", expires_in_days=1)
    key = capsys.readouterr().out.strip()
    made = ApiToken.objects.get(user=people.bob.user, name="x")
    assert made.key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert timedelta(hours=23) < made.expires_at - timezone.now() <= timedelta(days=1)


def test_a_token_made_with_an_expiring_token_cannot_outlive_it(server, people):
    with server.client(people.bob) as bob:
        made = bob.post("/api/me/tokens/", json={"name": "short", "expires_in_days": 7})
        assert made.status_code == 201, made.text
        short = made.json()
    limit = timezone.datetime.fromisoformat(short["expires_at"])
    before = ApiToken.objects.count()
    with _as(server, short["key"]) as client:
        for longer in (
            {"name": "forever"},
            {"name": "forever", "expires_at": None},
            {"name": "longer", "expires_in_days": 30},
            {"name": "later", "expires_at": (limit + timedelta(seconds=1)).isoformat()},
        ):
            answer = client.post("/api/me/tokens/", json=longer)
            assert answer.status_code == 400, (longer, answer.text)
            assert answer.json()["error"]["code"] == "invalid"
            assert "cannot outlive it" in answer.json()["error"]["message"]
        assert ApiToken.objects.count() == before
        within = client.post("/api/me/tokens/", json={"name": "shorter", "expires_in_days": 3})
        assert within.status_code == 201, within.text
        same = client.post(
            "/api/me/tokens/", json={"name": "same", "expires_at": short["expires_at"]}
        )
        assert same.status_code == 201, same.text
    # A token that never expires may make one that never expires.
    with server.client(people.bob) as bob:
        assert bob.post("/api/me/tokens/", json={"name": "forever"}).status_code == 201


def test_a_signed_in_browser_uses_the_api_with_its_csrf_token(server, people):
    browser = log_in(server, "carol")
    try:
        assert browser.post("/api/me/tokens/", json={"name": "x"}).status_code == 403
        made = browser.post(
            "/api/me/tokens/",
            json={"name": "from the page"},
            headers={"X-CSRFToken": browser.cookies["csrftoken"]},
        )
        assert made.status_code == 201, made.text
    finally:
        browser.close()


async def _socket_code(server, conversation_id, key: str) -> int:
    async with websockets.connect(
        server.ws_url(conversation_id), additional_headers={"Authorization": f"Token {key}"}
    ) as ws:
        return await closed_with(ws)


@pytest.mark.parametrize("how", ["revoked", "expired"])
async def test_a_revoked_or_expired_token_is_refused_on_every_edge(
    server, people, conversation, how
):
    token, key = await _sync(token_create, user=people.bob.user, name=how)
    if how == "revoked":
        await _sync(token_revoke, token=token)
    else:
        await ApiToken.objects.filter(pk=token.pk).aupdate(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
    async with httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Token {key}"}, timeout=30
    ) as client:
        rest = await client.get("/api/workspaces/")
        assert rest.status_code == 401 and rest.headers["WWW-Authenticate"] == "Token"
        tail = await client.get(f"/api/conversations/{conversation.pk}/tail/")
        assert tail.status_code == 401
        mcp = await client.post(
            "/mcp/", json=INITIALIZE, headers={"Accept": ACCEPT, "Authorization": f"Bearer {key}"}
        )
        assert mcp.status_code == 401
    assert await _socket_code(server, conversation.pk, key) == 4401
    # The person's own tokens still work.
    async with server.async_client(people.bob) as client:
        assert (await client.get("/api/workspaces/")).status_code == 200


async def _sync(fn, **kwargs):
    from asgiref.sync import sync_to_async

    def run():
        try:
            return fn(**kwargs)
        finally:
            connection.close()

    return await sync_to_async(run, thread_sensitive=False)()


def test_the_last_use_is_written_at_most_once_a_minute(people):
    token, key = token_create(user=people.carol.user, name="busy")
    _, found = user_and_token_for(key)
    first = found.last_used_at
    assert first is not None
    # Within the minute: no write.
    user_and_token_for(key)
    token.refresh_from_db()
    assert token.last_used_at == first
    # A minute on, it is written again.
    earlier = first - LAST_USED_EVERY
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=earlier)
    user_and_token_for(key)
    token.refresh_from_db()
    assert token.last_used_at > earlier
    # An inactive account's token is refused.
    people.carol.user.is_active = False
    people.carol.user.save()
    assert user_and_token_for(key) is None


@pytest.mark.django_db(transaction=True)
def test_the_migration_moves_authtoken_keys_and_they_keep_working(make_server, people):
    key = "0123456789abcdef0123456789abcdef01234567"  # as DRF's authtoken made them
    made = timezone.now() - timedelta(days=400)
    executor = MigrationExecutor(connection)
    executor.migrate([("accounts", "0001_initial")])
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, created timestamp "
            "with time zone NOT NULL, user_id integer NOT NULL UNIQUE)"
            if connection.vendor == "postgresql"
            else "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, created datetime "
            "NOT NULL, user_id integer NOT NULL UNIQUE)"
        )
        cursor.execute(
            "INSERT INTO authtoken_token (key, created, user_id) VALUES (%s, %s, %s)",
            [key, made, people.dave.user.pk],
        )
        cursor.execute(
            "INSERT INTO django_migrations (app, name, applied) VALUES (%s, %s, %s)",
            ["authtoken", "0001_initial", timezone.now()],
        )
    executor = MigrationExecutor(connection)
    executor.migrate([("accounts", "0002_tokens_from_authtoken")])

    moved = ApiToken.objects.get(user=people.dave.user, name="API token")
    assert moved.key_hash == hash_key(key) and moved.key_start == key[:12]
    assert abs(moved.created_at - made) < timedelta(seconds=1)
    assert "authtoken_token" not in connection.introspection.table_names()
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM django_migrations WHERE app = %s", ["authtoken"])
        assert cursor.fetchone()[0] == 0
    server = make_server()
    with _as(server, key) as dave:
        assert [w["slug"] for w in dave.get("/api/workspaces/").json()] == ["other"]
