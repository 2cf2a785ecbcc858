"""The conversation socket: ``ws.ready``, then the replay, then live events, and a few frames a
client may send (each answered with ``ws.ack`` or ``ws.error``)."""

import asyncio
import logging
import re
import weakref
from urllib.parse import parse_qs

from django.conf import settings

from core.auth import authenticate
from core.dbthreads import run_db
from core.errors import ApplicationError
from core.process import process_id, server_loop
from core.sockets import GuardedConsumer, anything, flag, identifier, optional_string, string
from core.throttles import rate_check

from . import hooks, revocation, services
from .access import conversation_access
from .events import check_seq_within, parse_seq
from .feed import ConversationFeed
from .metrics import SOCKETS_BEHIND, SOCKETS_OPEN

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_BAD_REQUEST = 4400
# The person's role was lowered while the socket was open: reconnect (a page reloads) to go on as
# what they now are.
CLOSE_ACCESS_CHANGED = 4409
# The server is restarting: reconnect now (another process serves the same conversation).
CLOSE_SERVICE_RESTART = 1012
# The client fell too far behind (its socket's buffer stayed full): reconnect and resume from
# the last event you have.
CLOSE_BEHIND = 4408
# How long such a client has to read what it has and answer the close before the connection is
# dropped (its buffer is bounded meanwhile; Daphne's pings drop a client gone for good).
CLOSE_PATIENCE_SECONDS = 30
# What a conversation id may look like (Parley's are "c_" and 16 hex digits): anything else is
# refused before the socket subscribes to anything.
CONVERSATION_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
# A socket sending a long batch yields to the loop this often.
PUMP_YIELD_EVERY = 64


# The sockets open in this process, closed all at once when it shuts down.
_open_sockets: "weakref.WeakSet[ConversationConsumer]" = weakref.WeakSet()


async def close_all_sockets() -> None:
    """At shutdown: close every socket with 1012, so that each browser reconnects at once (to
    a process that is not stopping) and resumes from the last event it had."""
    sockets = list(_open_sockets)
    for socket in sockets:
        await socket.close(code=CLOSE_SERVICE_RESTART)
    if sockets:
        logger.info("Closed %d socket(s) with 1012", len(sockets))


def _seq(name: str, value):
    """A seq: a JSON whole number (not a string, not a boolean), 0 or more."""
    return parse_seq(value if isinstance(value, int) else None, name)


