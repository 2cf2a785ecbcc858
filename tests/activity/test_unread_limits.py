"""What unread counts cost and where they stop: a count capped at 100 (read from the partial
index of message events), a list of 50 conversations in a fixed number of queries, and a seen
mark racing the conversation's deletion (404, nothing stored; it was a 500)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from activity import selectors
from activity.models import Seen
from activity.services import conversation_seen
from conversations import services
from conversations.models import Conversation
from core.errors import ApplicationError
from tests.helpers import started, store, stored_turn


def test_an_unread_count_stops_at_its_cap(client, people, conversation):
    turn = stored_turn(conversation, people.alice.user, "Many")
    many = [("message.completed", {"text": f"#{n}"}) for n in range(selectors.UNREAD_CAP + 20)]
    store(turn, [started(turn), *many])
    conversation.refresh_from_db()
    (row,) = selectors.recent_conversations(user=people.bob.user)
    assert row.unread == selectors.UNREAD_CAP
    # Below the cap the count is exact: Bob saw all but the last 7 messages.
    conversation_seen(
        user=people.bob.user, conversation=conversation, seq=conversation.last_seq - 7
    )
    assert selectors.unread_of(user=people.bob.user, conversation_id=conversation.pk) == 7
    client.force_login(people.alice.user)
    assert client.get("/api/me/conversations/").json()[0]["unread"] == selectors.UNREAD_CAP


def test_the_list_of_fifty_conversations_takes_a_fixed_number_of_queries(client, people):
    for n in range(50):
        conversation = services.conversation_create(
            workspace=people.workspace, user=people.alice.user, title=f"Talk {n}"
        )
        turn = stored_turn(conversation, people.alice.user, "Hello")
        store(turn, [started(turn), ("message.delta", {"text": "Hi"}), ("message.completed", {})])
    client.force_login(people.bob.user)
    client.get("/api/me/conversations/")  # the session's first read
    with CaptureQueriesContext(connection) as queries:
        rows = client.get("/api/me/conversations/").json()
    assert len(rows) == 50 and {row["unread"] for row in rows} == {2}
    assert len(queries) <= 4, [query["sql"] for query in queries]


@pytest.mark.sqlite
def test_the_count_reads_the_partial_index_of_messages(people, conversation):
    query = selectors.with_unread(Conversation.objects.all(), user=people.bob.user).values("unread")
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        plan = [row[-1] for row in cursor.fetchall()]
    assert any(
        "USING INDEX event_messages (conversation_id=? AND seq>?)" in step for step in plan
    ), plan


def test_a_mark_of_a_conversation_deleted_after_its_check_is_not_found(people, conversation):
    turn = stored_turn(conversation, people.alice.user, "Hello")
    store(turn, [started(turn)])
    conversation.refresh_from_db()
    # The API checked access and holds the conversation; then its owner deletes it.
    Conversation.objects.filter(pk=conversation.pk).delete()
    with pytest.raises(ApplicationError) as refused:
        conversation_seen(user=people.bob.user, conversation=conversation, seq=1)
    assert (refused.value.code, refused.value.status) == ("not_found", 404)
    assert not Seen.objects.exists()
