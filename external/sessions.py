"""An MCP session: who opened it, where it works (a conversation, or the workspace it will create
one in), its turn (see external.agent), and what to tell an outside agent whose turn the team
stopped or whose access was taken away.

Access follows the person as everywhere else (conversations.access decides, at every call;
conversations.revocation acts at once on every process): once the session has a conversation it
holds access to act in its workspace, and when the person is removed, deactivated or lowered to
viewer, the session loses it: the call waiting ends with a tool error, its turn ends (its open
questions are cancelled, so no answer reaches them), and every later call is refused. So too
when the API token that opened the session is revoked or expires (held from its first call on).
"""

import asyncio

from django.db import transaction

from conversations import revocation
from conversations.access import conversation_access, workspace_access
from conversations.models import Conversation, Membership, Turn, Workspace, new_turn_id
from conversations.services import conversation_create, turn_start
from core.dbthreads import run_db
from core.errors import ApplicationError
from core.process import server_loop
from core.throttles import rate_check

from .agent import LinkEnded, in_background, link_open, whole

_DOING = "ask the team"


class Refused(Exception):
    """A tool call Parley refuses: its message goes back to the outside agent as the tool's
    error, and nothing is stored."""


class AccessLost(Refused):
    """The person lost their access to act in the session's workspace while it was open."""


LOST = {
    revocation.REMOVED: "You no longer have access to this conversation: you were removed from "
    "its workspace (or your account was deactivated). This session takes no more calls.",
    revocation.LOWERED: "You may no longer act in this conversation: your role in its workspace "
    "was lowered to viewer. This session takes no more calls.",
    revocation.TOKEN_ENDED: "The API token this session was opened with was revoked or expired. "
    "This session takes no more calls: open another with a token that works.",
}


