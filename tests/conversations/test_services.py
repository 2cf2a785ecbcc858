"""Services against the real database: numbering, one active turn, exactly one ending."""

import threading
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from conversations import selectors, services
from conversations.models import Conversation, Turn, TurnEvent
from conversations.shared import ApplicationError


def new_turn(conversation, user, **fields) -> Turn:
    fields.setdefault("runner", "me")
    return Turn.objects.create(conversation=conversation, input="x", started_by=user, **fields)


def seqs(conversation) -> list[int]:
    return list(conversation.events.order_by("seq").values_list("seq", flat=True))


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_never_share_a_seq_nor_leave_a_hole(people, conversation):
    turn = new_turn(conversation, people.alice.user)
    errors = []

    def writer(n: int):
        try:
            for batch in range(25):
                events = [("message.delta", {"text": f"{n}:{batch}:{i}"}) for i in range(3)]
                with transaction.atomic():
                    services.append_events(
                        conversation_id=conversation.pk, turn_id=turn.pk, events=events
                    )
        except Exception as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert seqs(conversation) == list(range(1, 8 * 25 * 3 + 1))
    conversation.refresh_from_db()
    assert conversation.last_seq == 600
    # Each batch got consecutive numbers: its three events are adjacent.
    texts = list(conversation.events.order_by("seq").values_list("data__text", flat=True))
    for start in range(0, 600, 3):
        prefixes = {t.rsplit(":", 1)[0] for t in texts[start : start + 3]}
        assert len(prefixes) == 1


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_append_leaves_no_hole(people, conversation):
    turn = new_turn(conversation, people.alice.user)
    services.turn_events_append(
        conversation_id=conversation.pk,
        turn_id=turn.pk,
        process="me",
        events=[("message.delta", {"text": "a"})],
        batch=1,
    )
    with pytest.raises(RuntimeError), transaction.atomic():
        services.turn_events_append(
            conversation_id=conversation.pk,
            turn_id=turn.pk,
            process="me",
            events=[("message.delta", {"text": "lost"})],
            batch=2,
        )
        raise RuntimeError("the writer fails after numbering")
    services.turn_events_append(
        conversation_id=conversation.pk,
        turn_id=turn.pk,
        process="me",
        events=[("message.delta", {"text": "b"})],
        batch=2,
    )
    assert seqs(conversation) == [1, 2]
    assert list(conversation.events.values_list("data__text", flat=True)) == ["a", "b"]


