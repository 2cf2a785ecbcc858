"""Renaming, archiving and deleting conversations over REST, and the list people see: latest
activity first, searched, filtered and paged; through a real Daphne."""

import importlib
import json
from datetime import timedelta

import pytest
from django.apps import apps
from django.utils import timezone

from conversations import services
from conversations.models import Conversation, Turn, TurnEvent
from selection.models import Selection
from tests.conftest import all_events, wait_for_turn_end, wait_until


def stored(conversation_id: str) -> dict:
    """What is stored of a conversation, to show that a refused request changed nothing."""
    row = Conversation.objects.filter(pk=conversation_id).values().first()
    return {
        "row": row,
        "turns": list(Turn.objects.filter(conversation_id=conversation_id).values()),
        "events": TurnEvent.objects.filter(conversation_id=conversation_id).count(),
    }


def error_of(response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) >= {"code", "message"}
    return body["error"]


@pytest.fixture
def bobs(people):
    return services.conversation_create(
        workspace=people.workspace, user=people.bob.user, title="Bob's notes"
    )


# Who may do what. --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "who, whose, status, code",
    [
        ("alice", "bob", 200, None),  # an owner: anyone's
        ("bob", "bob", 200, None),  # a member: their own
        ("bob", "alice", 403, "forbidden"),  # a member: not someone else's
        ("carol", "alice", 403, "forbidden"),  # a viewer: none
        ("dave", "alice", 404, "not_found"),  # a stranger learns nothing
    ],
)
def test_rename_and_archive_are_for_owners_and_the_member_who_started_it(
    server, people, conversation, bobs, who, whose, status, code
):
    target = bobs if whose == "bob" else conversation
    before = stored(target.pk)
    with server.client(getattr(people, who)) as client:
        renamed = client.patch(f"/api/conversations/{target.pk}/", json={"title": "  Renamed  "})
        archived = client.patch(f"/api/conversations/{target.pk}/", json={"archived": True})
    if code:
        for response in (renamed, archived):
            assert error_of(response, status)["code"] == code
        if code == "not_found":
            assert target.title not in renamed.text
        assert stored(target.pk) == before
        return
    assert renamed.status_code == archived.status_code == 200
    assert renamed.json()["title"] == "Renamed"
    body = archived.json()
    assert body["title"] == "Renamed" and body["archived"] is True
    assert body["archived_at"] is not None
    row = Conversation.objects.get(pk=target.pk)
    assert row.title == "Renamed" and row.archived_at is not None
    # Neither touched the counter or the activity, which belong to the event log.
    assert (row.last_seq, row.last_activity_at) == (
        before["row"]["last_seq"],
        before["row"]["last_activity_at"],
    )


def test_a_members_refusal_names_who_may(server, people, conversation):
    with server.client(people.bob) as bob, server.client(people.carol) as carol:
        member = bob.patch(f"/api/conversations/{conversation.pk}/", json={"archived": True})
        viewer = carol.patch(f"/api/conversations/{conversation.pk}/", json={"title": "X"})
    assert error_of(member, 403)["message"] == (
        "Only the workspace's owners and the person who started a conversation may archive "
        "conversations."
    )
    assert error_of(viewer, 403)["message"] == "Viewers may watch but not rename conversations."


def test_unarchiving_brings_it_back_and_archiving_twice_keeps_the_first_date(
    server, people, conversation
):
    url = f"/api/conversations/{conversation.pk}/"
    with server.client(people.alice) as client:
        first = client.patch(url, json={"archived": True}).json()["archived_at"]
        again = client.patch(url, json={"archived": True}).json()
        assert again["archived_at"] == first
        back = client.patch(url, json={"archived": False}).json()
        assert (back["archived"], back["archived_at"]) == (False, None)
        both = client.patch(url, json={"title": "Both at once", "archived": True}).json()
        assert (both["title"], both["archived"]) == ("Both at once", True)


@pytest.mark.parametrize(
    "who, whose, status, code",
    [
        ("alice", "bob", 204, None),  # owners delete
        ("bob", "bob", 403, "forbidden"),  # members do not, even their own
        ("carol", "alice", 403, "forbidden"),
        ("dave", "alice", 404, "not_found"),
    ],
)
def test_only_owners_delete(server, people, conversation, bobs, who, whose, status, code):
    target = bobs if whose == "bob" else conversation
    before = stored(target.pk)
    with server.client(getattr(people, who)) as client:
        response = client.delete(f"/api/conversations/{target.pk}/")
    if code:
        assert error_of(response, status)["code"] == code
        assert stored(target.pk) == before
        return
    assert response.status_code == 204 and response.content == b""
    assert not Conversation.objects.filter(pk=target.pk).exists()
    with server.client(people.alice) as client:
        gone = client.get(f"/api/conversations/{target.pk}/")
        assert error_of(gone, 404)["code"] == "not_found"
        again = client.delete(f"/api/conversations/{target.pk}/")
        assert error_of(again, 404)["code"] == "not_found"


