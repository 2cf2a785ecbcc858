"""What a turn needs of the questions it asks, provided to the conversations app through
``conversations.seams.questions`` (registered in SelectionConfig.ready()): the conversations
app never imports this one."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conversations.selectors import acting_member
from core.dbthreads import run_db, run_db_retrying
from core.errors import not_found
from core.process import process_id
from selection.models import new_selection_id

from . import selectors, services
from .access import selection_access
from .parking import parking
from .validation import clean_question


@dataclass(frozen=True)
class PreparedQuestion:
    """A question checked and ready to be asked: the fields of its Selection, its addressee."""

    fields: dict
    addressee: Any


class TurnQuestions:
    async def prepare(
        self, *, workspace_id: int, files_root: Path, addressee: str | None, **question
    ) -> PreparedQuestion:
        """Raises ValueError for a malformed question or an addressee who may not answer."""
        fields = clean_question(files_root=files_root, **question)
        person = None
        if addressee is not None:
            person = await run_db(acting_member, workspace_id=workspace_id, username=addressee)
            if person is None:
                raise ValueError(f"{addressee!r} cannot answer questions in this workspace.")
        return PreparedQuestion(fields=fields, addressee=person)

    async def ask(
        self,
        question: PreparedQuestion,
        *,
        turn_id: str,
        ordinal: int,
        timeout: float,
        step: dict,
        releasable: bool,
        selection_id: str | None = None,
        escalate: bool | None = None,
    ) -> dict:
        selection_id = selection_id or new_selection_id()
        # Ready for the wake-up before the question is stored: someone may answer the moment
        # selection.requested is published.
        with parking.expecting(selection_id):
            await run_db_retrying(
                services.selection_request,
                process=process_id(),
                selection_id=selection_id,
                turn_id=turn_id,
                ordinal=ordinal,
                fields=question.fields,
                addressee=question.addressee,
                timeout_seconds=timeout,
                step=step,
                escalate=escalate,
            )
            outcome = await parking.wait(selection_id, turn_id=turn_id, releasable=releasable)
        return {"selection": selection_id, **outcome}

    async def wait_again(self, selection_id: str, *, turn_id: str, releasable: bool) -> dict:
        with parking.expecting(selection_id):
            outcome = await run_db_retrying(selectors.settled_outcome, selection_id=selection_id)
            if outcome is None:
                outcome = await parking.wait(selection_id, turn_id=turn_id, releasable=releasable)
        return {"selection": selection_id, **outcome}

    def upkeep(self) -> None:
        services.selections_remind_due()
        services.selections_escalate_due()
        services.selections_expire_due()

    def wake(self, selection_id: str, outcome: dict | None) -> None:
        parking.wake(selection_id, outcome)

    def close_for_turn(self, *, turn) -> list:
        return services.selections_close_for_turn(turn=turn)

    def pending_payloads(self, *, conversation_ids: list[str]) -> dict[str, list[dict]]:
        return selectors.pending_selection_payloads(conversation_ids=conversation_ids)

    def reply(
        self, *, user, conversation_id: str, selection_id: str, answer: Any, action: str | None
    ) -> dict:
        selection = selection_access(user=user, selection_id=selection_id, answering=True)
        if selection.conversation_id != conversation_id:
            raise not_found("Selection")
        selection = services.selection_reply(
            selection=selection, user=user, answer=answer, action=action
        )
        return {"selection": selection.pk, "status": selection.status}
