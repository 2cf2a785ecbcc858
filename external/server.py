"""Parley's MCP server: outside agents (Claude Code, Codex CLI, Cursor, a script) ask the team
through Parley, over MCP's Streamable HTTP at ``/mcp/``, served by the same ASGI application.

Built on the official ``mcp`` SDK's low-level server and its Streamable HTTP session manager
(stateful sessions, each a task on the server loop). Every request must carry a Parley API token
(``Authorization: Bearer <token>``, as MCP clients send it, or ``Token <token>``); without a
valid one it is answered 401 before any MCP message is read (a wrong, revoked or expired one
counts as a failed sign-in from the caller's address, and an address locked out is answered
429: core.lockout), and a session answers only the person who opened it. A session follows the
token that opened it: revoked, the call waiting ends and every later call is refused (see
external.sessions). A person may have
PARLEY_MAX_MCP_SESSIONS_PER_PERSON sessions open (over every process), and opening one counts as
starting a turn (PARLEY_TURN_RATE): past either, the request that would open it is answered 429
with Retry-After.

A session works in one conversation (named by the first tool call that needs one, or created
then, titled after the client): its activity is a turn of the ``external`` agent (see
external.agent), which streams to everyone watching, asks the team, takes steering and is
stopped like any other turn. The session ending (the client's DELETE, or
PARLEY_MCP_IDLE_TIMEOUT_SECONDS with no request in flight) cuts short the calls still waiting;
questions asked as tasks outlive it (see external.agent), and the turn ends with the last.
"""

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator

import anyio
import orjson
from django.conf import settings
from mcp import types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import McpError

from core import slots
from core.dbthreads import run_db
from core.errors import ApplicationError, too_many
from core.lockout import LockedOut, attempt_from_scope, key_from, token_for
from core.process import server_loop
from core.throttles import rate_check

from . import tasks
from .agent import LinkEnded
from .sessions import Refused, Session, stopped_message
from .tools import (
    HANDLERS,
    INSTRUCTIONS,
    TOOLS,
    answer_text,
    argument_error,
    task_model,
    tool_result,
    with_steering,
)


class _ClosedStreamFilter(logging.Filter):
    """The SDK logs at ERROR a stream found closed as the client ends its session (its DELETE
    racing the open GET stream): that is a session ending normally, not a server error."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return error is None or not _only_closed_streams(error)


def _only_closed_streams(error: BaseException) -> bool:
    """Whether ``error`` is a closed stream, or a group of nothing else (a request's message
    handed to a session its DELETE had just closed)."""
    if isinstance(error, BaseExceptionGroup):
        return all(_only_closed_streams(inner) for inner in error.exceptions)
    return isinstance(error, anyio.ClosedResourceError)


logging.getLogger("mcp.server.streamable_http").addFilter(_ClosedStreamFilter())
logger = logging.getLogger(__name__)


# The server ----------------------------------------------------------------------------------


# The slot (see core.slots) of the request that opens a session, handed to the session it opens
# (its task inherits the request's context): a one-item list, taken by whichever of the two
# ends first with it.
_opening_slot: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "parley_mcp_opening_slot", default=None
)


@contextlib.asynccontextmanager
async def _session_lifespan(_server) -> AsyncIterator[Session]:
    """One per MCP session: its end (DELETE, idle timeout, the process stopping) ends the
    session's turn, and gives back its place among its person's sessions."""
    holder = _opening_slot.get()
    slot = holder.pop() if holder else None
    session = Session()
    try:
        yield session
    finally:
        session.end()
        if slot is not None:
            await asyncio.shield(slot.release())


server: Server = Server(
    "parley", version="1", instructions=INSTRUCTIONS, lifespan=_session_lifespan
)


@server.list_tools()
async def _list_tools() -> list[types.Tool]:
    return TOOLS


@server.call_tool(validate_input=False)
async def _call_tool(name: str, arguments: dict):
    context = server.request_context
    session: Session = context.lifespan_context
    session.know(context)
    if (error := argument_error(name, arguments)) is not None:
        return tool_result({"error": error}, error, error=True)
    try:
        try:
            return await HANDLERS[name](session, arguments, context)
        except LinkEnded:
            session.check_access()
            structured = tasks.stopped_result(await stopped_message(session.turn_id))
            return tool_result(structured, answer_text(structured))
    except Refused as exc:
        return tool_result({"error": str(exc)}, str(exc), error=True)


async def _user_task(task_id: str):
    user = server.request_context.request.scope["parley.user"]
    task = await run_db(tasks.task_view, user=user, task_id=task_id)
    if task is None:
        raise McpError(types.ErrorData(code=types.INVALID_PARAMS, message=f"No task {task_id}."))
    return task


@server.experimental.get_task()
async def _get_task(request: types.GetTaskRequest) -> types.GetTaskResult:
    task = await _user_task(request.params.taskId)
    return types.GetTaskResult(**task_model(task).model_dump())


@server.experimental.get_task_result()
async def _get_task_result(request: types.GetTaskPayloadRequest) -> types.GetTaskPayloadResult:
    """The task's result, waiting for it if it is still working (as the protocol says)."""
    task_id = request.params.taskId
    task = await _user_task(task_id)
    while task.status == "working":
        await asyncio.sleep(settings.PARLEY_SELECTION_POLL_SECONDS)
        task = await _user_task(task_id)
    if task.status == "cancelled" and task.result is None:
        structured = {"status": "cancelled", "question": task.selection_id}
        result = tool_result(structured, "You cancelled this question.")
    elif task.status == "failed":
        result = tool_result(task.result, task.result.get("error", "It failed."), error=True)
    else:
        result = with_steering(task.result, answer_text(task.result))
    return types.GetTaskPayloadResult(**result.model_dump(by_alias=True, exclude_none=True))


