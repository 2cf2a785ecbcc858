"""Turns and their events are a conversation's record: the admin deletes neither on its own, and
offers no bulk delete for them. A conversation (or a workspace) is deleted with its whole record,
as when an owner deletes it, and not while one of its turns is still active."""

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from activity.models import Seen
from activity.services import conversation_seen
from conversations import services
from conversations.models import Conversation, Turn, TurnEvent, Workspace
from search.models import SearchEntry

EVENTS = "/admin/conversations/turnevent/"
TURNS = "/admin/conversations/turn/"
CONVERSATIONS = "/admin/conversations/conversation/"


def finished_turn(conversation, user) -> Turn:
    turn, _ = services.turn_start(conversation=conversation, user=user, input="hello")
    services.turn_events_append(
        conversation_id=conversation.pk,
        turn_id=turn.pk,
        process=turn.runner,
        batch=1,
        events=[("message.completed", {"text": "Hi"})],
    )
    services.turn_finish(turn_id=turn.pk, status=Turn.Status.COMPLETED)
    return turn


@pytest.fixture
def finished(people, conversation) -> Turn:
    return finished_turn(conversation, people.bob.user)


def test_events_and_turns_cannot_be_deleted_from_the_admin(admin_client, finished):
    events = list(finished.events.values_list("pk", flat=True))
    assert len(events) == 3
    for listing, ids in ((EVENTS, events), (TURNS, [finished.pk])):
        page = admin_client.get(listing).content.decode()
        assert 'value="delete_selected"' not in page
        admin_client.post(listing, {"action": "delete_selected", "_selected_action": ids})
    assert admin_client.get(f"{EVENTS}{events[0]}/delete/").status_code == 403
    assert admin_client.post(f"{EVENTS}{events[0]}/delete/", {"post": "yes"}).status_code == 403
    turn_delete = f"{TURNS}{quote(finished.pk)}/delete/"
    assert admin_client.post(turn_delete, {"post": "yes"}).status_code == 403
    page = admin_client.get(f"{TURNS}{quote(finished.pk)}/change/").content.decode()
    assert "/delete/" not in page
    assert TurnEvent.objects.filter(turn=finished).count() == 3 and Turn.objects.exists()


def test_a_finished_conversation_is_deleted_with_its_whole_record(admin_client, finished):
    delete = f"{CONVERSATIONS}{quote(finished.conversation_id)}/delete/"
    page = admin_client.get(delete).content.decode()
    assert "Are you sure" in page and "permission" not in page
    assert admin_client.post(delete, {"post": "yes"}).status_code == 302
    assert not Conversation.objects.exists()
    assert not Turn.objects.exists() and not TurnEvent.objects.exists()


def test_staff_allowed_to_delete_conversations_delete_one_with_its_index_and_seen_marks(
    client, people, finished
):
    # Search's entries and activity's seen marks go with their conversation: a staff member
    # allowed to delete conversations (and nothing else) deletes one whose messages are indexed
    # and that people have seen, without being asked for the permission to delete either.
    conversation = finished.conversation
    conversation_seen(user=people.bob.user, conversation=conversation, seq=conversation.last_seq)
    assert SearchEntry.objects.filter(conversation=conversation).exists()
    assert Seen.objects.filter(conversation=conversation).exists()
    staff = get_user_model().objects.create_user("staff", password="pw", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="delete_conversation"))
    client.force_login(staff)
    delete = f"{CONVERSATIONS}{quote(conversation.pk)}/delete/"
    page = client.get(delete).content.decode()
    assert "Are you sure" in page and "permission" not in page
    assert client.post(delete, {"post": "yes"}).status_code == 302
    assert not Conversation.objects.exists() and not TurnEvent.objects.exists()
    assert not SearchEntry.objects.exists() and not Seen.objects.exists()


def test_a_conversation_or_workspace_with_an_active_turn_is_not_deleted(
    admin_client, people, conversation, finished
):
    other = services.conversation_create(
        workspace=people.workspace, user=people.alice.user, title="Busy"
    )
    active, _ = services.turn_start(conversation=other, user=people.bob.user, input="go on")
    delete = f"{CONVERSATIONS}{quote(other.pk)}/delete/"
    refused = admin_client.post(delete, {"post": "yes"})
    assert refused.status_code == 200
    assert f"{active.pk}</a> is queued: stop it first" in refused.content.decode()
    bulk = admin_client.post(
        CONVERSATIONS,
        {
            "action": "delete_selected",
            "post": "yes",
            "_selected_action": [conversation.pk, other.pk],
        },
    )
    assert bulk.status_code == 200 and "stop it first" in bulk.content.decode()
    workspace_delete = f"/admin/conversations/workspace/{people.workspace.pk}/delete/"
    refused = admin_client.post(workspace_delete, {"post": "yes"})
    assert refused.status_code == 200 and "stop it first" in refused.content.decode()
    assert Conversation.objects.count() == 2 and Workspace.objects.filter(slug="team").exists()
    assert TurnEvent.objects.filter(turn=finished).count() == 3

    services.turn_finish(turn_id=active.pk, status=Turn.Status.COMPLETED)
    assert SearchEntry.objects.filter(conversation=conversation).exists()
    page = admin_client.get(workspace_delete).content.decode()
    assert "Are you sure" in page and "permission" not in page
    assert admin_client.post(workspace_delete, {"post": "yes"}).status_code == 302
    assert not Workspace.objects.filter(slug="team").exists() and not TurnEvent.objects.exists()
    assert not SearchEntry.objects.exists()
