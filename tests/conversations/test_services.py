"""Services against the real database: numbering, one active turn, exactly one ending."""

import threading
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from conversations import selectors, services
from conversations.models import Conversation, Turn, TurnEvent
from core.errors import ApplicationError


def new_turn(conversation, user, **fields) -> Turn:
    fields.setdefault("runner", "me")
    fields.setdefault("lease_expires_at", timezone.now() + timedelta(minutes=5))
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
def test_upkeep_renews_local_leases_and_finds_turns_whose_lease_ran_out(people, conversation):
    other = Conversation.objects.create(workspace=people.workspace, title="Other", agent="builtin")
    third = Conversation.objects.create(workspace=people.workspace, title="Third", agent="builtin")
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
    handed_back = new_turn(
        third, people.alice.user, status=Turn.Status.RUNNING, runner="", lease_expires_at=None
    )
    assert services.turns_renew(process="me", local_turn_ids=[mine.pk]) == []
    found = services.turns_unowned(process="me", local_turn_ids=[mine.pk], any_owner=False)
    assert sorted(found, key=lambda u: u.reason) == [
        services.Unowned(handed_back.pk, "builtin", parked=False, reason="handed_back"),
        services.Unowned(lost.pk, "builtin", parked=True, reason="process_stopped"),
    ]
    mine.refresh_from_db()
    assert mine.status == Turn.Status.RUNNING and mine.lease_expires_at > timezone.now()
    # Nobody holds the parked one any more: the admin shows no holder, and an answer resumes it.
    services.turns_let_go(turn_ids=[lost.pk])
    lost.refresh_from_db()
    assert (lost.runner, lost.lease_expires_at, lost.status) == ("", None, "awaiting_input")


@pytest.mark.django_db
def test_upkeep_at_start_up_takes_over_turns_left_by_a_stopped_server(people, conversation):
    left = new_turn(
        conversation,
        people.alice.user,
        status=Turn.Status.RUNNING,
        runner="old-process",
        lease_expires_at=timezone.now() + timedelta(minutes=5),
    )
    # Its lease has not run out yet: with other processes about, it is not anyone's to take.
    assert services.turns_unowned(process="new", local_turn_ids=[], any_owner=False) == []
    assert services.turn_claim(turn_id=left.pk, process="new", inbox="i") is None
    # Alone on a process-local layer, the new process knows the old one is gone.
    (found,) = services.turns_unowned(process="new", local_turn_ids=[], any_owner=True)
    assert (found.turn_id, found.reason) == (left.pk, "restart")
    claimed = services.turn_claim(turn_id=left.pk, process="new", inbox="i", any_owner=True)
    assert (claimed.runner, claimed.previous_runner, claimed.status) == (
        "new",
        "old-process",
        "running",
    )
    assert claimed.lease_expires_at > timezone.now()
    # Claimed once: a second claim (another process racing) gets nothing.
    assert services.turn_claim(turn_id=left.pk, process="third", inbox="j") is None


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
def test_a_taken_over_turns_old_process_can_write_nothing(people, conversation):
    """Fencing: once another process took the turn over, its old process writes nothing more."""
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
    # Its process stalls past its lease; another takes the turn over.
    Turn.objects.filter(pk=turn.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert services.turn_claim(turn_id=turn.pk, process="other", inbox="i") is not None
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
    assert list(conversation.events.values_list("type", flat=True)) == ["x.y"]
    assert services.turn_finish(turn_id=turn.pk, status="completed", process="other")


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
def test_a_turn_whose_lease_was_just_renewed_is_not_taken_over(people, conversation):
    turn = new_turn(
        conversation,
        people.alice.user,
        status=Turn.Status.RUNNING,
        lease_expires_at=timezone.now() + timedelta(seconds=30),
    )
    assert services.turn_claim(turn_id=turn.pk, process="other", inbox="i") is None
    turn.refresh_from_db()
    assert (turn.status, turn.runner) == (Turn.Status.RUNNING, "me")


@pytest.mark.django_db
def test_a_batch_carries_its_journal_steps_in_its_transaction(people, conversation):
    turn = new_turn(conversation, people.alice.user, status=Turn.Status.RUNNING)
    step = {"index": 0, "kind": "tool", "name": "find", "digest": "d", "said": 3}
    batch = {
        "events": [("tool.completed", {"id": "call_1", "name": "find", "result": 1})],
        "steps": [{**step, "outcome": {"result": 1}}],
        "process": "me",
    }
    services.turn_events_append(conversation_id=conversation.pk, turn_id=turn.pk, batch=1, **batch)
    # A retry of the same batch, and a write by a process that lost the turn, store nothing.
    services.turn_events_append(conversation_id=conversation.pk, turn_id=turn.pk, batch=1, **batch)
    with pytest.raises(services.TurnLost):
        services.turn_events_append(
            conversation_id=conversation.pk, turn_id=turn.pk, batch=2, **{**batch, "process": "x"}
        )
    progress = selectors.turn_progress(turn_id=turn.pk)
    assert progress.steps == [{**step, "outcome": {"result": 1}}]


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
