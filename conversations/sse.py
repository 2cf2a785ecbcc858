"""Tailing a conversation as Server-Sent Events: replay from a seq, follow live until the turn
that was active ends, then ``event: done``; a client that stops reading costs a bounded buffer,
and its tail ends with ``event: error`` (``fell_behind``). A reconnect with nothing left to give
is answered 204, which tells an EventSource not to come back."""

import asyncio
import logging

from django.conf import settings
from django.http import HttpResponse, StreamingHttpResponse

from core.process import server_loop

from . import revocation, selectors
from .events import encode
from .feed import ConversationFeed
from .metrics import TAILS_BEHIND, TAILS_OPEN
from .models import Membership

logger = logging.getLogger(__name__)


def sse_frame(data: str, *, id: int | None = None, event: str | None = None) -> str:
    """One SSE frame. Every line of ``data`` gets its own ``data:`` field, as the format asks."""
    lines = []
    if id is not None:
        lines.append(f"id: {id}")
    if event is not None:
        lines.append(f"event: {event}")
    lines.extend(f"data: {line}" for line in data.split("\n"))
    return "\n".join(lines) + "\n\n"


REVOKED = {
    "code": "access_removed",
    "message": "Your access to this workspace was removed; the tail ends here.",
}
TOKEN_REVOKED = {
    "code": "token_revoked",
    "message": "The API token this tail was opened with was revoked or expired; the tail ends "
    "here.",
}
SIGNED_OUT = {
    "code": "signed_out",
    "message": "The browser session this tail was opened with is signed out (or its password "
    "changed); the tail ends here.",
}
FELL_BEHIND = {
    "code": "fell_behind",
    "message": "You stopped reading, so the tail ends here; reconnect with Last-Event-ID set to "
    "the last id you have, and nothing is lost.",
}
# A batch is written a slice at a time, each once the client has taken what it had: a client
# that stops reading leaves the server at most a buffer and a slice.
SLICE_FRAMES = 64
SLICE_BYTES = 64 * 1024
# How long a tail ended for falling behind leaves its client to read what it has (its buffer is
# bounded meanwhile) before the connection is dropped.
BEHIND_PATIENCE_SECONDS = 30


# Each open tail's way to end it when the process stops (see end_all_tails).
_open_tails: set = set()
# What a tail ended by its process stopping says last (a comment: an event to no client).
RESTARTING = ": restarting: reconnect with Last-Event-ID\n\n"
STOPPING = "stopping"  # why a tail ends, beside conversations.revocation's


async def end_all_tails() -> None:
    """At shutdown: end every tail cleanly, after its last whole frame and with no ``done`` (its
    turn goes on elsewhere), so that its client reconnects at once with Last-Event-ID, through
    the balancer, to a process that is not stopping, and gets the rest. Ends them before the
    process stops, which would cut them off mid-response."""
    ending = list(_open_tails)
    for end in ending:
        end()
    if ending:
        logger.info("Ended %d tail(s) for the restart", len(ending))


