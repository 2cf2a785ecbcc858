"""Tailing a conversation as Server-Sent Events: replay from a seq, follow live until the turn
that was active ends, then ``event: done``."""

from django.conf import settings
from django.http import StreamingHttpResponse

from . import revocation, selectors
from .events import encode
from .feed import ConversationFeed
from .models import Membership


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


async def tail_stream(
    *,
    conversation_id: str,
    after_seq: int,
    end_seq: int,
    follow_turn_id: str | None,
    membership=None,
    first_page: list | None = None,
):
    """Events after ``after_seq``: up to ``end_seq`` when no turn is active, else until the
    active turn's terminal event; then ``done`` with the last seq sent. With ``membership``
    (the reader's), the tail ends with an ``error`` event instead should the reader lose access
    to the workspace meanwhile (see conversations.revocation)."""
    keepalive = settings.PARLEY_SSE_KEEPALIVE_SECONDS
    sent = after_seq
    feed = ConversationFeed(conversation_id, after_seq)
    if first_page is not None:
        feed.prime(first_page, read_before_subscribing=True)
    held = None
    if membership is not None:
        # Held as a viewer's: a lowered role still reads, only a removal ends the tail.
        held = revocation.hold(
            user_id=membership.user_id,
            workspace_id=membership.workspace_id,
            role=Membership.Role.VIEWER,
            revoke=lambda kind: feed.interrupt(),
        )
    try:
        async with feed:
            yield ": connected\n\n"
            while follow_turn_id is not None or sent < end_seq:
                frames = await feed.next_batch(timeout=keepalive)
                if feed.interrupted:
                    break
                if not frames:
                    yield ": keep-alive\n\n"
                    continue
                chunk = []
                for frame in frames:
                    if follow_turn_id is None and frame.seq > end_seq:
                        break
                    chunk.append(sse_frame(frame.text, id=frame.seq))
                    sent = frame.seq
                    if frame.is_terminal and frame.turn_id == follow_turn_id:
                        follow_turn_id, end_seq = None, sent
                        break
                yield "".join(chunk)
    finally:
        revocation.let_go(held)
    if feed.interrupted:
        yield sse_frame(encode({"error": REVOKED}), event="error")
    else:
        yield sse_frame(encode({"latest_seq": sent}), event="done")


def tail_response(conversation, *, after_seq: int, membership=None) -> StreamingHttpResponse:
    """The SSE response for a conversation read with its active turn (see selectors), for the
    reader whose ``membership`` it is (the tail ends should they lose it). Called where the
    database may be read (a database thread): the replay's first page is read with it, so that
    the first events go out with the response's first bytes."""
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
            first_page=first_page,
        ),
        content_type="text/event-stream",
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # tell nginx not to buffer the stream
    return response
