"""A question read by its id for every request about it (core.prepared): compiled once, then only
run, and giving what the ORM's queryset gives, its related objects and annotations included."""

import pytest
from django.db import connection, transaction
from django.db.models import Value
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.prepared import PreparedLookup
from selection.models import Selection
from selection.selectors import selection_with_context
from tests.helpers import compiled_selects, stored_turn, waiting_question

pytestmark = pytest.mark.django_db

RELATED = ("conversation", "turn", "addressee", "answered_by")


def _fields(selection: Selection) -> dict:
    return {field.attname: getattr(selection, field.attname) for field in Selection._meta.fields}


def test_a_question_by_its_id_is_what_the_orm_gives_with_its_context_and_no_more_queries(
    conversation, people
):
    turn = stored_turn(conversation, people.alice.user, "Plan the offsite")
    first = waiting_question(turn, 1, "Which venue?")
    second = waiting_question(turn, 2, "Which day?")
    Selection.objects.filter(pk=second.pk).update(
        addressee=people.bob.user,
        status=Selection.Status.ANSWERED,
        answer="Friday",
        answered_by=people.bob.user,
        answered_at=timezone.now(),
    )
    for wanted in (first, second, first):
        expected = Selection.objects.select_related(
            "conversation__workspace", "turn", "addressee", "answered_by"
        ).get(pk=wanted.pk)
        with CaptureQueriesContext(connection) as captured:
            found = selection_with_context(selection_id=wanted.pk)
            # Everything the access rule and the answer read comes with it.
            related = [getattr(found, name) for name in RELATED]
            workspace = found.conversation.workspace
        assert len(captured) == 1
        assert _fields(found) == _fields(expected)
        assert related == [getattr(expected, name) for name in RELATED]
        assert workspace == expected.conversation.workspace
        assert found.to_payload() == expected.to_payload()
    assert selection_with_context(selection_id="s_nothing") is None


def test_it_is_compiled_once_however_many_ids_it_is_asked_for(conversation, people, monkeypatch):
    turn = stored_turn(conversation, people.alice.user, "Plan the offsite")
    ids = [waiting_question(turn, ordinal, f"Question {ordinal}?").pk for ordinal in (1, 2, 3)]
    selection_with_context(selection_id=ids[0])  # compiled here, if this thread had not yet
    compiled = compiled_selects(monkeypatch)
    assert [selection_with_context(selection_id=pk).pk for pk in ids] == ids
    assert compiled == []


@pytest.mark.django_db(transaction=True)
def test_annotations_come_with_the_instances_and_a_lookup_of_another_shape_is_refused(
    conversation, people
):
    turn = stored_turn(conversation, people.alice.user, "Plan the offsite")
    question = waiting_question(turn, 1, "Which venue?")
    marked = PreparedLookup(lambda pk: Selection.objects.annotate(mark=Value(7)).filter(pk=pk))
    assert marked.first(question.pk).mark == 7
    assert marked.all("s_nothing") == []
    twice = PreparedLookup(
        lambda pk: Selection.objects.filter(pk=pk) | Selection.objects.filter(turn_id=pk)
    )
    with pytest.raises(ValueError, match="one value"):
        twice.first(question.pk)
    locking = PreparedLookup(lambda pk: Selection.objects.select_for_update().filter(pk=pk))
    # Compiled in a transaction; outside one it is refused every time, as Django refuses it.
    with transaction.atomic():
        locking.first(question.pk)
    for _ in range(2):
        with pytest.raises(TransactionManagementError):
            locking.first(question.pk)
    with transaction.atomic():
        assert locking.first(question.pk) == question
        assert locking.first(question.pk) == question
