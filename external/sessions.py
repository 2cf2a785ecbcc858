"""An MCP session: who opened it, the conversation it works in, and its turn (see
external.agent); and what to tell an outside agent whose turn the team stopped."""

import asyncio

from conversations.access import conversation_access, workspace_access
from conversations.models import Membership, Turn, new_turn_id
from conversations.services import conversation_create, turn_start
from core.dbthreads import run_db
from core.errors import ApplicationError

from .agent import LinkEnded, link_open


class Refused(Exception):
    """A tool call Parley refuses: its message goes back to the outside agent as the tool's
    error, and nothing is stored."""


class Session:
    """One MCP session: who it is, its conversation, and its turn (see external.agent)."""

    def __init__(self):
        self.user = None
        self.client = "An outside agent"
        self.conversation = None
        self.turn_id: str | None = None
        self.link = None
        self.asked: list[str] = []
        self._binding = asyncio.Lock()

    def know(self, context) -> None:
        request = context.request
        if self.user is None and request is not None:
            self.user = request.scope["parley.user"]
        params = context.session.client_params
        if params is not None and params.clientInfo.name:
            self.client = (params.clientInfo.title or params.clientInfo.name)[:100]

    async def conversation_for(self, arguments: dict):
        """The conversation the session works in, found or created on first use."""
        wanted = arguments.get("conversation")
        if self.conversation is not None:
            if wanted and wanted != self.conversation.pk:
                raise Refused(
                    f"This session works in conversation {self.conversation.pk}; open another "
                    "session to work in another one."
                )
            return self.conversation
        self.conversation = await run_db(
            _open_conversation,
            user=self.user,
            conversation_id=wanted,
            workspace=arguments.get("workspace"),
            title=self.client,
        )
        return self.conversation

    async def turn(self, arguments: dict):
        """The session's link to its turn, starting the turn on first use."""
        async with self._binding:
            conversation = await self.conversation_for(arguments)
            if self.link is None:
                # The link is open before the turn starts: its agent, launched the moment the
                # turn is committed, finds it there.
                link = link_open(new_turn_id())
                try:
                    await run_db(
                        turn_start,
                        conversation=conversation,
                        user=self.user,
                        input=f"{self.client} is working here through MCP.",
                        agent="external",
                        turn_id=link.turn_id,
                    )
                except BaseException:
                    link.close()
                    raise
                self.turn_id, self.link = link.turn_id, link
            if self.link.ended.is_set():
                raise LinkEnded(self.turn_id)
            return self.link

    def end(self) -> None:
        if self.link is not None:
            self.link.close()


def _open_conversation(*, user, conversation_id, workspace, title):
    try:
        if conversation_id:
            conversation, _ = conversation_access(
                user=user, conversation_id=conversation_id, act=True, doing="ask the team"
            )
            return conversation
        if workspace:
            found, _ = workspace_access(user=user, slug=workspace, act=True, doing="ask the team")
        else:
            membership = (
                Membership.objects.filter(user=user)
                .exclude(role=Membership.Role.VIEWER)
                .select_related("workspace")
                .order_by("workspace__slug")
                .first()
            )
            if membership is None:
                raise Refused("You may not act in any workspace: ask its owner to add you.")
            found = membership.workspace
        return conversation_create(workspace=found, user=user, title=title)
    except ApplicationError as exc:
        raise Refused(exc.message) from None


def turn_with_stopper(turn_id: str | None) -> Turn | None:
    return Turn.objects.filter(pk=turn_id).select_related("cancelled_by").first()


async def stopped_message(turn_id: str | None) -> str:
    return stop_message(await run_db(turn_with_stopper, turn_id))


def stop_message(turn: Turn | None) -> str:
    if turn is not None and turn.cancel_requested_at is not None:
        who = turn.cancelled_by.get_username() if turn.cancelled_by else "someone"
        return (
            f"The team stopped this work in Parley ({who} pressed Stop). Stop what you were "
            "doing; this session takes no more questions."
        )
    return "This session's turn in Parley has ended; it takes no more questions."