class Session:
    """One MCP session: who it is, where it works, and its turn (see external.agent)."""

    def __init__(self):
        self.user = None
        self.client = "An outside agent"
        self.conversation: Conversation | None = None
        self.turn_id: str | None = None
        self.link = None
        self.asked: list[str] = []
        self.lost: str | None = None  # why the session lost its access, once it has
        self.token_id: str | None = None  # the API token that opened the session
        self._held: revocation.Held | None = None
        self._token_held: revocation.Held | None = None  # until the session has a conversation
        self._binding = asyncio.Lock()
        self.ended = False

    def know(self, context) -> None:
        request = context.request
        if self.user is None and request is not None:
            self.user = request.scope["parley.user"]
            self.token_id = request.scope.get("parley.token_id")
            if self.token_id is not None and self.conversation is None and not self.ended:
                self._token_held = revocation.hold(
                    user_id=self.user.pk,
                    workspace_id=None,
                    role=Membership.Role.VIEWER,
                    revoke=self._revoke,
                    token_id=self.token_id,
                )
        params = context.session.client_params
        if params is not None and params.clientInfo.name:
            self.client = (params.clientInfo.title or params.clientInfo.name)[:100]

    def check_access(self) -> None:
        """Refuse every call that works in the conversation once access was lost."""
        if self.lost is not None:
            raise AccessLost(self.lost)

    async def workspace_for(self, arguments: dict) -> Workspace:
        """Where the call works, checked now: the session's conversation's workspace, or, before
        the session has one, the conversation named (found, not created) or the workspace the
        session will create its conversation in. Refused if the person may not act there."""
        self.check_access()
        wanted = arguments.get("conversation")
        if self.conversation is not None:
            self._check_named(arguments)
            wanted = self.conversation.pk
        conversation, workspace = await run_db(
            _place, user=self.user, conversation_id=wanted, workspace=arguments.get("workspace")
        )
        if self.conversation is None and conversation is not None:
            self._bind(conversation)
        return workspace

    def _check_named(self, arguments: dict) -> None:
        wanted = arguments.get("conversation")
        if wanted and self.conversation is not None and wanted != self.conversation.pk:
            raise Refused(
                f"This session works in conversation {self.conversation.pk}; open another "
                "session to work in another one."
            )

    async def turn(self, arguments: dict):
        """The session's link to its turn, starting the turn (and creating the session's
        conversation, in the same transaction) on first use."""
        async with self._binding:
            if self.link is None:
                await self.workspace_for(arguments)
                # The link is open before the turn starts: its agent, launched the moment the
                # turn is committed, finds it there. Started whole even if this request is
                # cancelled meanwhile (the session's end then ends it).
                await whole(self._begin(link_open(new_turn_id()), arguments))
            else:
                # Access was checked when the turn started and is followed live since (the
                # hold): no look-up per call.
                self._check_named(arguments)
                self.check_access()
            if self.link.ended.is_set():
                raise LinkEnded(self.turn_id)
            return self.link

    async def _begin(self, link, arguments: dict) -> None:
        try:
            turn = await run_db(
                _begin,
                user=self.user,
                conversation=self.conversation,
                workspace=arguments.get("workspace"),
                title=self.client,
                input=f"{self.client} is working here through MCP.",
                client=self.client,
                turn_id=link.turn_id,
            )
        except BaseException:
            link.close()
            raise
        self.turn_id, self.link = link.turn_id, link
        if self.conversation is None:
            self._bind(turn.conversation)
        if self.ended:
            self._end_link()  # the session ended while its turn was being started

    def _bind(self, conversation: Conversation) -> None:
        """The session works in ``conversation`` from now on, and holds the right to act in its
        workspace (as a member at least: an owner lowered to member keeps it)."""
        self.conversation = conversation
        self._held = revocation.hold(
            user_id=self.user.pk,
            workspace_id=conversation.workspace_id,
            role=Membership.Role.MEMBER,
            revoke=self._revoke,
            token_id=self.token_id,
        )
        revocation.let_go(self._token_held)
        # Access taken away between the look-up and the hold is seen at once all the same.
        revocation.check_soon()

    def _revoke(self, kind: str) -> None:
        """The person lost the right to act here (called on the server loop)."""
        self.lost = LOST[kind]
        if self.link is not None:
            who = self.user.get_username()
            why = (
                f"The API token {who}'s outside agent used was revoked or expired"
                if kind == revocation.TOKEN_ENDED
                else f"{who} may no longer act in this workspace"
            )
            self.link.close(
                notice=f"{why}: the outside agent's session working as {who} has ended."
            )

    def end(self) -> None:
        """The session ended (DELETE, idle, the process stopping): what still waits without a
        task is cut short; its turn goes on while questions asked as tasks are open (access
        still followed), and ends with the last of them."""
        self.ended = True
        revocation.let_go(self._token_held)
        if self.link is None:
            revocation.let_go(self._held)
        else:
            self._end_link()

    def _end_link(self) -> None:
        link = self.link
        if server_loop.draining:
            # Handed back with the process's turns: resumed elsewhere without its session.
            link.close()
        else:
            link.session_ended()
        held = self._held

        async def let_go_at_the_end():
            await link.ended.wait()
            revocation.let_go(held)

        in_background(let_go_at_the_end())


def _place(*, user, conversation_id, workspace) -> tuple[Conversation | None, Workspace]:
    try:
        if conversation_id:
            conversation, _ = conversation_access(
                user=user, conversation_id=conversation_id, act=True, doing=_DOING
            )
            return conversation, conversation.workspace
        if workspace:
            found, _ = workspace_access(user=user, slug=workspace, act=True, doing=_DOING)
            return None, found
        membership = (
            Membership.objects.filter(user=user)
            .exclude(role=Membership.Role.VIEWER)
            .select_related("workspace")
            .order_by("workspace__slug")
            .first()
        )
        if membership is None:
            raise Refused("You may not act in any workspace: ask its owner to add you.")
        return None, membership.workspace
    except ApplicationError as exc:
        raise Refused(exc.message) from None


def _begin(*, user, conversation, workspace, title, input, client, turn_id) -> Turn:
    """The session's turn, in its conversation (created now, titled after the client, if the
    session has none yet): both or neither."""
    try:
        with transaction.atomic():
            if conversation is None:
                _, found = _place(user=user, conversation_id=None, workspace=workspace)
                rate_check("conversations", user)
                conversation = conversation_create(workspace=found, user=user, title=title)
            turn, _ = turn_start(
                conversation=conversation,
                user=user,
                input=input,
                agent="external",
                client=client,
                turn_id=turn_id,
            )
    except ApplicationError as exc:
        raise Refused(exc.message) from None
    return turn


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
