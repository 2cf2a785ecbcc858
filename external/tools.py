"""The tools an outside agent calls over MCP (ask, post, list_conversations, pending), their
schemas (``ask``'s derived from the question kinds' definition, as the model's ask_* tools are)
and what each answers."""

import asyncio
from datetime import UTC

import orjson
from django.conf import settings
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from mcp import types

from conversations.questions import (
    COMMON,
    FIELDS,
    ask_description,
    ask_schema,
    clean_question,
    new_selection_id,
)
from conversations.selectors import acting_member, conversations_for_user
from core.dbthreads import run_db
from core.process import server_loop
from selection.models import Selection

from . import tasks
from .agent import LinkEnded, in_background, whole
from .sessions import Refused, Session, stop_message, stopped_message, turn_with_stopper

INSTRUCTIONS = (
    "Parley is where your team works with agents. Use `ask` whenever you need a person: a file "
    "or folder, a choice, a typed answer, a go-ahead, or a small form. The team sees your "
    "question live and answers it; you get the answer (or that it was dismissed, declined, "
    "expired or cancelled). Use `post` to tell the team what you are doing. If a result says "
    "the team stopped you, stop that work. A result may carry `steering`: what people added "
    "while you worked; take it into account."
)

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
    # Derived from the question kinds' definition (conversations.questions), as the model's
    # ask_* tools are.
    description=ask_description(),
    inputSchema=ask_schema(conversation=_CONVERSATION, workspace=_WORKSPACE),
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
# The fields of a question's kinds (the common ones, addressee, timeout and escalate, are
# handed to ctx.ask by name).
QUESTION_FIELDS = tuple(name for name in FIELDS if name not in {f.name for f in COMMON})


def tool_result(structured: dict, text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structuredContent=structured,
        isError=error,
    )


def with_steering(structured: dict, text: str) -> types.CallToolResult:
    if steering := structured.get("steering"):
        text += "\nThe team added, while you worked: " + " / ".join(steering)
    return tool_result(structured, text)


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
        "rate_limited": "You have asked too many questions of late (PARLEY_QUESTION_RATE); "
        "none was asked. Wait before asking again.",
    }.get(status, status)


# The tools -----------------------------------------------------------------------------------


async def _checked_question(session: Session, arguments: dict) -> dict:
    """The question's fields, checked before anything is stored (Refused if malformed, or if
    the person may not ask there)."""
    workspace = await session.workspace_for(arguments)
    fields = {key: arguments[key] for key in QUESTION_FIELDS if key in arguments}
    try:
        clean_question(
            kind=arguments["kind"],
            prompt=arguments["prompt"],
            files_root=workspace.files_root,
            **fields,
        )
    except ValueError as exc:
        raise Refused(str(exc)) from None
    if addressee := arguments.get("addressee"):
        person = await run_db(acting_member, workspace_id=workspace.pk, username=addressee)
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

    async def cut() -> bool:
        # Cancelled first, so that its selection.resolved comes before the tool's end; False
        # if it is not stored yet (the command is then cancelled).
        cancelled = await run_db(
            tasks.question_cancel, selection_id=selection_id, user=session.user
        )
        return cancelled is not None

    ttl = _task_ttl(context) if context.experimental.is_task else None
    command = link.submit(work, ttl=ttl, cut=cut)
    session.asked.append(selection_id)
    if ttl is not None:
        # Kept once submitted, whatever becomes of this request or its session meanwhile.
        return await whole(_as_task(session, command, selection_id, ttl))
    try:
        structured = await _waiting(command, context)
    except asyncio.CancelledError:
        # The client cancelled its call (or the session ended): the question goes with it,
        # unless this process is stopping (questions outlive a restart).
        if server_loop.draining:
            command.cancel()
        else:
            in_background(command.cut())
        raise
    except LinkEnded:
        session.check_access()
        structured = tasks.stopped_result(await stopped_message(session.turn_id))
    return with_steering(structured, answer_text(structured))


def _task_ttl(context) -> float:
    """The task's ttl in seconds: the one asked for, at most PARLEY_MCP_TASK_TTL_SECONDS."""
    longest = settings.PARLEY_MCP_TASK_TTL_SECONDS
    asked = context.experimental.task_metadata.ttl
    return longest if asked is None else max(1, min(asked / 1000, longest))


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


async def _as_task(session: Session, command, selection_id: str, ttl: float):
    """A task-augmented call: answer at once with the task; its result is kept with it, in
    the database, for tasks/get and tasks/result from any session (see external.tasks). The
    task outlives its session: the turn goes on while it works."""
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
            turn = await run_db(turn_with_stopper, session.turn_id)
            if turn is None or turn.cancel_requested_at is None:
                # Not stopped: this process is going away, access was taken away, or the
                # task's time ran out. What the task comes to is read from its question
                # (see external.tasks).
                return
            structured = tasks.stopped_result(stop_message(turn))
        except Exception as exc:
            await run_db(
                tasks.task_deliver, task_id=task_id, result={"error": str(exc)}, failed=True
            )
            return
        await run_db(tasks.task_deliver, task_id=task_id, result=structured)

    in_background(deliver())
    return types.CreateTaskResult(task=task_model(task))


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
        session.check_access()
        structured = tasks.stopped_result(await stopped_message(session.turn_id))
        return tool_result(structured, answer_text(structured))
    return with_steering(structured, "Posted.")


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
    return with_steering(structured, text or "You can see no conversation yet.")


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
    session.check_access()

    async def look():
        return await run_db(_pending_rows, ids=session.asked)

    rows, steering = await _reported(session, "pending", arguments, context, look)
    text = "\n".join(f"{row['id']}  {row['kind']}  {row['prompt']}" for row in rows)
    structured = {"pending": rows, **({"steering": steering} if steering else {})}
    return with_steering(structured, text or "No question of this session is waiting.")


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


_VALIDATORS = {tool.name: Draft202012Validator(tool.inputSchema) for tool in TOOLS}


def argument_error(name: str, arguments: dict) -> str | None:
    """What is wrong with a tool's arguments, naming the field (None if nothing is)."""
    validator = _VALIDATORS.get(name)
    if validator is None:
        return f"Unknown tool {name!r}; the tools are {', '.join(HANDLERS)}."
    error = best_match(validator.iter_errors(arguments))
    if error is None:
        return None
    where = ".".join(str(part) for part in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def task_model(task) -> types.Task:
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
        if task.result is None:
            return "Cancelled by the outside agent."
        if task.result.get("stopped"):
            return task.result["message"]
        return "The question was cancelled in Parley."
    return None
