"""An agent backed by a model served over the OpenAI protocol (OpenAI itself, vLLM, Ollama,
llama.cpp's server, LM Studio, a company gateway), through the official SDK.

Each step streams one Chat Completions reply: its text goes out as it arrives, and the tool
calls it makes are run one after the other (files of the workspace, or questions to the team),
their results given back to the model at the next step. The conversation is the context: the
earlier turns are rebuilt from the event log. Every model reply goes through the turn context
(``ctx.streamed_step``), so the journal records it and a resumed turn replays it instead of
calling the model again.
"""

import asyncio
import email.utils
import json
import logging
import math
from datetime import UTC, datetime
from functools import partial

import openai
from django.conf import settings

from . import Agent, AgentError
from . import llm_tools as tools

logger = logging.getLogger(__name__)

SYSTEM_PROMPT = """You are the agent of Parley, a workspace where a team works with you together.
Several people may read and steer this conversation; the person who asked is named below.
You work on the workspace's files with the file tools, whose paths are relative to the \
workspace's root. When you need a decision, a choice, a file, or a fact only the team has, \
ask with one of the ask_* tools rather than guessing; people answer in their own time. \
Keep your replies short and concrete, in Markdown."""

# Characters per token, to estimate the size of the history without a tokenizer.
CHARS_PER_TOKEN = 4


def _client() -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=settings.PARLEY_LLM_BASE_URL,
        # Local servers need no key, but the SDK needs one to send.
        api_key=settings.PARLEY_LLM_API_KEY or "not-needed",
        max_retries=0,  # retried here, so that people see it (turn.notice)
        timeout=openai.Timeout(settings.PARLEY_LLM_TIMEOUT_SECONDS, connect=10.0),
    )