async def tail_stream(
    *,
    conversation_id: str,
    after_seq: int,
    end_seq: int,
    follow_turn_id: str | None,
    membership=None,
    held_with: dict | None = None,
    first_page: list | None = None,
    flow_factory=None,
    slot=None,
):
    """Events after ``after_seq``: up to ``end_seq`` when no turn is active, else until the
    active turn's terminal event; then ``done`` with the last seq sent. With ``membership``
    (the reader's), the tail ends with an ``error`` event instead should the reader lose access
    to the workspace meanwhile (see conversations.revocation), or what it was opened with
    (``held_with``, see ``revocation.request_credentials``) stop working: the API token revoked
    or expired (``token_revoked``), the browser session signed out (``signed_out``).

    With ``flow_factory`` (Daphne's, see core.streaming) nothing more is written while the
    client's buffer is full, and events are read from the database as the client takes them; a
    client whose buffer stays full for ``PARLEY_SOCKET_STALL_SECONDS`` gets an ``error``
    (``fell_behind``) and the tail ends. ``slot`` (the reader's place among their tails, see
    core.slots) is given back when the tail ends, however it ends."""
    keepalive = settings.PARLEY_SSE_KEEPALIVE_SECONDS
    # Sent with the first frame, whatever it is: a field alone in its own block is an empty
    # event to some clients (httpx-sse yields it), where EventSource would ignore it.
    retry = f"retry: {round(settings.PARLEY_SSE_RETRY_SECONDS * 1000)}\n"
    stall = settings.PARLEY_SOCKET_STALL_SECONDS
    sent = after_seq
    flow = None
    behind = False
    cut = False  # whether the client was last sent a piece of a frame
    feed = ConversationFeed(conversation_id, after_seq)
    if first_page is not None:
        feed.prime(first_page, read_before_subscribing=True)
    held = None
    ended_by = []  # why it was ended early (access lost, or the process stopping), once it is

    def revoke(kind: str) -> None:
        ended_by.append(kind)
        feed.interrupt()

    def restart() -> None:
        revoke(STOPPING)

    if membership is not None:
        # Held as a viewer's: a lowered role still reads, only a removal ends the tail.
        held = revocation.hold(
            user_id=membership.user_id,
            workspace_id=membership.workspace_id,
            role=Membership.Role.VIEWER,
            revoke=revoke,
            **(held_with or {}),
        )
    _open_tails.add(restart)
    if server_loop.draining:
        restart()  # opened in the moments before the balancer saw this process stop
    TAILS_OPEN.inc()
    try:
        if flow_factory is not None:
            flow = flow_factory()

        async def room() -> bool:
            """Whether the client has taken what it had (waiting up to the stall time)."""
            return flow is None or not flow.full or await flow.drained(stall)

        async with feed:
            yield ": connected\n\n"
            while (follow_turn_id is not None or sent < end_seq) and not behind:
                frames = await feed.next_batch(timeout=keepalive)
                if feed.interrupted:
                    break
                if not frames:
                    if not await room():
                        behind = True
                        break
                    yield ": keep-alive\n\n"
                    continue
                due = []
                for frame in frames:
                    if follow_turn_id is None and frame.seq > end_seq:
                        break
                    due.append(frame)
                    if frame.is_terminal and frame.turn_id == follow_turn_id:
                        follow_turn_id, end_seq = None, frame.seq
                        break
                for chunk, last in _slices(due):
                    if not await room():
                        behind = True
                        break
                    yield retry + chunk
                    retry = ""
                    cut = last is None
                    if not cut:
                        sent = last
    finally:
        TAILS_OPEN.dec()
        _open_tails.discard(restart)
        revocation.let_go(held)
        if flow is not None:
            flow.release()
        if slot is not None:
            await asyncio.shield(slot.release())
    if ended_by[:1] == [STOPPING]:
        # Mid-frame (``cut``), the frame's start is discarded by SSE when the stream ends:
        # nothing is added after it.
        if not cut:
            yield retry + RESTARTING
    elif feed.interrupted:
        error = {revocation.TOKEN_ENDED: TOKEN_REVOKED, revocation.SIGNED_OUT: SIGNED_OUT}.get(
            ended_by[0] if ended_by else None, REVOKED
        )
        yield retry + sse_frame(encode({"error": error}), event="error")
    elif behind:
        TAILS_BEHIND.inc()
        logger.info(
            "Tail of %s ended (fell_behind): its buffer stayed full for %.0f s",
            conversation_id,
            stall,
        )
        flow.drop_unless_read(BEHIND_PATIENCE_SECONDS)
        # Mid-frame (``cut``), the client is left the frame's start, which SSE discards when the
        # stream ends; nothing is added after it.
        if not cut:
            error = {**FELL_BEHIND, "last_event_id": sent}
            yield retry + sse_frame(encode({"error": error}), event="error")
    else:
        # With an id, so that an EventSource that reconnects (it does, unless closed) sends it as
        # Last-Event-ID, even when no event came before it, and is answered 204.
        yield retry + sse_frame(encode({"latest_seq": sent}), id=sent, event="done")


def _slices(frames: list):
    """The frames as SSE text, in slices of at most SLICE_FRAMES frames or about SLICE_BYTES,
    each with the seq of its last frame; a frame larger than that alone, in pieces, the seq with
    the last piece only (None with the others)."""
    chunk, size, seq = [], 0, None
    for frame in frames:
        text = frame.text
        if len(text) > SLICE_BYTES and "\n" not in text:
            if chunk:
                yield "".join(chunk), seq
                chunk, size = [], 0
            # An event's data is one line of JSON: written in pieces, it is one frame still.
            yield f"id: {frame.seq}\ndata: ", None
            for start in range(0, len(text), SLICE_BYTES):
                yield text[start : start + SLICE_BYTES], None
            yield "\n\n", frame.seq
            continue
        chunk.append(sse_frame(text, id=frame.seq))
        seq = frame.seq
        size += len(chunk[-1])
        if len(chunk) >= SLICE_FRAMES or size >= SLICE_BYTES:
            yield "".join(chunk), seq
            chunk, size = [], 0
    if chunk:
        yield "".join(chunk), seq


def tail_finished(conversation, *, after_seq: int) -> bool:
    """Whether a tail resumed after ``after_seq`` (a reconnect's Last-Event-ID) has nothing to
    give: no event stored after it and no turn running. A turn started since is not finished:
    its events are after ``after_seq``, and the tail gives them, to that turn's end."""
    return conversation.active_turn_id is None and after_seq >= conversation.last_seq


def tail_finished_response() -> HttpResponse:
    """204 No Content: every EventSource stops reconnecting on it (WHATWG HTML, 9.2)."""
    response = HttpResponse(status=204)
    del response["Content-Type"]  # no body, so no type
    response["Cache-Control"] = "no-cache"
    return response


def tail_response(
    conversation,
    *,
    after_seq: int,
    membership=None,
    held_with: dict | None = None,
    flow_factory=None,
    slot=None,
) -> StreamingHttpResponse:
    """The SSE response for a conversation read with its active turn (see selectors), for the
    reader whose ``membership`` it is (the tail ends should they lose it, or should what it was
    opened with, ``held_with``, stop working), holding ``slot`` (see tail_stream).
    Called where the database may be read (a database thread): the replay's first page is read
    with it, so that the first events go out with the response's first bytes."""
    first_page = selectors.event_frames_after(
        conversation_id=conversation.pk, after_seq=after_seq, limit=ConversationFeed.FIRST_PAGE
    )
    response = StreamingHttpResponse(
        tail_stream(
            conversation_id=conversation.pk,
            after_seq=after_seq,
            end_seq=conversation.last_seq,
            follow_turn_id=conversation.active_turn_id,
            membership=membership,
            held_with=held_with,
            first_page=first_page,
            flow_factory=flow_factory,
            slot=slot,
        ),
        content_type="text/event-stream",
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # tell nginx not to buffer the stream
    return response
