"""Parley's MCP server: outside agents (Claude Code, Codex CLI, Cursor, a script) ask the team
through Parley, over MCP's Streamable HTTP at ``/mcp/``, served by the same ASGI application.

Built on the official ``mcp`` SDK's low-level server and its Streamable HTTP session manager
(stateful sessions, each a task on the server loop). Every request must carry a Parley API token
(``Authorization: Bearer <token>``, as MCP clients send it, or ``Token <token>``); without a
valid one it is answered 401 before any MCP message is read, and a session answers only the
person who opened it.

A session works in one conversation (named by the first tool call that needs one, or created
then, titled after the client): its activity is a turn of the ``external`` agent (see
external.agent), which streams to everyone watching, asks the team, takes steering and is
stopped like any other turn. The session ending (the client's DELETE, or
PARLEY_MCP_IDLE_TIMEOUT_SECONDS with no request in flight) ends the turn.
"""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from datetime import UTC

import anyio
import orjson
from django.conf import settings
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from mcp import types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import McpError
from rest_framework.authtoken.models import Token

from conversations.access import conversation_access, workspace_access
from conversations.models import Membership, Turn
from conversations.selectors import acting_member, conversations_for_user
from conversations.services import conversation_create, turn_start
from core.dbthreads import run_db
from core.errors import ApplicationError
from core.process import server_loop
from selection.models import Selection, new_selection_id
from selection.validation import clean_question

from . import tasks
from .agent import LinkEnded, link_open

logger = logging.getLogger(__name__)