class OpenAIAgent(Agent):
    resumable = True

    @classmethod
    def models(cls) -> list[str]:
        return list(dict.fromkeys([settings.PARLEY_LLM_MODEL, *settings.PARLEY_LLM_MODELS]))

    async def run(self, ctx) -> None:
        self.model = ctx.model or settings.PARLEY_LLM_MODEL
        client = _client()
        try:
            await self._converse(ctx, client)
        finally:
            await client.close()

    async def _converse(self, ctx, client) -> None:
        messages = [
            {"role": "system", "content": self._system_prompt(ctx)},
            *history_messages(await ctx.transcript(), settings.PARLEY_LLM_HISTORY_TOKENS),
            {"role": "user", "content": ctx.input},
        ]
        for _ in range(settings.PARLEY_LLM_MAX_STEPS):
            messages.extend({"role": "user", "content": text} for text in ctx.steering())
            reply = await ctx.streamed_step(
                "model",
                partial(self._complete, ctx, client, messages),
                {"model": self.model, "messages": messages},
            )
            ctx.add_usage(reply["usage"])
            if reply["finish_reason"] == "length":
                # Cut off at the model's length limit: calls it was making are cut too.
                ctx.notice("length", "The model's reply was cut off at its length limit.")
                reply = {**reply, "tool_calls": []}
            messages.append(assistant_message(reply))
            if not reply["tool_calls"]:
                # Steering sent during the final reply is answered with one more step.
                steering = ctx.steering()
                if not steering:
                    return
                messages.extend({"role": "user", "content": text} for text in steering)
                continue
            for call in reply["tool_calls"]:
                result = await self._use_tool(ctx, call)
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": _as_text(result)}
                )
        await ctx.end_message()
        ctx.notice(
            "limit",
            f"The model made {settings.PARLEY_LLM_MAX_STEPS} calls in this turn, the most "
            "one turn may make; ask it to go on in a new turn.",
        )

    def _system_prompt(self, ctx) -> str:
        # The date, as the context gives it: a resumed turn tells the model the same.
        asked = f"\nToday is {ctx.now():%A %d %B %Y} (UTC)."
        asked += f"\nThis turn was started by {ctx.started_by}." if ctx.started_by else ""
        if not ctx.interactive:
            asked += "\nNobody can answer questions in this turn: do not use the ask_* tools."
        return SYSTEM_PROMPT + asked

    # The model ---------------------------------------------------------------------------------

    async def _complete(self, ctx, client, messages: list[dict], say) -> dict:
        """One reply of the model, streamed; 429 and 5xx are tried again, with a notice."""
        attempts = settings.PARLEY_LLM_MAX_RETRIES + 1
        said = []  # a reply cut after it began to stream is not tried again: text would repeat

        async def saying(text: str) -> None:
            said.append(text)
            await say(text)

        for attempt in range(1, attempts + 1):
            try:
                return await self._stream(client, messages, saying)
            except openai.APITimeoutError:
                raise AgentError(
                    "The model server did not answer within "
                    f"{settings.PARLEY_LLM_TIMEOUT_SECONDS:.0f} seconds."
                ) from None
            except (openai.RateLimitError, openai.InternalServerError) as exc:
                busy = "too many requests" if exc.status_code == 429 else "server error"
                why, response = (
                    f"The model server answered {exc.status_code} ({busy})",
                    exc.response,
                )
                failure = self._refused(exc, attempts=attempt)
            except openai.APIConnectionError:
                why, response = "Parley could not reach the model server", None
                failure = f"{why} ({settings.PARLEY_LLM_BASE_URL})."
            except openai.APIStatusError as exc:
                raise AgentError(self._refused(exc)) from None
            except (openai.APIError, ValueError, KeyError, TypeError, AttributeError) as exc:
                logger.warning("Unreadable reply from the model server", exc_info=True)
                raise AgentError(
                    f"The model server sent a reply Parley could not read ({type(exc).__name__})."
                ) from None
            if attempt == attempts or said:
                raise AgentError(failure)
            delay = _retry_delay(response, attempt, ctx.now())
            ctx.notice(
                "retry",
                f"{why}; trying again in {delay:.0f} s (attempt {attempt + 1} of {attempts}).",
            )
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _stream(self, client, messages: list[dict], say) -> dict:
        text: list[str] = []
        calls: list[dict] = []
        by_index: dict = {}
        usage = None
        finish_reason = None
        async with await client.chat.completions.create(
            model=self.model,
            messages=messages,
            tools=tools.tool_definitions(),
            stream=True,
            stream_options={"include_usage": True},
        ) as stream:
            async for chunk in stream:
                if chunk.usage is not None:
                    usage = {
                        "prompt_tokens": chunk.usage.prompt_tokens or 0,
                        "completion_tokens": chunk.usage.completion_tokens or 0,
                        "total_tokens": chunk.usage.total_tokens or 0,
                    }
                for choice in chunk.choices or []:
                    delta = choice.delta
                    if delta is not None and delta.content:
                        text.append(delta.content)
                        await say(delta.content)
                    for piece in (delta.tool_calls if delta is not None else None) or []:
                        _assemble(calls, by_index, piece)
                    finish_reason = choice.finish_reason or finish_reason
        if finish_reason is None:
            raise ValueError("the reply ended before the model finished it")
        for number, call in enumerate(calls, start=1):
            call["id"] = call["id"] or f"call_{number}"
        return {
            "text": "".join(text),
            "tool_calls": calls,
            "finish_reason": finish_reason,
            "usage": usage,
        }

    def _refused(self, exc: openai.APIStatusError, attempts: int = 1) -> str:
        status = exc.status_code
        if status == 401:
            return (
                "The model server refused Parley's API key (401 Unauthorized). An admin should "
                "check PARLEY_LLM_API_KEY."
            )
        if status == 403:
            return "The model server does not allow this request (403 Forbidden)."
        if status == 404:
            return (
                f"The model server has no model named '{self.model}' (404). An admin should "
                "check PARLEY_LLM_MODEL (or the conversation's model)."
            )
        tried = f" after {attempts} attempts" if attempts > 1 else ""
        if status == 429:
            return f"The model server is too busy (429 Too Many Requests){tried}."
        if status >= 500:
            return f"The model server failed ({status}){tried}."
        return f"The model server refused the request ({status}): {_server_message(exc)}"

    # Tools ------------------------------------------------------------------------------------

    async def _use_tool(self, ctx, call: dict):
        """Run one tool call of the model; what it returns (or its error) goes back to it."""
        name = call["name"]
        try:
            arguments = json.loads(call["arguments"] or "{}")
        except ValueError as exc:
            return await _refuse(
                ctx, name, {"raw": call["arguments"][:2000]}, f"The arguments are not JSON: {exc}"
            )
        if problem := tools.argument_errors(name, arguments):
            shown = arguments if isinstance(arguments, dict) else {"raw": arguments}
            return await _refuse(ctx, name, shown, problem)
        if name in tools.ASK_TOOLS:
            return await self._ask(ctx, name, arguments)
        if name in ("write_file", "rename_file"):
            refused = await self._confirm_change(ctx, name, arguments)
            if refused is not None:
                return refused
        run = getattr(tools, name)
        try:
            return await ctx.call_tool(name, arguments, partial(run, ctx.files_root, **arguments))
        except Exception as exc:  # ToolError: recorded, and told to the model
            return {"error": str(exc)}

    async def _ask(self, ctx, name: str, arguments: dict) -> dict:
        kind = tools.ASK_TOOLS[name][0]
        prompt = arguments.pop("prompt")
        try:
            answer = await ctx.ask(kind, prompt, **arguments)
        except ValueError as exc:
            return await _refuse(ctx, name, {"prompt": prompt, **arguments}, str(exc))
        result = {"status": answer.status}
        if answer.answered:
            result.update(answer=answer.value, answered_by=answer.answered_by)
        else:
            result["note"] = UNANSWERED[answer.status]
        return result

    async def _confirm_change(self, ctx, name: str, arguments: dict) -> dict | None:
        """Ask before a write or a rename (unless the turn said not to); None to go ahead,
        else what to tell the model."""
        if not ctx.confirm_writes:
            return None
        path = arguments["path"]
        if name == "rename_file":
            prompt = f"Rename `{path}` to `{arguments['new_path']}`?"
        else:
            # Looked at through the journal: by the time a resumed turn replays this, the
            # write may have happened.
            exists = await ctx.step(
                "exists", partial(_exists, ctx.files_root, path), {"path": path}
            )
            size = len(arguments["content"])
            verb = "Replace" if exists else "Create"
            prompt = f"{verb} `{path}` ({size:,} characters)?"
        answer = await ctx.confirm(prompt)
        if answer.answered and answer.value is True:
            return None
        if answer.answered:
            note = f"{answer.answered_by or 'The team'} said no: nothing was changed."
        else:
            note = UNANSWERED[answer.status] + " Nothing was changed."
        return {"status": "not_confirmed", "note": note}


