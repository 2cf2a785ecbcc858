"""What the selection app plugs into the conversations app: the questions turns ask, provided as
``conversations.hooks.questions`` (registered in SelectionConfig.ready()), so that the
conversations app never imports this one. Waiting for an answer is the turn runtime's own
(conversations.runtime.parking); this only stores and reads."""

from typing import Any

from core.errors import not_found

from . import selectors, services
from .access import selection_access
from .models import Via


class TurnQuestions:
    """The ``conversations.hooks.Questions`` of this app."""

    def store(self, **question) -> Any:
        return services.selection_request(**question)

    def outcome(self, selection_id: str) -> dict | None:
        return selectors.settled_outcome(selection_id=selection_id)

    def settled(self, ids: list[str]) -> list[str]:
        return selectors.settled_selection_ids(ids=ids)

    def upkeep(self) -> None:
        services.selections_remind_due()
        services.selections_escalate_due()
        services.selections_expire_due()

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
            selection=selection, user=user, answer=answer, action=action, via=Via.SOCKET
        )
        return {"selection": selection.pk, "status": selection.status}
