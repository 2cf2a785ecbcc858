"""Questions asked as MCP tasks, kept in the database so that their answers reach the outside
agent from any session and any process, also after Parley restarted; and the one shape of a
question's result, live or read back.

Each function runs in a database thread (core.dbthreads.run_db).
"""

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from conversations.models import Turn
from selection.models import Selection
from selection.services import selection_cancel

from .models import ExternalTask

# How long an outside agent waits between two looks at a task (the protocol's pollInterval).
POLL_INTERVAL_MS = 1000


def question_result(outcome: dict, *, selection_id: str | None) -> dict:
    """The structured result of a question (``status``: answered, dismissed, declined,
    expired, cancelled, unavailable or limit_reached; ``answer``; ``answered_by``)."""
    return {
        "status": outcome["status"],
        "answer": outcome.get("answer"),
        "answered_by": outcome.get("answered_by"),
        "question": selection_id,
    }


def stopped_result(message: str) -> dict:
    """What a tool call gets once the team stopped the turn (or it ended otherwise)."""
    return {"status": "cancelled", "stopped": True, "message": message}


def task_create(*, task_id: str, user, turn_id: str, selection_id: str, ttl_seconds: float):
    now = timezone.now()
    return ExternalTask.objects.create(
        id=task_id,
        user=user,
        turn_id=turn_id,
        selection_id=selection_id,
        created_at=now,
        expires_at=now + timedelta(seconds=ttl_seconds),
    )


def task_deliver(*, task_id: str, result: dict, failed: bool = False) -> None:
    """The turn's agent has the task's result: keep it (unless the task was cancelled). A
    question cancelled (the team's Stop, its cancel in Parley, access taken away) cancels its
    task."""
    status = ExternalTask.Status.FAILED if failed else _status_of(result)
    ExternalTask.objects.filter(pk=task_id, status=ExternalTask.Status.WORKING).update(
        status=status, result=result, updated_at=timezone.now()
    )


def _status_of(result: dict) -> str:
    """A settled task's status from its result: a question cancelled (or never asked) cancels
    its task; any other end completes it."""
    cancelled = result.get("status") == Selection.Status.CANCELLED
    return ExternalTask.Status.CANCELLED if cancelled else ExternalTask.Status.COMPLETED


def turn_deadlines(*, turn_id: str) -> list[tuple[str, object]]:
    """The questions of the turn's tasks still working, with when each task expires, soonest
    first."""
    return list(
        ExternalTask.objects.filter(turn_id=turn_id, status=ExternalTask.Status.WORKING)
        .order_by("expires_at")
        .values_list("selection_id", "expires_at")
    )


def _visible(user):
    """The person's tasks, in workspaces they are still a member of (access follows people: a
    person removed from a workspace gets nothing more from a question asked there)."""
    return ExternalTask.objects.filter(
        user=user,
        expires_at__gt=timezone.now(),
        turn__conversation__workspace__memberships__user=user,
    )


def _settle_from_question(task: ExternalTask) -> ExternalTask:
    """A working task whose result its agent never delivered (its process stopped): what its
    question came to, read from the question itself."""
    if task.status != ExternalTask.Status.WORKING:
        return task
    selection = Selection.objects.filter(pk=task.selection_id).select_related("answered_by").first()
    if selection is not None and not selection.is_pending:
        task.result = question_result(selection.outcome(), selection_id=selection.pk)
        task.status = _status_of(task.result)
    elif selection is None and (
        Turn.objects.filter(pk=task.turn_id).exclude(status__in=Turn.ACTIVE_STATUSES).exists()
    ):
        # Never asked: nothing completed.
        task.status = ExternalTask.Status.CANCELLED
        task.result = stopped_result("Its turn ended before the question was asked.")
    else:
        return task
    ExternalTask.objects.filter(pk=task.pk, status=ExternalTask.Status.WORKING).update(
        status=task.status, result=task.result, updated_at=timezone.now()
    )
    task.refresh_from_db()
    return task


def task_view(*, user, task_id: str) -> ExternalTask | None:
    """The caller's task, as it stands now (None if it is not theirs, or has expired)."""
    task = _visible(user).filter(pk=task_id).first()
    return _settle_from_question(task) if task is not None else None


def tasks_of(*, user) -> list[ExternalTask]:
    return [_settle_from_question(task) for task in _visible(user)[:200]]


def task_cancel(*, user, task_id: str) -> ExternalTask | None:
    """The outside agent gives up waiting: the task is cancelled, and so is its question (its
    turn is told, and goes on). A task already settled stays as it was."""
    with transaction.atomic():
        task = _visible(user).select_for_update().filter(pk=task_id).first()
        if task is None:
            return None
        task = _settle_from_question(task)
        if task.status != ExternalTask.Status.WORKING:
            return task
        task.status = ExternalTask.Status.CANCELLED
        task.save(update_fields=["status", "updated_at"])
    question_cancel(selection_id=task.selection_id, user=user)
    return task


def question_cancel(*, selection_id: str, user) -> bool | None:
    """Cancel an outside agent's question if it is still open: True if it was cancelled now,
    False if it was settled already, None if it was not stored (yet)."""
    if selection := Selection.objects.filter(pk=selection_id).first():
        return selection_cancel(selection=selection, user=user)
    return None