UNANSWERED = {
    "dismissed": "The person closed the question without answering.",
    "declined": "The person declined to answer.",
    "expired": "Nobody answered in time; the question expired.",
    "cancelled": "The question was withdrawn.",
    "unavailable": "Nobody can answer questions in this turn (it is not interactive).",
    "limit_reached": "This turn has asked as many questions as it may.",
    "rate_limited": "Too many questions were asked for this person of late; none was asked.",
}


def _exists(root, path: str) -> bool:
    try:
        return tools.file_exists(root, path)
    except tools.ToolFailed:
        return False


async def _refuse(ctx, name: str, arguments: dict, problem: str) -> dict:
    """Report a tool call the model got wrong (shown as a failed call); the problem goes back
    to the model so it can correct itself."""

    def fail():
        raise tools.ToolFailed(problem)

    try:
        await ctx.call_tool(name, arguments, fail)
    except Exception as exc:
        return {"error": str(exc)}
    raise AssertionError("unreachable")


def _as_text(result) -> str:
    """A tool's result as the model reads it. Keys are sorted: a resumed turn gets results back
    from the journal (jsonb on PostgreSQL orders keys its own way), and must send the same."""
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, sort_keys=True)


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    message = body.get("message") if "message" in body else body.get("error", {}).get("message")
    return str(message or exc.message)[:300]


def _retry_delay(response, attempt: int, now: datetime) -> float:
    """Seconds to wait before the next attempt: the server's ``retry-after-ms`` or
    ``Retry-After`` (seconds or a date) when it sends one, else 1, 2, 4 … seconds; at most a
    minute."""
    headers = response.headers if response is not None else {}
    delay = None
    try:
        if milliseconds := headers.get("retry-after-ms"):
            delay = float(milliseconds) / 1000
        elif header := headers.get("retry-after"):
            try:
                delay = float(header)
            except ValueError:
                when = email.utils.parsedate_to_datetime(header)
                if when.tzinfo is None:
                    when = when.replace(tzinfo=UTC)
                delay = (when - now).total_seconds()
    except (TypeError, ValueError):
        delay = None
    if delay is None or not math.isfinite(delay):
        delay = float(2 ** (attempt - 1))
    return min(max(delay, 0.0), 60.0)


def _assemble(calls: list[dict], by_index: dict, piece) -> None:
    """Add one streamed piece of a tool call. Calls are told apart by their index, as OpenAI
    sends them; a piece with another call's id starts a new call (some servers give every
    parallel call index 0), and one without an index goes on with the last call."""
    call = by_index.get(piece.index) if piece.index is not None else (calls or [None])[-1]
    if call is None or (piece.id and call["id"] and piece.id != call["id"]):
        call = {"id": "", "name": "", "arguments": ""}
        calls.append(call)
        by_index[piece.index] = call
    call["id"] = call["id"] or piece.id or ""
    if piece.function is not None:
        call["name"] = call["name"] or piece.function.name or ""
        call["arguments"] += piece.function.arguments or ""