@pytest.mark.django_db
def test_the_database_refuses_a_duplicate_seq(people, conversation):
    turn = new_turn(conversation, people.alice.user)
    TurnEvent.objects.create(
        conversation=conversation, turn=turn, seq=1, type="turn.started", created_at=timezone.now()
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        TurnEvent.objects.create(
            conversation=conversation,
            turn=turn,
            seq=1,
            type="turn.started",
            created_at=timezone.now(),
        )


@pytest.mark.django_db
def test_the_database_allows_one_active_turn_per_conversation(people, conversation):
    new_turn(conversation, people.alice.user, status=Turn.Status.RUNNING)
    new_turn(conversation, people.alice.user, status=Turn.Status.COMPLETED)
    with pytest.raises(IntegrityError), transaction.atomic():
        new_turn(conversation, people.alice.user, status=Turn.Status.AWAITING_INPUT)


@pytest.mark.django_db
def test_turn_start_refuses_a_second_active_turn_with_409(people, conversation):
    turn, started = services.turn_start(
        conversation=conversation, user=people.bob.user, input="help"
    )
    assert started.seq == 1 and turn.status == Turn.Status.QUEUED
    with pytest.raises(ApplicationError) as refused:
        services.turn_start(conversation=conversation, user=people.bob.user, input="help")
    assert refused.value.status == 409 and refused.value.code == "turn_in_progress"
    assert refused.value.extra == {"turn": turn.pk}
    assert seqs(conversation) == [1]


@pytest.mark.django_db
def test_a_turn_ends_exactly_once(people, conversation):
    turn = new_turn(conversation, people.alice.user, status=Turn.Status.RUNNING)
    first = services.turn_finish(turn_id=turn.pk, status=Turn.Status.COMPLETED)
    second = services.turn_finish(turn_id=turn.pk, status=Turn.Status.FAILED, error="late")
    assert [f.type for f in first] == ["turn.completed"] and second == []
    turn.refresh_from_db()
    assert turn.status == Turn.Status.COMPLETED and turn.error == ""
    assert list(conversation.events.values_list("type", flat=True)) == ["turn.completed"]


@pytest.mark.django_db
def test_upkeep_renews_local_leases_and_fails_turns_whose_lease_ran_out(people, conversation):
    other = Conversation.objects.create(workspace=people.workspace, title="Other", agent="builtin")
    past = timezone.now() - timedelta(seconds=5)
    mine = new_turn(
        conversation,
        people.alice.user,
        status=Turn.Status.RUNNING,
        runner="me",
        lease_expires_at=past,
    )
    lost = new_turn(
        other,
        people.alice.user,
        status=Turn.Status.AWAITING_INPUT,
        runner="gone",
        lease_expires_at=past,
    )
    assert services.turns_renew(process="me", local_turn_ids=[mine.pk]) == []
    services.turns_reap(process="me", local_turn_ids=[mine.pk], reap_foreign=False)
    mine.refresh_from_db()
    lost.refresh_from_db()
    assert mine.status == Turn.Status.RUNNING and mine.lease_expires_at > timezone.now()
    assert lost.status == Turn.Status.FAILED
    event = other.events.get()
    assert event.type == "turn.failed" and event.data == {"error": services.TURN_LOST_ERROR}


@pytest.mark.django_db
def test_upkeep_at_start_up_ends_turns_left_by_a_stopped_server(people, conversation):
    left = new_turn(
        conversation,
        people.alice.user,
        status=Turn.Status.RUNNING,
        runner="old-process",
        lease_expires_at=timezone.now() + timedelta(minutes=5),
    )
    services.turns_reap(process="new-process", local_turn_ids=[], reap_foreign=False)
    left.refresh_from_db()
    assert left.status == Turn.Status.RUNNING  # its lease has not run out yet
    services.turns_reap(process="new-process", local_turn_ids=[], reap_foreign=True)
    left.refresh_from_db()
    assert left.status == Turn.Status.FAILED


@pytest.mark.django_db
def test_upkeep_reports_local_turns_this_process_no_longer_owns(people, conversation):
    other = Conversation.objects.create(workspace=people.workspace, title="Other", agent="builtin")
    kept = new_turn(conversation, people.alice.user, status=Turn.Status.RUNNING)
    taken = new_turn(other, people.alice.user, status=Turn.Status.RUNNING, runner="someone")
    lost = services.turns_renew(process="me", local_turn_ids=[kept.pk, taken.pk])
    assert lost == [taken.pk]
    services.turn_finish(turn_id=kept.pk, status=Turn.Status.COMPLETED)
    assert services.turns_renew(process="me", local_turn_ids=[kept.pk]) == [kept.pk]


@pytest.mark.django_db
def test_a_reaped_turns_own_writes_are_refused_and_change_nothing(people, conversation):
    """Fencing: once another process ended the turn, its process can write nothing more."""
    turn = new_turn(
        conversation,
        people.alice.user,
        status=Turn.Status.RUNNING,
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )
    services.turn_events_append(
        conversation_id=conversation.pk,
        turn_id=turn.pk,
        process="me",
        events=[("x.y", {})],
        batch=1,
    )
    # Its process stalls past its lease; another reaps the turn.
    Turn.objects.filter(pk=turn.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert [f.type for f in services.turn_reap(turn_id=turn.pk)] == ["turn.failed"]
    for write in (
        lambda: services.turn_events_append(
            conversation_id=conversation.pk,
            turn_id=turn.pk,
            process="me",
            events=[("x.y", {})],
            batch=2,
        ),
        lambda: services.turn_finish(turn_id=turn.pk, status="completed", process="me"),
    ):
        with pytest.raises(services.TurnLost):
            write()
    assert list(conversation.events.values_list("type", flat=True).order_by("seq")) == [
        "x.y",
        "turn.failed",
    ]


@pytest.mark.django_db
def test_a_batch_retried_after_its_commit_is_written_once_and_renews_the_lease(
    people, conversation
):
    """A writer whose commit's acknowledgement was lost (a dropped connection) sends the same
    batch again: it is recognised, not written twice."""
    turn = new_turn(conversation, people.alice.user, status=Turn.Status.RUNNING)
    batch = {"events": [("message.delta", {"text": "once"})], "process": "me", "batch": 1}
    first = services.turn_events_append(conversation_id=conversation.pk, turn_id=turn.pk, **batch)
    again = services.turn_events_append(conversation_id=conversation.pk, turn_id=turn.pk, **batch)
    assert [f.seq for f in first] == [1] and again == []
    assert seqs(conversation) == [1]
    turn.refresh_from_db()
    assert turn.batches_written == 1 and turn.lease_expires_at > timezone.now()


@pytest.mark.django_db
def test_a_turn_whose_lease_was_just_renewed_is_not_reaped(people, conversation):
    turn = new_turn(
        conversation,
        people.alice.user,
        status=Turn.Status.RUNNING,
        lease_expires_at=timezone.now() + timedelta(seconds=30),
    )
    assert services.turn_reap(turn_id=turn.pk) == []
    turn.refresh_from_db()
    assert turn.status == Turn.Status.RUNNING


@pytest.mark.django_db
def test_control_news_brings_the_stored_steering_and_stop_requests(people, conversation):
    """What a running turn reads back when a wake-up may have been lost."""
    turn = new_turn(conversation, people.alice.user, status=Turn.Status.RUNNING)
    services.turn_steer(
        conversation=conversation, user=people.bob.user, expected_turn_id=turn.pk, input="one"
    )
    services.turn_steer(
        conversation=conversation, user=people.bob.user, expected_turn_id=turn.pk, input="two"
    )
    news = selectors.turn_control_news(turn_ids=[turn.pk])
    assert news.steering == [(turn.pk, 1, "one"), (turn.pk, 2, "two")]
    assert news.stop_requested == []
    services.turn_cancel(conversation=conversation, user=people.bob.user, turn_id=turn.pk)
    assert selectors.turn_control_news(turn_ids=[turn.pk]).stop_requested == [turn.pk]