class _ClosedStreamFilter(logging.Filter):
    """The SDK logs at ERROR a stream found closed as the client ends its session (its DELETE
    racing the open GET stream): that is a session ending normally, not a server error."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, anyio.ClosedResourceError)


logging.getLogger("mcp.server.streamable_http").addFilter(_ClosedStreamFilter())

INSTRUCTIONS = (
    "Parley is where your team works with agents. Use `ask` whenever you need a person: a file "
    "or folder, a choice, a typed answer, a go-ahead, or a small form. The team sees your "
    "question live and answers it; you get the answer (or that it was dismissed, declined, "
    "expired or cancelled). Use `post` to tell the team what you are doing. If a result says "
    "the team stopped you, stop that work. A result may carry `steering`: what people added "
    "while you worked; take it into account."
)

_OPTION = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "description": "What people see."},
        "value": {"type": "string", "description": "What you get back (the label if omitted)."},
        "description": {"type": "string", "description": "A line of detail under the label."},
    },
    "required": ["label"],
}
_CONVERSATION = {
    "type": "string",
    "description": "The conversation to work in (an id from list_conversations). Only the "
    "session's first call that names one counts; without one, the session creates a "
    "conversation titled after your client.",
}
_WORKSPACE = {
    "type": "string",
    "description": "The workspace (slug) to create the session's conversation in, when none is "
    "named; by default the first you may act in.",
}

ASK = types.Tool(
    name="ask",
    title="Ask the team",
    description=(
        "Ask the people on your team something and wait for the answer. kind: 'path' (a file "
        "or folder inside the workspace's files: mode file, folder or any; root), 'choice' "
        "(options; multiple; allow_freeform), 'text', 'confirm' (answer is true or false) or "
        "'form' (schema: a flat JSON schema of string, number, integer and boolean fields). "
        "addressee: a username who must answer (or an owner). timeout: seconds before the "
        "question expires. escalate: call on the workspace's owners if nobody answers near "
        "the end of its time. The result's status is answered (see answer), dismissed, declined, "
        "expired or cancelled."
    ),
    inputSchema={
        "type": "object",
        "properties": {
            "kind": {"type": "string", "enum": list(Selection.Kind.values)},
            "prompt": {"type": "string", "minLength": 1},
            "options": {"type": "array", "items": _OPTION, "minItems": 1},
            "multiple": {"type": "boolean"},
            "allow_freeform": {"type": "boolean"},
            "min_choices": {"type": "integer", "minimum": 0},
            "max_choices": {"type": "integer", "minimum": 1},
            "mode": {"type": "string", "enum": list(Selection.Mode.values)},
            "root": {"type": "string"},
            "schema": {"type": "object"},
            "addressee": {"type": "string"},
            "timeout": {"type": "number", "exclusiveMinimum": 0},
            "escalate": {"type": "boolean"},
            "conversation": _CONVERSATION,
            "workspace": _WORKSPACE,
        },
        "required": ["kind", "prompt"],
        "additionalProperties": False,
    },
    execution=types.ToolExecution(taskSupport="optional"),
)
POST = types.Tool(
    name="post",
    title="Tell the team",
    description="Say something in the conversation (shown as your message, streamed live).",
    inputSchema={
        "type": "object",
        "properties": {
            "text": {"type": "string", "minLength": 1},
            "conversation": _CONVERSATION,
            "workspace": _WORKSPACE,
        },
        "required": ["text"],
        "additionalProperties": False,
    },
)
LIST_CONVERSATIONS = types.Tool(
    name="list_conversations",
    title="List conversations",
    description="The conversations you can see (newest first), with their workspace and "
    "whether a turn is running in them.",
    inputSchema={
        "type": "object",
        "properties": {"workspace": {"type": "string"}},
        "additionalProperties": False,
    },
)
PENDING = types.Tool(
    name="pending",
    title="Questions still open",
    description="The questions this session asked that nobody has answered yet.",
    inputSchema={"type": "object", "properties": {}, "additionalProperties": False},
)
TOOLS = [ASK, POST, LIST_CONVERSATIONS, PENDING]
QUESTION_FIELDS = (
    "options",
    "multiple",
    "allow_freeform",
    "min_choices",
    "max_choices",
    "mode",
    "root",
    "schema",
)


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
                turn, _frame = await run_db(
                    turn_start,
                    conversation=conversation,
                    user=self.user,
                    input=f"{self.client} is working here through MCP.",
                    agent="external",
                )
                self.turn_id = turn.pk
                self.link = link_open(turn.pk)
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


def _turn_with_stopper(turn_id: str | None) -> Turn | None:
    return Turn.objects.filter(pk=turn_id).select_related("cancelled_by").first()


async def _stopped_message(turn_id: str | None) -> str:
    return _stop_message(await run_db(_turn_with_stopper, turn_id))


def _stop_message(turn: Turn | None) -> str:
    if turn is not None and turn.cancel_requested_at is not None:
        who = turn.cancelled_by.get_username() if turn.cancelled_by else "someone"
        return (
            f"The team stopped this work in Parley ({who} pressed Stop). Stop what you were "
            "doing; this session takes no more questions."
        )
    return "This session's turn in Parley has ended; it takes no more questions."


def _result(structured: dict, text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structuredContent=structured,
        isError=error,
    )


def _with_steering(structured: dict, text: str) -> types.CallToolResult:
    if steering := structured.get("steering"):
        text += "\nThe team added, while you worked: " + " / ".join(steering)
    return _result(structured, text)


def answer_text(result: dict) -> str:
    status = result["status"]
    if result.get("stopped"):
        return result["message"]
    if status == "answered":
        answer = orjson.dumps(result["answer"]).decode()
        return f"{result['answered_by']} answered: {answer}"
    return {
        "dismissed": "The question was dismissed: nobody will answer it. Go on without it.",
        "declined": "The team declined.",
        "expired": "Nobody answered before the question expired.",
        "cancelled": "The question was cancelled.",
        "unavailable": "Nobody can answer questions in this turn.",
        "limit_reached": "This turn has asked as many questions as it may.",
    }.get(status, status)


# The tools -----------------------------------------------------------------------------------


async def _checked_question(session: Session, arguments: dict) -> dict:
    """The question's fields, checked before anything is stored (Refused if malformed)."""
    conversation = await session.conversation_for(arguments)
    fields = {key: arguments[key] for key in QUESTION_FIELDS if key in arguments}
    try:
        clean_question(
            kind=arguments["kind"],
            prompt=arguments["prompt"],
            files_root=conversation.workspace.files_root,
            **fields,
        )
    except ValueError as exc:
        raise Refused(str(exc)) from None
    if addressee := arguments.get("addressee"):
        person = await run_db(
            acting_member, workspace_id=conversation.workspace_id, username=addressee
        )
        if person is None:
            raise Refused(f"{addressee!r} cannot answer questions in this workspace.")
    return fields


