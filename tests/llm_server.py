"""A local stand-in for the OpenAI Chat Completions API, over real HTTP on 127.0.0.1.

Tests start a :class:`ModelServer`, script its replies (``server.script(text("Hi"))``) and point
the app under test at ``server.base_url``. Every ``POST /v1/chat/completions`` takes the next
scripted reply and sends it as OpenAI does: a ``text/event-stream`` of ``chat.completion.chunk``
objects, with chunked transfer encoding, flushed one by one, ending with ``data: [DONE]``.

Standard library only: it serves from daemon threads inside the pytest process, while the app
(another process) calls it. Every wait in here is bounded, so it never hangs a test run.
"""

from __future__ import annotations

import json
import re
import secrets
import socket
import string
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = [
    "ModelServer",
    "Reply",
    "error",
    "gated",
    "held",
    "malformed",
    "text",
    "tool_calls",
]

HOLD_LIMIT = 120.0  # seconds a held or gated reply waits before it gives up
KEEPALIVE_EVERY = 0.1  # seconds between SSE comment lines while a reply is held
SOCKET_TIMEOUT = 120.0  # seconds any read or write on a connection may block
ARGUMENT_PIECE = 4  # characters of tool-call arguments per chunk
FINGERPRINT = "fp_test"
OWNER = "parley-tests"
API_KEYS_URL = "https://platform.openai.com/account/api-keys"
INTERNAL_ERROR = "The server had an error while processing your request. Sorry about that!"
BAD_JSON = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
    "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
    "sent was not valid JSON. If you have trouble figuring out how to fix this, please contact "
    "us through our help center at help.openai.com.)"
)
_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _error_body(message: str, type: str, code: str | None, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def _mask_key(key: str) -> str:
    """Mask an API key as OpenAI's 401 message does: the start and the end, stars between."""
    if len(key) > 12:
        return f"{key[:8]}{'*' * (len(key) - 12)}{key[-4:]}"
    if len(key) > 7:
        return f"{key[:5]}****{key[-2:]}"
    return "*" * len(key)


def _usage(prompt: int, completion: int) -> dict:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _split_words(content: str) -> list[str]:
    """About one piece per word, each word with the whitespace before it (as tokens come)."""
    pieces = re.findall(r"\s*\S+", content)
    rest = content[len("".join(pieces)) :]
    if rest:
        if pieces:
            pieces[-1] += rest
        else:
            pieces = [rest]
    return pieces


def _split_even(content: str, count: int) -> list[str]:
    count = max(1, min(count, len(content)))
    size, extra = divmod(len(content), count)
    pieces, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        pieces.append(content[start:end])
        start = end
    return [piece for piece in pieces if piece]


class _ClientGone(Exception):
    """The client closed the connection (or stopped reading) while a reply was being sent."""

    def __init__(self, cause: BaseException):
        super().__init__(repr(cause))
        self.cause = cause


class _Exchange:
    """One chat-completions request being answered: what was asked, and how to write back."""

    def __init__(self, handler: _Handler, number: int, body: dict):
        self.handler = handler
        self.number = number
        self.body = body
        self.model = body.get("model")
        self.stream = body.get("stream") is True
        options = body.get("stream_options") or {}
        self.include_usage = self.stream and options.get("include_usage") is True
        self.id = f"chatcmpl-{number}"
        self.created = int(time.time())

    @property
    def stopping(self) -> bool:
        return self.handler.server.stopping.is_set()

    # Whole responses.

    def send_json(self, status: int, body, headers: dict | None = None) -> None:
        self.handler.send_json(status, body, headers)

    def send_completion(self, completion: _Completion) -> None:
        content = completion.content
        message = {
            "role": "assistant",
            # With tool calls and no text, OpenAI sends `"content": null`.
            "content": None if completion.calls and not content else content,
            "refusal": None,
            "annotations": [],
        }
        if completion.calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in completion.calls
            ]
        self.send_json(
            200,
            {
                "id": self.id,
                "object": "chat.completion",
                "created": self.created,
                "model": self.model,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": completion.finish_reason,
                    }
                ],
                "usage": _usage(*completion.usage),
                "service_tier": "default",
                "system_fingerprint": FINGERPRINT,
            },
        )

    # Event streams.

    def start_stream(self) -> None:
        handler = self.handler
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.send_header("Connection", "keep-alive")
        handler.send_common_headers()
        try:
            handler.end_headers()
        except OSError as exc:
            raise _ClientGone(exc) from exc

    def write(self, data: bytes) -> None:
        """Write one HTTP chunk and flush it."""
        try:
            self.handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.handler.wfile.flush()
        except OSError as exc:
            raise _ClientGone(exc) from exc

    def event(self, data: str) -> None:
        self.write(f"data: {data}\n\n".encode())

    def _envelope(self, choices: list[dict]) -> dict:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "service_tier": "default",
            "system_fingerprint": FINGERPRINT,
            "choices": choices,
        }

    def chunk(self, delta: dict | None, finish_reason: str | None = None) -> None:
        """A ``chat.completion.chunk`` with one choice (or, with ``delta=None``, none)."""
        chunk = self._envelope(
            []
            if delta is None
            else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
        )
        if self.include_usage:
            chunk["usage"] = None
        self.event(_dumps(chunk))

    def keepalive(self) -> None:
        self.write(b": keep-alive\n\n")

    def finish(self, finish_reason: str, usage: tuple[int, int]) -> None:
        """The last choice chunk, the usage chunk if asked for, ``[DONE]``, the end of the body."""
        self.chunk({}, finish_reason)
        if self.include_usage:
            self.event(_dumps({**self._envelope([]), "usage": _usage(*usage)}))
        self.event("[DONE]")
        self.end()

    def end(self) -> None:
        try:
            self.handler.wfile.write(b"0\r\n\r\n")
            self.handler.wfile.flush()
        except OSError as exc:
            raise _ClientGone(exc) from exc

    def abort(self) -> None:
        """Drop the connection mid-body (the client sees an incomplete response)."""
        self.handler.close_connection = True
        try:
            self.handler.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class Reply:
    """A scripted answer to one chat-completions request."""

    def respond(self, exchange: _Exchange) -> None:
        raise NotImplementedError

    def client_gone(self, exchange: _Exchange, cause: BaseException) -> None:
        """The client went away while this reply was being sent."""

    def release(self) -> None:
        """Let a held or gated reply go on (no-op for the others)."""


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str

    def pieces(self) -> list[str]:
        args = self.arguments
        return [args[i : i + ARGUMENT_PIECE] for i in range(0, len(args), ARGUMENT_PIECE)]