def test_what_each_person_may_do_comes_with_the_conversation(server, people, conversation, bobs):
    expected = {
        "alice": {"rename": True, "archive": True, "delete": True},
        "bob": {"rename": False, "archive": False, "delete": False},
        "carol": {"rename": False, "archive": False, "delete": False},
    }
    for who, may in expected.items():
        with server.client(getattr(people, who)) as client:
            assert client.get(f"/api/conversations/{conversation.pk}/").json()["permissions"] == may
            listed = client.get("/api/conversations/").json()["results"]
            by_id = {row["id"]: row["permissions"] for row in listed}
            assert by_id[conversation.pk] == may
            # Bob started this one: he may rename and archive it, not delete it.
            own = {"rename": True, "archive": True, "delete": False}
            assert by_id[bobs.pk] == (own if who == "bob" else may)


# Deleting while a turn runs. ----------------------------------------------------------------


def test_a_conversation_with_a_turn_running_is_not_deleted_until_the_turn_ends(
    server, people, people_asking
):
    cid, turn_id = people_asking
    before = stored(cid)
    with server.client(people.alice) as client:
        refused = client.delete(f"/api/conversations/{cid}/")
        error = error_of(refused, 409)
        assert (error["code"], error["turn"]) == ("turn_in_progress", turn_id)
        assert "stop it" in error["message"]
        assert stored(cid) == before
        stop = client.post(f"/api/conversations/{cid}/cancel/", json={"turn_id": turn_id})
        assert stop.status_code == 202
        wait_for_turn_end(client, cid)
        assert client.delete(f"/api/conversations/{cid}/").status_code == 204
    # Everything in it went with it.
    assert not Turn.objects.filter(conversation_id=cid).exists()
    assert not TurnEvent.objects.filter(conversation_id=cid).exists()
    assert not Selection.objects.filter(conversation_id=cid).exists()


@pytest.fixture
def people_asking(server, people):
    """A conversation whose turn waits on a question (the turn is active)."""
    script = [{"ask": {"kind": "confirm", "prompt": "Go on?"}}]
    with server.client(people.alice) as client:
        cid = client.post(
            "/api/conversations/", json={"workspace": "team", "title": "Busy", "agent": "scripted"}
        ).json()["id"]
        turn = client.post(f"/api/conversations/{cid}/turns/", json={"input": json.dumps(script)})
        turn_id = turn.json()["turn"]
        wait_until(
            lambda: (
                client.get(f"/api/conversations/{cid}/in-flight/").json()["status"]
                == "awaiting_input"
            ),
            what="the turn to ask",
        )
    return cid, turn_id


# Bad input. --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, content_type, code, says",
    [
        ("{}", "application/json", "invalid", "Nothing to change"),
        ('{"title": "   "}', "application/json", "invalid", "title: This field may not be blank."),
        ('{"title": "' + "x" * 201 + '"}', "application/json", "invalid", "200 characters"),
        ('{"title": 5}', "application/json", "invalid", "title: must be a string."),
        ('{"title": null}', "application/json", "invalid", "title: This field may not be null."),
        ('{"archived": "maybe"}', "application/json", "invalid", "archived: Must be a valid"),
        # A field it cannot change is refused, even beside one it can.
        ('{"title": "Fine", "agent": "flood"}', "application/json", "invalid", "agent: cannot"),
        ("[]", "application/json", "invalid", "Expected a dictionary"),
        ("{not json", "application/json", "invalid_json", "The body is not valid JSON"),
        ("title=x", "text/plain", "unsupported_media_type", "text/plain"),
    ],
)
def test_a_bad_change_is_refused_with_the_reason_and_changes_nothing(
    server, people, conversation, body, content_type, code, says
):
    before = stored(conversation.pk)
    with server.client(people.alice) as client:
        response = client.patch(
            f"/api/conversations/{conversation.pk}/",
            content=body,
            headers={"Content-Type": content_type},
        )
    error = error_of(response, 415 if code == "unsupported_media_type" else 400)
    assert error["code"] == code and says in error["message"], error
    assert stored(conversation.pk) == before


def test_put_is_not_how_a_conversation_changes(server, people, conversation):
    with server.client(people.alice) as client:
        response = client.put(f"/api/conversations/{conversation.pk}/", json={"title": "X"})
    assert error_of(response, 405)["code"] == "method_not_allowed"
    assert Conversation.objects.get(pk=conversation.pk).title == "Plans"


# The list: latest activity first, search, archived, paging. ---------------------------------


def make(people, title: str, *, archived: bool = False, user=None) -> Conversation:
    conversation = services.conversation_create(
        workspace=people.workspace, user=user or people.alice.user, title=title
    )
    if archived:
        services.conversation_update(
            conversation=conversation, user=people.alice.user, role="owner", archived=True
        )
    return conversation


def listed(client, **params) -> list[str]:
    response = client.get("/api/conversations/", params={"limit": 1000, **params})
    assert response.status_code == 200, response.text
    return [row["title"] for row in response.json()["results"]]