async def _ask(session: Session, arguments: dict, context):
    fields = await _checked_question(session, arguments)
    link = await session.turn(arguments)
    selection_id = new_selection_id()
    shown = {k: v for k, v in arguments.items() if k not in ("conversation", "workspace")}

    async def work(ctx) -> dict:
        async with ctx.tool("ask", shown) as call:
            answer = await ctx.ask(
                arguments["kind"],
                arguments["prompt"],
                addressee=arguments.get("addressee"),
                timeout=arguments.get("timeout"),
                escalate=arguments.get("escalate"),
                selection_id=selection_id,
                **fields,
            )
            call.result = {"status": answer.status, "answer": answer.value}
        return tasks.question_result(
            {"status": answer.status, "answer": answer.value, "answered_by": answer.answered_by},
            selection_id=answer.selection_id,
        )

    command = link.submit(work)
    session.asked.append(selection_id)
    if context.experimental.is_task:
        return await _as_task(session, context, command, selection_id)
    try:
        structured = await _waiting(command, context)
    except asyncio.CancelledError:
        # The client cancelled its call (or the session ended): the question goes with it,
        # unless this process is stopping (questions outlive a restart).
        command.cancel()
        if not server_loop.draining:
            _in_background(
                run_db(tasks.question_cancel, selection_id=selection_id, user=session.user)
            )
        raise
    except LinkEnded:
        structured = tasks.stopped_result(await _stopped_message(session.turn_id))
    return _with_steering(structured, answer_text(structured))


async def _waiting(command, context) -> dict:
    """The command's result; meanwhile a progress notification every
    PARLEY_MCP_PROGRESS_SECONDS if the client asked for them (so that it, and any proxy on
    the way, does not give up). LinkEnded if the turn was stopped or ended first."""
    token = context.meta.progressToken if context.meta is not None else None
    every = settings.PARLEY_MCP_PROGRESS_SECONDS
    beats = 0
    while True:
        done, _ = await asyncio.wait({command.future}, timeout=every)
        if done:
            break
        beats += 1
        if token is not None:
            await context.session.send_progress_notification(
                token,
                progress=beats,
                message="Waiting for the team to answer in Parley…",
                related_request_id=context.request_id,
            )
    if command.future.cancelled():
        raise LinkEnded()
    return command.future.result()


_background: set[asyncio.Task] = set()


def _in_background(coroutine) -> None:
    task = asyncio.get_running_loop().create_task(coroutine)
    _background.add(task)
    task.add_done_callback(_background.discard)


async def _as_task(session: Session, context, command, selection_id: str):
    """A task-augmented call: answer at once with the task; its result is kept with it, in
    the database, for tasks/get and tasks/result from any session (see external.tasks)."""
    default_ttl = settings.PARLEY_MCP_TASK_TTL_SECONDS
    asked_ttl = context.experimental.task_metadata.ttl
    ttl = default_ttl if asked_ttl is None else max(1, min(asked_ttl / 1000, default_ttl))
    task_id = "task_" + selection_id.removeprefix("s_")
    task = await run_db(
        tasks.task_create,
        task_id=task_id,
        user=session.user,
        turn_id=session.turn_id,
        selection_id=selection_id,
        ttl_seconds=ttl,
    )

    async def deliver():
        try:
            structured = await asyncio.shield(command.future)
        except (asyncio.CancelledError, LinkEnded):
            turn = await run_db(_turn_with_stopper, session.turn_id)
            if turn is None or turn.cancel_requested_at is None:
                # Not stopped: this process is going away. The question stays open, and the
                # task gets what it comes to from the question itself (see external.tasks).
                return
            structured = tasks.stopped_result(_stop_message(turn))
        except Exception as exc:
            await run_db(
                tasks.task_deliver, task_id=task_id, result={"error": str(exc)}, failed=True
            )
            return
        await run_db(tasks.task_deliver, task_id=task_id, result=structured)

    _in_background(deliver())
    return types.CreateTaskResult(task=_task_model(task))


async def _post(session: Session, arguments: dict, context):
    link = await session.turn(arguments)
    text = arguments["text"]

    async def work(ctx) -> dict:
        await ctx.say(text)
        await ctx.end_message()
        return {"status": "posted"}

    try:
        structured = await _waiting(link.submit(work), context)
    except LinkEnded:
        structured = tasks.stopped_result(await _stopped_message(session.turn_id))
        return _result(structured, answer_text(structured))
    return _with_steering(structured, "Posted.")


