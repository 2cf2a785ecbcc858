"""Slack for the tests: a local server speaking the Web API's protocol for the calls Parley makes
(``users.lookupByEmail``, ``users.info``, ``chat.postMessage``, ``chat.update``) and taking the
posts made to an interaction's ``response_url``, on 127.0.0.1 at a free port. Like Slack it
checks the bot token (``invalid_auth`` otherwise), answers errors as HTTP 200 with ``"ok":
false``, checks the blocks it is sent against Block Kit's limits (slack_sdk's models), and keeps
each message as people would see it. It records every call, and can be told to fail the next
calls of a method (a 500, a 429 with Retry-After).

And Slack's side of a click: :meth:`SlackServer.click` sends Parley a ``block_actions`` payload
for a button of a message it holds, form-encoded and signed as Slack signs
(``X-Slack-Request-Timestamp``, ``X-Slack-Signature``: v0 HMAC-SHA256 with the signing secret)."""

import itertools
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block
from slack_sdk.signature import SignatureVerifier

CEILING = 30.0
TEAM = {"id": "T0PARLEY", "domain": "parley-test"}


@dataclass
class Call:
    """One Web API call: its method, its arguments (query, form or JSON), whether it carried
    the bot token, and what Slack answered (``ok`` and ``error``, the HTTP status)."""

    method: str
    args: dict
    authorized: bool
    at: float = 0.0  # time.monotonic() when it came
    wall: float = 0.0  # time.time() when it came (the benchmark compares it with stored times)
    status: int = 200
    ok: bool = True
    error: str = ""


@dataclass
class Message:
    """A message as Slack keeps it: where, when, its text and blocks, and its versions."""

    channel: str
    ts: str
    text: str
    blocks: list
    history: list = field(default_factory=list)  # earlier (text, blocks), oldest first

    def buttons(self) -> list[dict]:
        return [
            element
            for block in self.blocks
            if block["type"] == "actions"
            for element in block["elements"]
            if element["type"] == "button"
        ]

    def button(self, action_id: str) -> tuple[dict, str]:
        """A button and its block's id."""
        for block in self.blocks:
            for element in block.get("elements", ()) if block["type"] == "actions" else ():
                if element.get("action_id") == action_id:
                    return element, block.get("block_id", "")
        raise AssertionError(f"no button {action_id!r} in {self.blocks}")

    def shown_text(self) -> str:
        """Every text the blocks show, one per line (what a person reads)."""
        texts = []

        def collect(node):
            if isinstance(node, dict):
                if node.get("type") in ("plain_text", "mrkdwn") and "text" in node:
                    texts.append(node["text"])
                    return
                for value in node.values():
                    collect(value)
            elif isinstance(node, list):
                for value in node:
                    collect(value)

        collect(self.blocks)
        return "\n".join(texts)