@server.experimental.list_tasks()
async def _list_tasks(request: types.ListTasksRequest) -> types.ListTasksResult:
    user = server.request_context.request.scope["parley.user"]
    found = await run_db(tasks.tasks_of, user=user)
    return types.ListTasksResult(tasks=[task_model(task) for task in found])


@server.experimental.cancel_task()
async def _cancel_task(request: types.CancelTaskRequest) -> types.CancelTaskResult:
    user = server.request_context.request.scope["parley.user"]
    task = await run_db(tasks.task_cancel, user=user, task_id=request.params.taskId)
    if task is None:
        raise McpError(
            types.ErrorData(code=types.INVALID_PARAMS, message=f"No task {request.params.taskId}.")
        )
    return types.CancelTaskResult(**task_model(task).model_dump())


# The ASGI application ------------------------------------------------------------------------


class Endpoint:
    """``/mcp/`` as an ASGI application: the token is checked, then the SDK's session manager
    serves the request. The manager runs on the server loop from the first request on."""

    def __init__(self):
        self._manager: StreamableHTTPSessionManager | None = None
        self._ready: asyncio.Future | None = None

    async def _started(self) -> StreamableHTTPSessionManager:
        if self._ready is None:
            self._ready = asyncio.get_running_loop().create_future()
            self._manager = StreamableHTTPSessionManager(
                app=server,
                session_idle_timeout=settings.PARLEY_MCP_IDLE_TIMEOUT_SECONDS,
            )
            asyncio.get_running_loop().create_task(self._run(), name="parley-mcp")
            server_loop.on_shutdown(self.end_sessions)
        await asyncio.shield(self._ready)
        return self._manager

    async def end_sessions(self) -> None:
        """At SIGTERM (after the turns were handed back): end every MCP session this process
        holds, as a DELETE would, so that their streams finish cleanly instead of being cut
        off when the process stops. A client's next request with the session is answered 404,
        upon which it opens a new session, through the balancer, on a process that is not
        stopping; questions asked as tasks outlive their session (see Session.end)."""
        # The SDK's manager keeps its sessions' transports here and offers no public list.
        transports = list(self._manager._server_instances.values())
        for transport in transports:
            await transport.terminate()
        if transports:
            logger.info("Ended %d MCP session(s) for the restart", len(transports))

    async def _run(self) -> None:
        async with self._manager.run():
            self._ready.set_result(None)
            await asyncio.Event().wait()

    async def __call__(self, scope, receive, send) -> None:
        try:
            user, key, token_id = await _authenticate(scope)
        except LockedOut as locked:
            await _refuse(send, locked)
            return
        if user is None:
            await _unauthorized(send)
            return
        access = AccessToken(
            token=key, client_id=str(user.pk), scopes=[], subject=user.get_username()
        )
        scope = {
            **scope,
            "user": AuthenticatedUser(access),
            "parley.user": user,
            "parley.token_id": token_id,
        }
        opening = scope["method"] == "POST" and not any(
            name == b"mcp-session-id" for name, _ in scope.get("headers", [])
        )
        if opening and server_loop.draining:
            # A new session here would be ended in moments: the balancer, seeing this 503
            # before anything was done, sends the request to another process.
            await _refuse(send, SHUTTING_DOWN, [(b"retry-after", b"1")])
            return
        manager = await self._started()
        holder = None
        if opening:
            # A POST without a session opens one: one of the person's open sessions
            # (PARLEY_MAX_MCP_SESSIONS_PER_PERSON) and a turn started (PARLEY_TURN_RATE), or
            # refused with 429.
            slot = await slots.acquire(slots.MCP_SESSIONS, user.pk)
            try:
                if slot is None:
                    raise too_many(
                        "too_many_sessions",
                        f"You have {slots.limit(slots.MCP_SESSIONS)} MCP sessions open, as many "
                        "as you may; end one (DELETE) first.",
                        retry_after=slots.RETRY_AFTER_SECONDS,
                    )
                await run_db(rate_check, "turns", user)
            except ApplicationError as refusal:
                if slot is not None:
                    await slot.release()
                await _refuse(send, refusal)
                return
            holder = [slot]
            _opening_slot.set(holder)
        try:
            await manager.handle_request(scope, receive, _no_answer_when_cancelled(send))
        finally:
            if holder:
                # No session took it (the request was refused, or failed).
                await asyncio.shield(holder.pop().release())