async def _reported(session: Session, name: str, arguments: dict, context, look):
    """A look-up, shown as a tool call of the session's turn when it has one (``look`` is a
    coroutine function returning rows)."""
    link = session.link
    if link is None or link.ended.is_set():
        return await look(), []

    async def work(ctx) -> dict:
        async with ctx.tool(name, arguments) as call:
            rows = await look()
            call.result = {"count": len(rows)}
        return {"rows": rows}

    try:
        done = await _waiting(link.submit(work), context)
    except LinkEnded:
        return await look(), []
    return done["rows"], done.get("steering", [])


async def _list_conversations(session: Session, arguments: dict, context):
    async def look():
        return await run_db(
            _conversation_rows, user=session.user, workspace=arguments.get("workspace")
        )

    rows, steering = await _reported(session, "list_conversations", arguments, context, look)
    text = "\n".join(
        f"{row['id']}  {row['workspace']}  {row['title']}"
        + ("  (a turn is running)" if row["running"] else "")
        for row in rows
    )
    structured = {"conversations": rows, **({"steering": steering} if steering else {})}
    return _with_steering(structured, text or "You can see no conversation yet.")


def _conversation_rows(*, user, workspace: str | None) -> list[dict]:
    found = conversations_for_user(user=user, workspace_slug=workspace)[:100]
    return [
        {
            "id": conversation.pk,
            "title": conversation.title,
            "workspace": conversation.workspace.slug,
            "running": conversation.active_turn_id is not None,
        }
        for conversation in found
    ]


async def _pending(session: Session, arguments: dict, context):
    async def look():
        return await run_db(_pending_rows, ids=session.asked)

    rows, steering = await _reported(session, "pending", arguments, context, look)
    text = "\n".join(f"{row['id']}  {row['kind']}  {row['prompt']}" for row in rows)
    structured = {"pending": rows, **({"steering": steering} if steering else {})}
    return _with_steering(structured, text or "No question of this session is waiting.")


def _pending_rows(*, ids: list[str]) -> list[dict]:
    found = Selection.objects.filter(pk__in=ids, status=Selection.Status.PENDING).order_by(
        "created_at"
    )
    return [
        {
            "id": s.pk,
            "kind": s.kind,
            "prompt": s.prompt,
            "addressee": s.addressee.get_username() if s.addressee else None,
            "expires_at": s.expires_at.isoformat(),
            "conversation": s.conversation_id,
        }
        for s in found
    ]


HANDLERS = {
    "ask": _ask,
    "post": _post,
    "list_conversations": _list_conversations,
    "pending": _pending,
}


# The server ----------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _session_lifespan(_server) -> AsyncIterator[Session]:
    """One per MCP session: its end (DELETE, idle timeout, the process stopping) ends the
    session's turn."""
    session = Session()
    try:
        yield session
    finally:
        session.end()


server: Server = Server(
    "parley", version="1", instructions=INSTRUCTIONS, lifespan=_session_lifespan
)


@server.list_tools()
async def _list_tools() -> list[types.Tool]:
    return TOOLS


_VALIDATORS = {tool.name: Draft202012Validator(tool.inputSchema) for tool in TOOLS}


