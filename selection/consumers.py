"""A person's own socket, ``/ws/me/``: what waits for them everywhere, kept live.

On connect it sends ``{"type": "waiting", "count", "for_me"}`` (questions the person may
answer, and how many are addressed to them), and again whenever that may have changed. It also
sends ``{"type": "notice", ...}`` for what deserves a browser notification: a question they may
answer was asked (``asked``, with ``addressed`` when it names them), they were reminded of one
(``reminded``), one was escalated to them as an owner (``escalated``), or a turn they started
ended (``turn_ended``). And ``{"type": "activity", "kind", "conversation"}`` whenever a
conversation of theirs changed in a way their lists show (created, renamed, archived or deleted,
a message stored, a question asked or settled, a turn ended, or marked seen by them). The news
comes from the workspaces' groups on the channel layer (see
conversations.notices), so it reaches the person whichever process served the change; counts
and details are always read from the database.
"""

import asyncio
import logging

from conversations import revocation
from conversations.models import Conversation, Membership
from conversations.notices import people_group_name
from core.dbthreads import run_db
from core.process import server_loop
from core.sockets import GuardedConsumer

from . import selectors

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_SERVICE_RESTART = 1012
# The person's access changed (a workspace left, a role lowered): reconnect, to hear of what
# they may now see.
CLOSE_ACCESS_CHANGED = 4409
# The kinds of question notices that name the people they are for.
ADDRESSED_KINDS = ("reminded", "escalated")
# Notices that change no count of what waits: a conversation come, changed or gone, a message
# stored, one marked seen (see the activity app, whose lists read the rest from the database).
LIST_ONLY_KINDS = ("conversation", "activity", "seen")


def _memberships(user) -> list[tuple[int, str]]:
    return list(Membership.objects.filter(user=user).values_list("workspace_id", "role"))


def _conversation_title(conversation_id: str) -> str:
    return (
        Conversation.objects.filter(pk=conversation_id).values_list("title", flat=True).first()
        or ""
    )


class PersonConsumer(GuardedConsumer):
    groups_joined: tuple[str, ...] = ()
    held: tuple[revocation.Held, ...] = ()
    counting: asyncio.Task | None = None
    closing: asyncio.Task | None = None
    count_again = False

    async def connect(self):
        await self.accept()
        if server_loop.draining:
            await self.close(code=CLOSE_SERVICE_RESTART)
            return
        self.user = self.scope.get("user")
        if self.user is None or not self.user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not await self.hold_slot(self.user):
            return  # closed with 4429: the person has as many sockets open as they may
        # Join first, then count: nothing committed after the count goes unheard.
        memberships = await run_db(_memberships, self.user)
        credentials = revocation.credentials(self.scope)
        self.held = tuple(
            revocation.hold(
                user_id=self.user.pk,
                workspace_id=pk,
                role=role,
                revoke=self.access_changed,
                **credentials,
            )
            for pk, role in memberships
        )
        if not memberships:
            # In no workspace: the token or the session alone is followed.
            self.held = (
                revocation.hold(
                    user_id=self.user.pk,
                    workspace_id=None,
                    role="",
                    revoke=self.access_changed,
                    **credentials,
                ),
            )
        self.groups_joined = tuple(people_group_name(pk) for pk, _ in memberships)
        await self.settle(self._join())
        await self.send_count()

    async def _join(self) -> None:
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)

    def access_changed(self, kind: str) -> None:
        """A workspace of the person's was left or their role in it lowered (see
        conversations.revocation): the client reconnects, to what it may now hear. Its API
        token revoked or expired, or its session signed out or its password changed: 4401, as
        for a wrong token."""
        if self.closing is not None:
            return
        for held in self.held:
            revocation.let_go(held)
        signed_out = kind in (revocation.TOKEN_ENDED, revocation.SIGNED_OUT)
        code = CLOSE_UNAUTHENTICATED if signed_out else CLOSE_ACCESS_CHANGED
        self.closing = asyncio.get_running_loop().create_task(self.close(code=code))

    async def clean_up(self):
        for held in self.held:
            revocation.let_go(held)
        if self.counting is not None:
            self.counting.cancel()
        for group in self.groups_joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        # Nothing sent here is read (or even decoded): every frame gets the same answer.
        await self.send_json(
            {
                "type": "ws.error",
                "ref": None,
                "code": "read_only",
                "message": "This socket only talks.",
            }
        )

    async def people_notice(self, message):
        notice = message["notice"]
        kind = notice.get("kind")
        if "conversation" in notice and (kind != "seen" or notice.get("user") == self.user.pk):
            # The lists of the person's pages (the sidebar, home) read again what changed.
            await self.send_json(
                {"type": "activity", "kind": kind, "conversation": notice["conversation"]}
            )
        if kind in LIST_ONLY_KINDS:
            return
        self.recount()
        if kind == "turn_ended":
            if notice.get("started_by") == self.user.pk:
                title = await run_db(_conversation_title, notice["conversation"])
                await self.send_json(
                    {
                        "type": "notice",
                        "kind": kind,
                        "conversation": notice["conversation"],
                        "conversation_title": title,
                        "turn": notice["turn"],
                        "status": notice["status"],
                    }
                )
            return
        # A new question is news for those it is for (an owner hears of one addressed to
        # someone else only if it is escalated to them).
        if (kind == "asked" and notice.get("addressee") in (None, self.user.pk)) or (
            kind in ADDRESSED_KINDS and self.user.pk in notice.get("to", ())
        ):
            details = await run_db(
                selectors.selection_notice, user=self.user, selection_id=notice["selection"]
            )
            if details is not None:
                await self.send_json({"type": "notice", "kind": kind, **details})

    def recount(self) -> None:
        """Count again soon: notices that come while a count is read share the next one."""
        if self.counting is None or self.counting.done():
            self.counting = asyncio.get_running_loop().create_task(self._count())
        else:
            self.count_again = True

    async def _count(self) -> None:
        try:
            await self.send_count()
            while self.count_again:
                self.count_again = False
                await self.send_count()
        except Exception:
            # The socket closed mid-count, or the database was away: the next notice counts.
            logger.warning("Could not count what waits for %s", self.user, exc_info=True)

    async def send_count(self) -> None:
        counts = await run_db(selectors.waiting_count, user=self.user)
        await self.send_json({"type": "waiting", **counts})
