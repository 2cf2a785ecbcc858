"""Unread counts and the sidebar's list over REST: what counts as a message, marks that never
go back, and nothing of a workspace the person is not in."""

import pytest

from activity.models import Seen
from conversations import services
from tests.helpers import started, store, stored_turn


def messages(turn, texts: list[str]) -> list[tuple[str, dict]]:
    """A message the agent completed for each text, each after a flood of deltas."""
    events = []
    for text in texts:
        events += [("message.delta", {"text": letter}) for letter in text]
        events.append(("message.completed", {"text": text}))
    return events


@pytest.fixture
def talked(people, conversation):
    """Alice's conversation with one turn: her input and two of the agent's messages (3)."""
    turn = stored_turn(conversation, people.alice.user, "Hello")
    store(turn, [started(turn), *messages(turn, ["Hi", "There"])])
    conversation.refresh_from_db()
    return conversation


def listed(client, person, **params) -> list[dict]:
    client.force_login(person.user)
    response = client.get("/api/me/conversations/", params)
    assert response.status_code == 200, response.content
    return response.json()


def test_unread_counts_messages_not_deltas_and_clears_when_seen(client, people, talked):
    (row,) = listed(client, people.bob)
    assert (row["id"], row["title"], row["workspace_name"]) == (talked.pk, "Plans", "The Team")
    assert (row["unread"], row["seen_seq"], row["running"], row["waiting"]) == (3, 0, False, False)

    response = client.post(
        f"/api/conversations/{talked.pk}/seen/", {"seq": talked.last_seq}, "application/json"
    )
    assert response.status_code == 200, response.content
    assert response.json() == {"conversation": talked.pk, "seen_seq": talked.last_seq, "unread": 0}
    assert listed(client, people.bob)[0]["unread"] == 0
    # Alice has seen none of it: marks are per person, stored.
    assert listed(client, people.alice)[0]["unread"] == 3
    assert Seen.objects.get(user=people.bob.user).last_seq == talked.last_seq

    # What comes after the mark counts again: a question and its answer are messages too.
    turn = stored_turn(talked, people.alice.user, "More")
    store(turn, [started(turn), ("selection.requested", {}), ("selection.resolved", {})])
    assert listed(client, people.bob)[0]["unread"] == 3


def test_a_mark_never_goes_back_nor_past_the_latest_event(client, people, talked):
    client.force_login(people.bob.user)
    seen = f"/api/conversations/{talked.pk}/seen/"
    assert client.post(seen, {"seq": 999}, "application/json").json()["seen_seq"] == talked.last_seq
    back = client.post(seen, {"seq": 1}, "application/json").json()
    assert (back["seen_seq"], back["unread"]) == (talked.last_seq, 0)


@pytest.mark.parametrize("body", [{}, {"seq": -1}, {"seq": "3"}, {"seq": True}, {"seq": 1.5}])
def test_a_bad_seq_is_refused_and_changes_nothing(client, people, talked, body):
    client.force_login(people.bob.user)
    response = client.post(f"/api/conversations/{talked.pk}/seen/", body, "application/json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"]
    assert not Seen.objects.exists()


def test_a_stranger_sees_nothing_and_cannot_mark(client, people, talked):
    assert listed(client, people.dave) == []
    response = client.post(f"/api/conversations/{talked.pk}/seen/", {"seq": 1}, "application/json")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert not Seen.objects.exists()


def test_the_list_is_every_workspace_by_latest_activity_without_archived(client, people, talked):
    services.membership_set(workspace=people.other_workspace, user=people.bob.user, role="member")
    elsewhere = services.conversation_create(
        workspace=people.other_workspace, user=people.dave.user, title="Elsewhere"
    )
    archived = services.conversation_create(
        workspace=people.workspace, user=people.alice.user, title="Old"
    )
    services.conversation_update(
        conversation=archived, user=people.alice.user, role="owner", archived=True
    )
    turn = stored_turn(talked, people.alice.user, "Again")
    store(turn, [started(turn)])
    assert [row["title"] for row in listed(client, people.bob)] == ["Plans", "Elsewhere"]
    assert [row["title"] for row in listed(client, people.bob, limit=1)] == ["Plans"]
    assert elsewhere.pk in {row["id"] for row in listed(client, people.bob)}
    client.force_login(people.bob.user)
    assert client.get("/api/me/conversations/", {"limit": 0}).status_code == 400