def assistant_message(reply: dict) -> dict:
    # A reply with neither text nor calls is sent back as empty text (None is refused then).
    message = {
        "role": "assistant",
        "content": reply["text"] or ("" if not reply["tool_calls"] else None),
    }
    if reply["tool_calls"]:
        message["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
            for call in reply["tool_calls"]
        ]
    return message


# The conversation as the model's context ------------------------------------------------------


def history_messages(transcript: list[dict], budget_tokens: int) -> list[dict]:
    """Earlier turns as Chat Completions messages, the oldest turns left out while the whole
    would be over ``budget_tokens`` (estimated)."""
    turns = [_turn_messages(turn) for turn in transcript]
    sizes = [len(json.dumps(messages, ensure_ascii=False)) // CHARS_PER_TOKEN for messages in turns]
    first, total = 0, sum(sizes)
    while first < len(turns) and total > budget_tokens:
        total -= sizes[first]
        first += 1
    return [message for messages in turns[first:] for message in messages]


def _turn_messages(turn: dict) -> list[dict]:
    """One earlier turn: its input, then what happened in order. Each tool call (and each
    question, told as the ask_* call it was) is an assistant message with its result after it;
    a call that never finished is told as interrupted."""
    messages = [{"role": "user", "content": _from(turn["by"], turn["input"])}]
    text: list[str] = []
    open_calls: dict[str, str] = {}
    # Steering sent while a call was open (people type while a question waits): told after
    # the call's result, where the API allows a user message.
    held: list[dict] = []

    def close_open_calls():
        for call_id in list(open_calls):
            messages.append({"role": "tool", "tool_call_id": call_id, "content": "Interrupted."})
        open_calls.clear()
        messages.extend(held)
        held.clear()

    def call(call_id: str, name: str, arguments: dict):
        close_open_calls()
        messages.append(
            {
                "role": "assistant",
                "content": "\n\n".join(text) or None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                ],
            }
        )
        text.clear()
        open_calls[call_id] = name

    def result(call_id: str, content):
        if call_id in open_calls:
            del open_calls[call_id]
            messages.append({"role": "tool", "tool_call_id": call_id, "content": _as_text(content)})
            if not open_calls:
                messages.extend(held)
                held.clear()

    prefix = turn["turn"][-8:]
    for event in turn["events"]:
        kind, data = event["type"], event["data"]
        if kind == "message.completed":
            close_open_calls()
            text.append(data.get("text", ""))
        elif kind == "tool.started":
            call(f"{prefix}_{data['id']}", data["name"], data.get("arguments") or {})
        elif kind == "tool.completed":
            outcome = {"error": data["error"]} if "error" in data else data.get("result")
            result(f"{prefix}_{data['id']}", outcome)
        elif kind == "selection.requested":
            asked = {
                key: data[key]
                for key in ("prompt", "options", "multiple", "mode", "root", "schema")
                if data.get(key) not in (None, "", [], False)
            }
            call(f"q_{data['id']}", f"ask_{data.get('kind', 'text')}", asked)
        elif kind == "selection.resolved":
            outcome = {"status": data.get("status")}
            if data.get("status") == "answered":
                outcome.update(answer=data.get("answer"), answered_by=_username(data))
            result(f"q_{data['selection']}", outcome)
        elif kind == "turn.steered":
            if open_calls:
                held.append({"role": "user", "content": _from(_username(data), data["input"])})
                continue
            if text:
                messages.append({"role": "assistant", "content": "\n\n".join(text)})
                text.clear()
            messages.append({"role": "user", "content": _from(_username(data), data["input"])})
    close_open_calls()
    if text:
        messages.append({"role": "assistant", "content": "\n\n".join(text)})
    if turn["status"] in ("failed", "cancelled"):
        messages.append({"role": "assistant", "content": f"(This turn was {turn['status']} here.)"})
    return messages


def _username(data: dict) -> str | None:
    by = data.get("answered_by") or data.get("by")
    return by.get("username") if isinstance(by, dict) else by


def _from(username: str | None, text: str) -> str:
    """A person's words as the model reads them: who said them first (several people share a
    conversation)."""
    return f"[{username}] {text}" if username else text