def _argument_error(name: str, arguments: dict) -> str | None:
    """What is wrong with a tool's arguments, naming the field (None if nothing is)."""
    validator = _VALIDATORS.get(name)
    if validator is None:
        return f"Unknown tool {name!r}; the tools are {', '.join(HANDLERS)}."
    error = best_match(validator.iter_errors(arguments))
    if error is None:
        return None
    where = ".".join(str(part) for part in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


@server.call_tool(validate_input=False)
async def _call_tool(name: str, arguments: dict):
    context = server.request_context
    session: Session = context.lifespan_context
    session.know(context)
    if (error := _argument_error(name, arguments)) is not None:
        return _result({"error": error}, error, error=True)
    try:
        return await HANDLERS[name](session, arguments, context)
    except Refused as exc:
        return _result({"error": str(exc)}, str(exc), error=True)
    except LinkEnded:
        structured = tasks.stopped_result(await _stopped_message(session.turn_id))
        return _result(structured, answer_text(structured))


def _task_model(task) -> types.Task:
    return types.Task(
        taskId=task.pk,
        status=task.status,
        createdAt=task.created_at.astimezone(UTC),
        lastUpdatedAt=task.updated_at.astimezone(UTC),
        ttl=round((task.expires_at - task.created_at).total_seconds() * 1000),
        pollInterval=tasks.POLL_INTERVAL_MS,
        statusMessage=_status_message(task),
    )


def _status_message(task) -> str | None:
    if task.status == "working":
        return "Waiting for the team to answer in Parley."
    if task.status == "cancelled":
        return "Cancelled by the outside agent."
    return None


async def _user_task(task_id: str):
    user = server.request_context.request.scope["parley.user"]
    task = await run_db(tasks.task_view, user=user, task_id=task_id)
    if task is None:
        raise McpError(types.ErrorData(code=types.INVALID_PARAMS, message=f"No task {task_id}."))
    return task


@server.experimental.get_task()
async def _get_task(request: types.GetTaskRequest) -> types.GetTaskResult:
    task = await _user_task(request.params.taskId)
    return types.GetTaskResult(**_task_model(task).model_dump())


@server.experimental.get_task_result()
async def _get_task_result(request: types.GetTaskPayloadRequest) -> types.GetTaskPayloadResult:
    """The task's result, waiting for it if it is still working (as the protocol says)."""
    task_id = request.params.taskId
    task = await _user_task(task_id)
    while task.status == "working":
        await asyncio.sleep(settings.PARLEY_SELECTION_POLL_SECONDS)
        task = await _user_task(task_id)
    if task.status == "cancelled":
        structured = {"status": "cancelled", "question": task.selection_id}
        result = _result(structured, "You cancelled this question.")
    elif task.status == "failed":
        result = _result(task.result, task.result.get("error", "It failed."), error=True)
    else:
        result = _with_steering(task.result, answer_text(task.result))
    return types.GetTaskPayloadResult(**result.model_dump(by_alias=True, exclude_none=True))


@server.experimental.list_tasks()
async def _list_tasks(request: types.ListTasksRequest) -> types.ListTasksResult:
    user = server.request_context.request.scope["parley.user"]
    found = await run_db(tasks.tasks_of, user=user)
    return types.ListTasksResult(tasks=[_task_model(task) for task in found])


@server.experimental.cancel_task()
async def _cancel_task(request: types.CancelTaskRequest) -> types.CancelTaskResult:
    user = server.request_context.request.scope["parley.user"]
    task = await run_db(tasks.task_cancel, user=user, task_id=request.params.taskId)
    if task is None:
        raise McpError(
            types.ErrorData(code=types.INVALID_PARAMS, message=f"No task {request.params.taskId}.")
        )
    return types.CancelTaskResult(**_task_model(task).model_dump())


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
        await asyncio.shield(self._ready)
        return self._manager

    async def _run(self) -> None:
        async with self._manager.run():
            self._ready.set_result(None)
            await asyncio.Event().wait()

    async def __call__(self, scope, receive, send) -> None:
        user, key = await _authenticate(scope)
        if user is None:
            await _unauthorized(send)
            return
        access = AccessToken(
            token=key, client_id=str(user.pk), scopes=[], subject=user.get_username()
        )
        scope = {**scope, "user": AuthenticatedUser(access), "parley.user": user}
        manager = await self._started()
        await manager.handle_request(scope, receive, send)


def _token_from(scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, key = value.decode("latin-1").partition(" ")
            if scheme.lower() in ("bearer", "token") and key.strip():
                return key.strip()
    return None


async def _authenticate(scope):
    key = _token_from(scope)
    if key is None:
        return None, None
    token = await run_db(_token_user, key)
    return (token, key) if token is not None else (None, None)


def _token_user(key: str):
    token = Token.objects.select_related("user").filter(key=key).first()
    return token.user if token is not None and token.user.is_active else None


async def _unauthorized(send) -> None:
    body = orjson.dumps(
        {
            "error": {
                "code": "not_authenticated",
                "message": "Send your Parley API token: Authorization: Bearer <token>.",
            }
        }
    )
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="parley"'),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


endpoint = Endpoint()