class SlackServer:
    def __init__(self, token: str = "xoxb-test"):
        self.token = token
        self.users: dict[str, dict] = {}  # Slack user id → the user, as users.info shows it
        self.channels: set[str] = set()  # the channels the bot is in
        self.channels_without_bot: set[str] = set()
        self.calls: list[Call] = []
        self.messages: dict[tuple[str, str], Message] = {}
        self.replies: list[tuple[str, dict]] = []  # (response_url, what was posted to it)
        self._failures: dict[str, list[tuple[int, dict, dict]]] = {}
        self._ts = itertools.count(1)
        self._changed = threading.Condition()
        self.httpd: ThreadingHTTPServer | None = None

    # Set-up -------------------------------------------------------------------------------------

    def add_user(self, slack_id: str, email: str, name: str = "") -> None:
        self.users[slack_id] = {
            "id": slack_id,
            "team_id": TEAM["id"],
            "name": name or email.split("@")[0],
            "profile": {"email": email, "real_name": name},
        }

    def fail(self, method: str, *, status: int = 500, error: str = "", retry_after=None):
        """Answer the next call of ``method`` with ``status`` (and Slack's ``error``)."""
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
        body = {"ok": False, "error": error or ("ratelimited" if status == 429 else "fatal_error")}
        self._failures.setdefault(method, []).append((status, body, headers))

    def start(self) -> "SlackServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                server._handle(self)

            def do_POST(self):
                server._handle(self)

            def log_message(self, *args):  # the tests read the calls instead
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def api_url(self) -> str:
        """What PARLEY_SLACK_API_URL is set to."""
        return f"{self.url}/api/"

    # What happened ----------------------------------------------------------------------------

    def calls_of(self, method: str) -> list[Call]:
        with self._changed:
            return [call for call in self.calls if call.method == method]

    def wait_for(self, condition, what: str, timeout: float = CEILING):
        """Wait until ``condition()`` (called under the server's lock) returns something true,
        and return that."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not (found := condition()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"timed out waiting for {what}; calls: "
                        f"{[(c.method, c.status, c.error) for c in self.calls]}"
                    )
                self._changed.wait(remaining)
            return found

    def wait_message(self, channel: str, timeout: float = CEILING) -> Message:
        """The first message posted to ``channel`` (a channel's id, or a DM's)."""
        return self.wait_for(
            lambda: next((m for m in self.messages.values() if m.channel == channel), None),
            f"a message in {channel}",
            timeout,
        )

    def wait_updated(self, message: Message, timeout: float = CEILING) -> Message:
        self.wait_for(lambda: message.history, f"an update of {message.ts}", timeout)
        return message

    def wait_reply(self, response_url: str, timeout: float = CEILING) -> dict:
        """What Parley posted to ``response_url``."""
        return self.wait_for(
            lambda: next((body for url, body in self.replies if url == response_url), None),
            "a reply to the click",
            timeout,
        )

    # Slack's side of a click --------------------------------------------------------------------

    def response_url(self) -> str:
        return f"{self.url}/actions/{TEAM['id']}/{uuid.uuid4().hex}"

    def click(
        self,
        parley_url: str,
        *,
        signing_secret: str,
        user: str,
        message: Message,
        action_id: str,
        timestamp: int | None = None,
        signature: str | None = None,
        signed: bool = True,
    ) -> tuple[httpx.Response, str]:
        """Click a button of ``message`` as Slack user ``user``: POST the interaction to
        Parley, signed (with ``signing_secret``, at ``timestamp``, unless ``signature`` is
        given; not at all unless ``signed``). Returns Parley's response and the click's
        ``response_url``."""
        button, block_id = message.button(action_id)
        response_url = self.response_url()
        payload = {
            "type": "block_actions",
            "user": {
                "id": user,
                "username": self.users.get(user, {}).get("name", user),
                "team_id": TEAM["id"],
            },
            "api_app_id": "A0PARLEY",
            "token": "the-deprecated-verification-token",
            "container": {
                "type": "message",
                "message_ts": message.ts,
                "channel_id": message.channel,
                "is_ephemeral": False,
            },
            "trigger_id": f"{int(time.time())}.{uuid.uuid4().int % 10**12}",
            "team": TEAM,
            "channel": {"id": message.channel, "name": message.channel},
            "message": {
                "type": "message",
                "ts": message.ts,
                "text": message.text,
                "blocks": message.blocks,
            },
            "response_url": response_url,
            "actions": [
                {
                    "action_id": action_id,
                    "block_id": block_id,
                    "text": button["text"],
                    "value": button.get("value"),
                    "type": "button",
                    "action_ts": f"{time.time():.6f}",
                }
            ],
            "state": {"values": {}},
        }
        body = urlencode({"payload": json.dumps(payload)})
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        if signature is None:
            signature = SignatureVerifier(signing_secret).generate_signature(
                timestamp=stamp, body=body
            )
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
        }
        if signed:
            headers |= {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": signature}
        response = httpx.post(
            f"{parley_url}/integrations/slack/interactions/",
            content=body,
            headers=headers,
            timeout=20,
        )
        return response, response_url

    # The protocol -------------------------------------------------------------------------------

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(request.path)
        length = int(request.headers.get("Content-Length") or 0)
        raw = request.rfile.read(length) if length else b""
        if parts.path.startswith("/actions/"):
            with self._changed:
                self.replies.append((f"{self.url}{parts.path}", json.loads(raw or b"{}")))
                self._changed.notify_all()
            return _send(request, 200, b"ok", "text/plain")
        if not parts.path.startswith("/api/"):
            return _send(request, 404, b"Not Found", "text/plain")
        method = parts.path.removeprefix("/api/")
        args = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        if raw:
            if request.headers.get_content_type() == "application/json":
                args.update(json.loads(raw))
            else:
                args.update({k: v[-1] for k, v in parse_qs(raw.decode()).items()})
        authorized = request.headers.get("Authorization") == f"Bearer {self.token}"
        with self._changed:
            call = Call(
                method=method,
                args=args,
                authorized=authorized,
                at=time.monotonic(),
                wall=time.time(),
            )
            self.calls.append(call)
            failures = self._failures.get(method)
            if failures:
                status, body, headers = failures.pop(0)
            elif not authorized:
                status, body, headers = 200, {"ok": False, "error": "invalid_auth"}, {}
            else:
                status, body, headers = 200, self._answer(method, args), {}
            call.status, call.ok, call.error = status, body["ok"], body.get("error", "")
            self._changed.notify_all()
        _send(request, status, json.dumps(body).encode(), "application/json", headers)

    def _answer(self, method: str, args: dict) -> dict:
        if method == "users.lookupByEmail":
            email = str(args.get("email", "")).lower()
            for user in self.users.values():
                if user["profile"]["email"].lower() == email:
                    return {"ok": True, "user": user}
            return {"ok": False, "error": "users_not_found"}
        if method == "users.info":
            user = self.users.get(args.get("user", ""))
            return {"ok": True, "user": user} if user else {"ok": False, "error": "user_not_found"}
        if method in ("chat.postMessage", "chat.update"):
            blocks = args.get("blocks") or []
            if isinstance(blocks, str):
                blocks = json.loads(blocks)
            try:
                for block in blocks:
                    Block.parse(block).validate_json()
            except (SlackObjectFormationError, AttributeError):
                return {"ok": False, "error": "invalid_blocks"}
            if not args.get("text"):
                return {"ok": False, "error": "no_text"}
            if method == "chat.postMessage":
                return self._post(args, blocks)
            return self._update(args, blocks)
        return {"ok": False, "error": "unknown_method"}

    def _post(self, args: dict, blocks: list) -> dict:
        target = args.get("channel", "")
        if target in self.users:
            channel = "D" + target[1:]  # the app's direct messages with that user
        elif target in self.channels:
            channel = target
        elif target in self.channels_without_bot:
            return {"ok": False, "error": "not_in_channel"}
        else:
            return {"ok": False, "error": "channel_not_found"}
        ts = f"1700000000.{next(self._ts):06d}"
        self.messages[(channel, ts)] = Message(channel, ts, args["text"], blocks)
        return {"ok": True, "channel": channel, "ts": ts, "message": {"text": args["text"]}}

    def _update(self, args: dict, blocks: list) -> dict:
        message = self.messages.get((args.get("channel", ""), args.get("ts", "")))
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        message.history.append((message.text, message.blocks))
        message.text, message.blocks = args["text"], blocks
        return {"ok": True, "channel": message.channel, "ts": message.ts, "text": message.text}


def _send(request, status: int, body: bytes, content_type: str, headers: dict | None = None):
    request.send_response(status)
    request.send_header("Content-Type", content_type)
    request.send_header("Content-Length", str(len(body)))
    for name, value in (headers or {}).items():
        request.send_header(name, value)
    request.end_headers()
    request.wfile.write(body)