def _call_id() -> str:
    alphabet = string.ascii_letters + string.digits
    return "call_" + "".join(secrets.choice(alphabet) for _ in range(24))


@dataclass
class _Completion(Reply):
    """Text and/or tool calls, streamed (or sent whole) as OpenAI does."""

    content_pieces: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    usage: tuple[int, int] = (10, 5)
    # Every call at index 0, as Ollama sends parallel calls (OpenAI numbers them).
    index_zero: bool = False

    @property
    def content(self) -> str:
        return "".join(self.content_pieces)

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.calls else "stop"

    def deltas(self, *, with_role: bool = True) -> Iterator[dict]:
        role_pending = with_role
        if self.content_pieces or not self.calls:
            if role_pending:
                yield {"role": "assistant", "content": "", "refusal": None}
                role_pending = False
            for piece in self.content_pieces:
                yield {"content": piece}
        for number, call in enumerate(self.calls):
            index = 0 if self.index_zero else number
            head = {
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            if role_pending:
                # No text first: OpenAI puts the role and the first call in one delta.
                yield {"role": "assistant", "content": None, "tool_calls": [head], "refusal": None}
                role_pending = False
            else:
                yield {"tool_calls": [head]}
            for piece in call.pieces():
                yield {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}

    def respond(self, exchange: _Exchange) -> None:
        if not exchange.stream:
            exchange.send_completion(self)
            return
        exchange.start_stream()
        for delta in self.deltas():
            exchange.chunk(delta)
        exchange.finish(self.finish_reason, self.usage)


@dataclass
class _Error(Reply):
    status: int
    message: str
    code: str | None
    type: str
    headers: dict = field(default_factory=dict)

    def respond(self, exchange: _Exchange) -> None:
        exchange.send_json(
            self.status, _error_body(self.message, self.type, self.code), self.headers
        )


@dataclass
class _Malformed(Reply):
    data: str = '{"id": "chatcmpl-x", "choi'

    def respond(self, exchange: _Exchange) -> None:
        if not exchange.stream:
            exchange.handler.send_raw(200, self.data.encode(), "application/json")
            return
        exchange.start_stream()
        exchange.event(self.data)
        exchange.event("[DONE]")
        exchange.end()


@dataclass(eq=False)
class _Paused(Reply):
    """Streams ``before``, then holds the stream open (an SSE comment every 0.1 s) until
    released, then streams ``after`` and finishes. Gives up (drops the connection) after
    ``HOLD_LIMIT`` seconds."""

    before: _Completion
    after: _Completion
    started: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    closed_by_client: threading.Event = field(default_factory=threading.Event)
    closed_at: float | None = None  # time.monotonic() when the client was seen gone
    gave_up: bool = False
    # Send nothing at all (not even the headers) until released: a server that hangs.
    quiet: bool = False

    def release(self) -> None:
        self.released.set()

    def _wait(self, exchange: _Exchange | None) -> bool:
        """Wait for the release, sending keep-alives if streaming; False if it gave up."""
        deadline = time.monotonic() + HOLD_LIMIT
        while not self.released.wait(KEEPALIVE_EVERY):
            if time.monotonic() > deadline:
                self.gave_up = True
                return False
            if exchange is not None:
                exchange.keepalive()
        return True

    def respond(self, exchange: _Exchange) -> None:
        if self.quiet:
            self.started.set()
            self._wait(None)
            exchange.abort()
            return
        if not exchange.stream:
            self.started.set()
            if self._wait(None):
                combined = _Completion(
                    [p for p in (self.before.content, *self.after.content_pieces) if p],
                    self.after.calls,
                    self.after.usage,
                )
                exchange.send_completion(combined)
            else:
                exchange.abort()
            return
        exchange.start_stream()
        for delta in self.before.deltas():
            exchange.chunk(delta)
        self.started.set()
        if not self._wait(exchange):
            exchange.abort()
            return
        for delta in self.after.deltas(with_role=False):
            exchange.chunk(delta)
        exchange.finish(self.after.finish_reason, self.after.usage)

    def client_gone(self, exchange: _Exchange, cause: BaseException) -> None:
        if isinstance(cause, _GONE) and not exchange.stopping:
            self.closed_at = time.monotonic()
            self.closed_by_client.set()


# The replies a test scripts.


def text(content: str, *, pieces: int | None = None, usage: tuple[int, int] = (10, 5)) -> Reply:
    """Stream ``content`` in ``pieces`` deltas (default: about one per word)."""
    split = _split_words(content) if pieces is None else _split_even(content, pieces)
    return _Completion(split, [], tuple(usage))


def tool_calls(
    *calls: tuple[str, dict | str],
    content: str = "",
    usage: tuple[int, int] = (10, 5),
    index_zero: bool = False,
) -> Reply:
    """Optional text, then each call ``(name, arguments)``: a dict is sent as JSON, a str
    verbatim (to send malformed JSON). Arguments stream a few characters per chunk.
    ``index_zero`` numbers every call 0, as Ollama does."""
    made = [
        ToolCall(_call_id(), name, args if isinstance(args, str) else json.dumps(args))
        for name, args in calls
    ]
    return _Completion(_split_words(content), made, tuple(usage), index_zero)


def error(
    status: int,
    message: str = INTERNAL_ERROR,
    *,
    code: str | None = None,
    type: str = "server_error",
    headers: dict | None = None,
) -> Reply:
    """A non-200 with OpenAI's error body, e.g. ``error(429, "Rate limit reached",
    type="requests", code="rate_limit_exceeded", headers={"retry-after": "1"})``."""
    return _Error(status, message, code, type, dict(headers or {}))


def rate_limited(retry_after: str = "1") -> Reply:
    """A 429 as OpenAI sends it when a rate limit is reached, with its ``retry-after``."""
    return error(
        429,
        "Rate limit reached for requests",
        type="requests",
        code="rate_limit_exceeded",
        headers={"retry-after": retry_after},
    )


def held(content_before: str = "") -> Reply:
    """Stream ``content_before``, then keep the stream open until the client closes it or the
    reply is released (then it finishes with ``stop``)."""
    return _Paused(text(content_before), text(""))


def stalled() -> Reply:
    """Send nothing, not even the response's headers, until released (then drop the
    connection): a server that hangs, for the client's timeout."""
    return _Paused(text(""), text(""), quiet=True)


def gated(before: str, after: str | Reply) -> Reply:
    """Stream ``before``, wait for ``release()``, then stream ``after`` (text, or a
    ``text``/``tool_calls`` reply's chunks) and finish."""
    if isinstance(after, str):
        after = text(after)
    if not isinstance(after, _Completion):
        raise TypeError("gated(after=...) takes a str or a text()/tool_calls() reply")
    return _Paused(text(before), after)


def malformed() -> Reply:
    """A 200 event stream whose first data line is not JSON."""
    return _Malformed()


# The server.


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "parley-model-server"
    sys_version = ""
    timeout = SOCKET_TIMEOUT
    server: _HTTPServer
    responding = False  # True while a scripted reply is being sent

    def setup(self) -> None:
        super().setup()
        self.server.opened(self)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.server.closed(self)

    def log_message(self, format, *args) -> None:  # quiet: tests read `requests` instead
        pass

    # Writing.

    def send_common_headers(self) -> None:
        self.send_header("x-request-id", f"req_{secrets.token_hex(16)}")
        self.send_header("openai-version", "2020-10-01")
        self.send_header("openai-organization", OWNER)
        self.send_header("openai-processing-ms", "1")

    def send_raw(
        self, status: int, payload: bytes, content_type: str, headers: dict | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_common_headers()
        for name, value in (headers or {}).items():
            self.send_header(name, str(value))
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def send_json(self, status: int, body, headers: dict | None = None) -> None:
        self.send_raw(status, _dumps(body).encode(), "application/json", headers)

    def send_openai_error(
        self,
        status: int,
        message: str,
        type: str = "invalid_request_error",
        code: str | None = None,
        headers: dict | None = None,
    ) -> None:
        self.send_json(status, _error_body(message, type, code), headers)

    # Reading.

    def read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return body
                body += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def authorized(self) -> str | None:
        """None if the key is right, else the 401 message."""
        auth = self.headers.get("Authorization", "")
        if auth == f"Bearer {self.server.model_server.api_key}":
            return None
        if not auth.startswith("Bearer ") or not auth[7:].strip():
            return (
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), "
                f"or as the password field (with blank username) if you're accessing the API "
                f"from your browser and are prompted for a username. You can obtain an API key "
                f"from {API_KEYS_URL}."
            )
        return (
            f"Incorrect API key provided: {_mask_key(auth[7:].strip())}. "
            f"You can find your API key at {API_KEYS_URL}."
        )

    def refuse_auth(self, message: str) -> None:
        code = "invalid_api_key" if message.startswith("Incorrect") else None
        self.send_openai_error(401, message, code=code)

    # Routes.

    def path_only(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/")

    def do_GET(self) -> None:
        path = self.path_only()
        if path == "/v1/models" or path.startswith("/v1/models/"):
            if (problem := self.authorized()) is not None:
                self.refuse_auth(problem)
                return
            models = self.server.model_server.model_list()
            if path == "/v1/models":
                self.send_json(200, {"object": "list", "data": models})
                return
            wanted = path.removeprefix("/v1/models/")
            for model in models:
                if model["id"] == wanted:
                    self.send_json(200, model)
                    return
            self.send_openai_error(
                404,
                f"The model '{wanted}' does not exist",
                code="model_not_found",
                headers={"x-should-retry": "false"},
            )
            return
        self.send_openai_error(404, f"Invalid URL (GET {self.path})")

    def do_POST(self) -> None:
        raw = self.read_body()
        if self.path_only() != "/v1/chat/completions":
            self.send_openai_error(404, f"Invalid URL (POST {self.path})")
            return
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        parsed = isinstance(body, dict)
        headers = {name.lower(): value for name, value in self.headers.items()}
        owner = self.server.model_server
        number = owner.record(
            body if parsed else {"_unparsed": raw.decode("utf-8", "replace")}, headers
        )

        if (problem := self.authorized()) is not None:
            self.refuse_auth(problem)
            return
        if not parsed:
            self.send_openai_error(400, BAD_JSON)
            return
        model = body.get("model")
        if not model:
            self.send_openai_error(400, "you must provide a model parameter")
            return
        if model not in owner.models:
            self.send_openai_error(
                404,
                f"The model `{model}` does not exist or you do not have access to it.",
                code="model_not_found",
            )
            return
        reply = owner.take()
        if reply is None:
            self.send_openai_error(
                500,
                f"the test scripted no reply for request {number} (every scripted reply "
                "was already taken)",
                type="server_error",
                code="no_scripted_reply",
                headers={"x-should-retry": "false"},
            )
            return
        exchange = _Exchange(self, number, body)
        self.responding = True
        try:
            reply.respond(exchange)
        except _ClientGone as gone:
            self.close_connection = True
            reply.client_gone(exchange, gone.cause)
        finally:
            self.responding = False


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 64

    def __init__(self, model_server: ModelServer):
        self.model_server = model_server
        self.stopping = threading.Event()
        self.handlers: dict[_Handler, threading.Thread] = {}
        self.handlers_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def opened(self, handler: _Handler) -> None:
        with self.handlers_lock:
            self.handlers[handler] = threading.current_thread()

    def closed(self, handler: _Handler) -> None:
        with self.handlers_lock:
            self.handlers.pop(handler, None)

    def handle_error(self, request, client_address) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (*_GONE, TimeoutError)) or (
            self.stopping.is_set() and isinstance(exc, OSError | ValueError)
        ):
            return  # a client went away, or the server is stopping: nothing to report
        self.model_server.errors.append(exc)
        super().handle_error(request, client_address)


class ModelServer:
    """A scripted OpenAI Chat Completions server on 127.0.0.1 (see the module docstring)."""

    def __init__(self, *, api_key: str = "sk-test-secret", models: tuple[str, ...] = ("gpt-test",)):
        self.api_key = api_key
        self.models = tuple(models)
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.errors: list[BaseException] = []  # unexpected exceptions in the server's handlers
        self.base_url = ""
        self._created = int(time.time())
        self._replies: deque[Reply] = deque()
        self._scripted: list[Reply] = []
        self._condition = threading.Condition()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # Lifecycle.

    def start(self) -> ModelServer:
        if self._httpd is not None:
            raise RuntimeError("the model server is already started")
        self._httpd = _HTTPServer(self)
        port = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"model-server-{port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd = self._httpd
        if httpd is None:
            return
        httpd.stopping.set()
        httpd.shutdown()  # the accept loop ends (it polls every 0.05 s)
        for reply in self._scripted:
            reply.release()
        with httpd.handlers_lock:
            handlers = dict(httpd.handlers)
        # Give released replies a moment to finish, then drop every connection still open
        # (idle keep-alive ones included) so no handler thread is left blocked on a socket.
        deadline = time.monotonic() + 2
        while any(h.responding for h in handlers) and time.monotonic() < deadline:
            time.sleep(0.01)
        for handler in handlers:
            try:
                handler.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in handlers.values():
            thread.join(5)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # Scripting.

    def script(self, *replies: Reply) -> None:
        """Append replies; each chat-completions request takes the next one."""
        for reply in replies:
            if not isinstance(reply, Reply):
                raise TypeError(f"not a Reply: {reply!r}")
        with self._condition:
            self._replies.extend(replies)
            self._scripted.extend(replies)

    def remaining(self) -> int:
        with self._condition:
            return len(self._replies)

    def wait_requests(self, count: int, timeout: float = 30) -> list[dict]:
        """Block until at least ``count`` chat-completions requests arrived; return them."""
        deadline = time.monotonic() + timeout
        with self._condition:
            while len(self.requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    models = [r.get("model") for r in self.requests]
                    raise AssertionError(
                        f"the model server got {len(self.requests)} chat-completions "
                        f"request(s) in {timeout} s, the test expected {count} "
                        f"(models asked for so far: {models})"
                    )
                self._condition.wait(min(left, 0.1))
            return list(self.requests)

    # Used by the handlers.

    def record(self, body: dict, headers: dict) -> int:
        with self._condition:
            self.requests.append(body)
            self.headers.append(headers)
            self._condition.notify_all()
            return len(self.requests)

    def take(self) -> Reply | None:
        with self._condition:
            return self._replies.popleft() if self._replies else None

    def model_list(self) -> list[dict]:
        return [
            {"id": model, "object": "model", "created": self._created, "owned_by": OWNER}
            for model in self.models
        ]