def _no_answer_when_cancelled(send):
    """``send``, less the answer the SDK (1.x: RequestResponder.cancel) sends to a request the
    client cancelled (``notifications/cancelled``): the protocol says a cancelled request gets
    no response, and clients log this one as an unknown message id. That answer is the last
    event of its request's stream, which then ends without it."""

    async def sending(message) -> None:
        if message["type"] == "http.response.body" and _is_cancelled_answer(
            message.get("body", b"")
        ):
            return
        await send(message)

    return sending


def _is_cancelled_answer(body: bytes) -> bool:
    if b'"Request cancelled"' not in body:
        return False
    for line in body.splitlines():
        if line.startswith(b"data:"):
            try:
                message = orjson.loads(line[5:])
            except orjson.JSONDecodeError:
                return False
            error = message.get("error") if isinstance(message, dict) else None
            return (
                isinstance(error, dict)
                and error.get("code") == 0
                and error.get("message") == "Request cancelled"
            )
    return False


def _token_from(scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            return key_from(value.decode("latin-1"))
    return None


async def _authenticate(scope):
    """The caller's user, key and token id; Nones without a working token. A wrong, revoked or
    expired key counts as a failed sign-in from the caller's address; raises LockedOut for an
    address locked out."""
    key = _token_from(scope)
    if key is None:
        return None, None, None
    found = await run_db(_token_user, scope, key)
    return (found[0], key, found[1]) if found is not None else (None, None, None)


def _token_user(scope, key: str):
    """The token's user and id (core.lockout's look-up, under the login locks)."""
    found = token_for(attempt_from_scope(scope), key)
    return (found[0], found[1].pk) if found is not None else None


SHUTTING_DOWN = ApplicationError(
    "shutting_down", "This process is stopping: open your session again.", status=503
)


async def _unauthorized(send) -> None:
    refusal = ApplicationError(
        "not_authenticated",
        "Send your Parley API token: Authorization: Bearer <token>.",
        status=401,
    )
    await _refuse(send, refusal, [(b"www-authenticate", b'Bearer realm="parley"')])


async def _refuse(send, refusal: ApplicationError, headers=()) -> None:
    """Answer with the API's error shape (and Retry-After for a 429)."""
    body = orjson.dumps({"error": refusal.as_dict()})
    headers = [
        (b"content-type", b"application/json"),
        *headers,
        (b"content-length", str(len(body)).encode()),
    ]
    if refusal.retry_after is not None:
        headers.append((b"retry-after", str(refusal.retry_after).encode()))
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


endpoint = Endpoint()