class ConversationConsumer(GuardedConsumer):
    # Watchers are fed by the process's hub (conversations.broadcast), not by a layer channel
    # each: one encoding and one hand-off per event instead of a dispatch per socket.
    channel_layer_alias = None

    # The socket's credential is read in connect's one trip to the database threads.
    authenticates_in_connect = True

    feed: ConversationFeed | None = None
    pump: asyncio.Task | None = None
    watcher_id: int | None = None  # the socket's watcher row
    held: revocation.Held | None = None  # the access this socket was opened with
    closing: asyncio.Task | None = None
    counted = False  # whether this socket is in SOCKETS_OPEN
    ready = False  # whether ws.ready was sent (presence waits for it)
    presence_waiting: str | None = None  # presence that came before ws.ready

    async def connect(self):
        # Accept first: a close code only reaches the client on an open socket.
        await self.accept()
        self.counted = True
        SOCKETS_OPEN.inc()
        if server_loop.draining:
            await self.close(code=CLOSE_SERVICE_RESTART)
            return
        _open_sockets.add(self)
        self.conversation_id = self.scope["url_route"]["kwargs"]["conversation_id"]
        if not CONVERSATION_ID.fullmatch(self.conversation_id):
            # No conversation has such an id: refused once the person is known (4401 first).
            await run_db(authenticate, self.scope)
            user = self.scope["user"]
            await self.close(
                code=CLOSE_FORBIDDEN if user.is_authenticated else CLOSE_UNAUTHENTICATED
            )
            return
        query = parse_qs(
            self.scope.get("query_string", b"").decode("latin1"), keep_blank_values=True
        )
        bad_query = None
        try:
            from_seq = parse_seq(query["from_seq"][-1]) if "from_seq" in query else 0
        except ApplicationError as error:
            from_seq, bad_query = 0, error
        # Subscribe first, then, in one trip to the database threads, read the person, check
        # their access, read the state and the replay's first page, and add the socket's watcher
        # row: nothing committed after the read is missed, nothing is sent before access is
        # checked, and the first events follow ws.ready at once.
        self.feed = ConversationFeed(self.conversation_id, from_seq)
        await self.settle(self.feed.__aenter__())
        if query.get("presence", [""])[-1] in ("1", "true"):
            # Before the watcher row is added, so that its own presence reaches it (sent once
            # ws.ready has gone).
            self.feed.on_presence(self.send_presence)
        opened = await self.settle(self._open_trip(watch=bad_query is None))
        user = self.scope["user"]
        if opened is None:
            await self.close(
                code=CLOSE_FORBIDDEN if user.is_authenticated else CLOSE_UNAUTHENTICATED
            )
            return
        conversation, role, first_page = opened
        if not await self.hold_slot(user):
            return  # closed with 4429: the person has as many sockets open as they may
        self.held = revocation.hold(
            user_id=user.pk,
            workspace_id=conversation.workspace_id,
            role=role,
            revoke=self.revoked,
            **revocation.credentials(self.scope),
        )
        try:
            if bad_query is not None:
                raise bad_query
            check_seq_within(from_seq, conversation.last_seq)
        except ApplicationError as error:
            await self.refuse(error)
            return
        self.feed.prime(first_page)
        await self.send_json(
            {
                "type": "ws.ready",
                "conversation": self.conversation_id,
                "latest_seq": conversation.last_seq,
                "in_flight": conversation.active_turn_id is not None,
                "turn": conversation.active_turn_id,
                "status": conversation.active_turn_status,
                "role": role,
            }
        )
        self.ready = True
        self.start_pump()
        if self.presence_waiting is not None:
            text, self.presence_waiting = self.presence_waiting, None
            await self._send_texts([text])

    async def _open_trip(self, *, watch: bool):
        opened = await run_db(self._open, watch)
        if opened is None:
            return None
        conversation, role, first_page, self.watcher_id = opened  # kept, even if cancelled
        return conversation, role, first_page

    def _open(self, watch: bool):
        """The person (see core.auth), then what they may see of the conversation with its
        state, the replay's first page, and (if ``watch``) their watcher row's id; None for no
        one, a stranger or an unknown id."""
        authenticate(self.scope)
        user = self.scope["user"]
        if not user.is_authenticated:
            return None
        try:
            # The access rule every way in asks (its reads compiled once: core.prepared).
            conversation, membership = conversation_access(
                user=user, conversation_id=self.conversation_id
            )
        except ApplicationError:
            return None
        if self.feed.last_seq >= conversation.last_seq:
            # Nothing to replay (or refused: from_seq is past the latest event). Events
            # committed since the read come live.
            first_page = []
        else:
            first_page = self.feed.read_first_page()
        watcher_id = None
        if watch and self.feed.last_seq <= conversation.last_seq:
            watcher_id = services.watcher_add(
                conversation_id=self.conversation_id, user=user, process=process_id()
            ).pk
        return conversation, membership.role, first_page, watcher_id

    def revoked(self, kind: str) -> None:
        """The person lost access (see conversations.revocation): nothing more is sent, and the
        socket closes (4403 removed, 4409 role lowered, 4401 its API token revoked or expired, or
        its session signed out or its password changed)."""
        if self.pump is not None:
            self.pump.cancel()
        code = {
            revocation.REMOVED: CLOSE_FORBIDDEN,
            revocation.TOKEN_ENDED: CLOSE_UNAUTHENTICATED,
            revocation.SIGNED_OUT: CLOSE_UNAUTHENTICATED,
        }.get(kind, CLOSE_ACCESS_CHANGED)
        self.closing = asyncio.get_running_loop().create_task(self.close(code=code))

    async def clean_up(self):
        _open_sockets.discard(self)
        revocation.let_go(self.held)
        if self.counted:
            self.counted = False
            SOCKETS_OPEN.dec()
        if self.pump is not None:
            self.pump.cancel()
        try:
            if self.feed is not None:
                await self.feed.__aexit__(None, None, None)
        finally:
            if self.watcher_id is not None:
                watcher_id, self.watcher_id = self.watcher_id, None
                await run_db(
                    services.watcher_remove,
                    watcher_id=watcher_id,
                    conversation_id=self.conversation_id,
                )

    async def send_presence(self, text: str) -> None:
        """Who is watching now (for sockets opened with ``presence=1``), once ws.ready has gone
        (the latest kept until then)."""
        if not self.ready:
            self.presence_waiting = text
            return
        await self._send_texts([text])

    async def refuse(self, error: ApplicationError) -> None:
        await self.send_json({"type": "ws.error", "ref": None, **error.as_dict()})
        await self.close(code=CLOSE_BAD_REQUEST)

    def start_pump(self) -> None:
        if self.pump is not None:
            self.pump.cancel()
        self.pump = asyncio.get_running_loop().create_task(self._pump())

    async def _pump(self) -> None:
        try:
            while True:
                frames = await self.feed.next_batch()
                if not await self._send_frames(frames):
                    return
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("Feed of %s broke down", self.conversation_id)
            await self.close(code=1011)

    async def _send_frames(self, frames) -> bool:
        """Send events to the client, a slice at a time; False if the client has gone (its
        disconnect is on the way, and ends this socket's feed) or has fallen behind.

        While the socket's write buffer is full nothing more is sent: the feed is not read
        meanwhile, and catches up from the database once the client has. A socket whose buffer
        stays full for ``PARLEY_SOCKET_STALL_SECONDS`` is closed with 4408."""
        flow = self.scope.get("parley.flow")
        for start in range(0, len(frames), PUMP_YIELD_EVERY):
            if start:
                # Let the reactor write to the network and the turn go on meanwhile.
                await asyncio.sleep(0)
            chunk = frames[start : start + PUMP_YIELD_EVERY]
            if flow is not None:
                if flow.full and not await flow.drained(settings.PARLEY_SOCKET_STALL_SECONDS):
                    await self._close_behind(flow)
                    return False
                if flow.write(chunk):
                    continue
            # No flow (another server than Daphne), or a socket it cannot write to directly.
            if not await self._send_texts(frame.text for frame in chunk):
                return False
        return True

    async def _send_texts(self, texts) -> bool:
        """Send frames (already encoded text) through the server, one by one; False if the
        client has gone."""
        send = self.base_send
        try:
            for text in texts:
                await send({"type": "websocket.send", "text": text})
        except asyncio.CancelledError:
            raise
        except Exception as error:
            logger.info("Socket on %s went away mid-send: %s", self.conversation_id, error)
            return False
        return True

    async def _close_behind(self, flow) -> None:
        logger.info(
            "Socket on %s closed with 4408: its buffer stayed full for %.0f s",
            self.conversation_id,
            settings.PARLEY_SOCKET_STALL_SECONDS,
        )
        SOCKETS_BEHIND.inc()
        flow.close_patiently(CLOSE_PATIENCE_SECONDS)
        await self.close(code=CLOSE_BEHIND)

    # Frame handlers: each gets its frame checked (see frame_fields and GuardedConsumer), checks
    # access, calls a service, and returns what the ack carries.

    async def frame_turn_start(self, frame: dict) -> dict:
        options = {name: frame[name] for name in ("interactive", "confirm_writes")}
        turn, started = await run_db(self._turn_start, frame["input"], options)
        return {"turn": turn.pk, "seq": started.seq}

    def _turn_start(self, text, options: dict):
        conversation = self._conversation_to_act_on("start turns")
        # The same rate as REST's (PARLEY_TURN_RATE): past it, a ws.error and nothing written.
        rate_check("turns", self.scope["user"])
        return services.turn_start(
            conversation=conversation, user=self.scope["user"], input=text, **options
        )

    async def frame_resume(self, frame: dict) -> dict:
        from_seq = frame["from_seq"]
        # Checked again: a replay is for members only, and access may have gone meanwhile.
        conversation, _ = await run_db(
            conversation_access, user=self.scope["user"], conversation_id=self.conversation_id
        )
        check_seq_within(from_seq, conversation.last_seq)
        self.feed.rewind(from_seq)
        self.start_pump()
        return {"from_seq": from_seq, "latest_seq": conversation.last_seq}

    async def frame_turn_steer(self, frame: dict) -> dict:
        steered = await run_db(self._turn_steer, frame["expected_turn_id"], frame["input"])
        return {"turn": steered.turn_id, "seq": steered.seq}

    def _turn_steer(self, expected_turn_id: str, text: str):
        conversation = self._conversation_to_act_on("steer turns")
        return services.turn_steer(
            conversation=conversation,
            user=self.scope["user"],
            expected_turn_id=expected_turn_id,
            input=text,
        )

    async def frame_turn_cancel(self, frame: dict) -> dict:
        turn = await run_db(self._turn_cancel, frame["turn_id"])
        return {"turn": turn.pk, "status": turn.status}

    def _turn_cancel(self, turn_id: str):
        conversation = self._conversation_to_act_on("stop turns")
        return services.turn_cancel(
            conversation=conversation, user=self.scope["user"], turn_id=turn_id
        )

    async def frame_selection_reply(self, frame: dict) -> dict:
        if ("answer" in frame) == ("action" in frame):
            raise ApplicationError("invalid", "Send either an answer or an action.")
        return await run_db(self._selection_reply, frame)

    def _selection_reply(self, frame: dict) -> dict:
        return hooks.questions.get().reply(
            user=self.scope["user"],
            conversation_id=self.conversation_id,
            selection_id=frame["selection_id"],
            answer=frame.get("answer"),
            action=frame.get("action"),
        )

    def _conversation_to_act_on(self, doing: str):
        # Checked again for every action: a role can change while a socket stays open.
        conversation, _ = conversation_access(
            user=self.scope["user"], conversation_id=self.conversation_id, act=True, doing=doing
        )
        return conversation

    frame_handlers = {
        "turn.start": frame_turn_start,
        "turn.steer": frame_turn_steer,
        "turn.cancel": frame_turn_cancel,
        "selection.reply": frame_selection_reply,
        "resume": frame_resume,
    }
    # What each frame carries, checked before its handler runs (other fields are ignored).
    frame_fields = {
        "turn.start": {"input": string, "interactive": flag, "confirm_writes": flag},
        "turn.steer": {"expected_turn_id": identifier, "input": string},
        "turn.cancel": {"turn_id": identifier},
        "selection.reply": {
            "selection_id": identifier,
            "answer": anything,
            "action": optional_string,
        },
        "resume": {"from_seq": _seq},
    }