def test_the_list_puts_the_latest_activity_first(server, people):
    first, second, _third = (make(people, title) for title in ("First", "Second", "Third"))
    with server.client(people.bob) as client:
        # With no events, the newest created comes first.
        assert listed(client) == ["Third", "Second", "First"]
        client.post(f"/api/conversations/{first.pk}/turns/", json={"input": "help"})
        wait_for_turn_end(client, first.pk)
        assert listed(client) == ["First", "Third", "Second"]
        # Its latest activity is its newest event's time, as the event log has it.
        newest = all_events(client, first.pk)[-1]
        row = next(
            r for r in client.get("/api/conversations/").json()["results"] if r["id"] == first.pk
        )
        assert row["latest_seq"] == newest["seq"]
        assert row["last_activity_at"].replace("+00:00", "Z")[:23] == newest["ts"][:23]
    # A rename is not activity.
    with server.client(people.alice) as client:
        client.patch(f"/api/conversations/{second.pk}/", json={"title": "Second, renamed"})
        assert listed(client) == ["First", "Third", "Second, renamed"]


def test_archived_conversations_leave_the_list_and_are_found_by_search(server, people):
    make(people, "Quarterly plan")
    make(people, "Old quarterly plan", archived=True)
    make(people, "Lunch")
    with server.client(people.carol) as client:
        assert listed(client) == ["Lunch", "Quarterly plan"]
        # A search, in any case, finds archived ones too.
        assert listed(client, q="QUARTERLY") == ["Old quarterly plan", "Quarterly plan"]
        assert listed(client, q="quarterly", archived="false") == ["Quarterly plan"]
        assert listed(client, archived="true") == ["Old quarterly plan"]
        assert listed(client, archived="all") == ["Lunch", "Old quarterly plan", "Quarterly plan"]
        assert listed(client, q="nothing like it") == []
        # Characters LIKE would take as wildcards are searched for as they are.
        assert listed(client, q="%") == [] and listed(client, q="_") == []
        bad = client.get("/api/conversations/", params={"archived": "perhaps"})
        assert error_of(bad, 400)["message"] == "archived: must be true, false or all."


def test_the_list_pages_through_every_conversation_once_in_order(server, people):
    titles = [f"Conversation {n:03}" for n in range(120)]
    for title in titles:
        make(people, title)
    with server.client(people.alice) as client:
        seen, offset = [], 0
        while True:
            page = client.get("/api/conversations/", params={"limit": 50, "offset": offset})
            body = page.json()
            assert body["count"] == 120
            seen += [row["title"] for row in body["results"]]
            if not body["next"]:
                break
            offset += 50
    assert seen == list(reversed(titles))


def test_an_archived_conversation_still_works_and_stays_archived(server, people, conversation):
    with server.client(people.bob) as client:
        with server.client(people.alice) as alice:
            alice.patch(f"/api/conversations/{conversation.pk}/", json={"archived": True})
        started = client.post(
            f"/api/conversations/{conversation.pk}/turns/", json={"input": "help"}
        )
        assert started.status_code == 202
        wait_for_turn_end(client, conversation.pk)
        assert listed(client) == []
        assert listed(client, archived="true") == ["Plans"]


# Latest activity, as the event log keeps it. -----------------------------------------------


def test_appending_events_stamps_the_latest_activity_and_never_turns_it_back(people, conversation):
    turn = Turn.objects.create(conversation=conversation, input="x", status=Turn.Status.RUNNING)
    services.append_events(
        conversation_id=conversation.pk, turn_id=turn.pk, events=[("message.delta", {"text": "a"})]
    )
    conversation.refresh_from_db()
    event = TurnEvent.objects.get(conversation=conversation, seq=1)
    assert conversation.last_activity_at == event.created_at
    # A stamp from the future (another process's clock ahead of ours) is not undone: the next
    # events carry it too, so ts still rises with seq.
    ahead = timezone.now() + timedelta(minutes=5)
    Conversation.objects.filter(pk=conversation.pk).update(last_activity_at=ahead)
    services.append_events(
        conversation_id=conversation.pk, turn_id=turn.pk, events=[("message.delta", {"text": "b"})]
    )
    assert TurnEvent.objects.get(conversation=conversation, seq=2).created_at == ahead
    conversation.refresh_from_db()
    assert conversation.last_activity_at == ahead


def test_the_migration_fills_latest_activity_from_the_newest_event(people):
    quiet = make(people, "Quiet")
    busy = make(people, "Busy")
    turn = Turn.objects.create(conversation=busy, input="x", status=Turn.Status.COMPLETED)
    for text in ("a", "b"):
        services.append_events(
            conversation_id=busy.pk, turn_id=turn.pk, events=[("message.delta", {"text": text})]
        )
    newest = TurnEvent.objects.get(conversation=busy, seq=2).created_at
    # As the rows were before the migration: no activity recorded.
    long_ago = timezone.now() - timedelta(days=400)
    Conversation.objects.update(last_activity_at=long_ago)
    migration = importlib.import_module(
        "conversations.migrations.0008_conversation_archived_at_last_activity_at"
    )
    migration.fill_last_activity(apps, None)
    quiet.refresh_from_db()
    busy.refresh_from_db()
    assert busy.last_activity_at == newest
    assert quiet.last_activity_at == quiet.created_at
