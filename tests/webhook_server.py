"""A webhook receiver for the tests: a real HTTP server on 127.0.0.1 (a free port) that checks
every delivery's signature with the ``standardwebhooks`` library, keeps what arrived exactly as
it came (headers and body bytes), and answers as the test tells it (statuses in turn, then 200)."""

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


@dataclass
class Received:
    headers: dict  # lower-case names
    body: bytes
    event: dict | None  # the verified body, or None if the signature did not check out
    refusal: str  # why it did not
    answered: int  # the status the receiver gave

    @property
    def id(self) -> str:
        return self.headers["webhook-id"]

    @property
    def type(self) -> str | None:
        return self.event["type"] if self.event else None


class Receiver:
    """Start with ``start()``; set ``secret`` (the endpoint's, once it is made); ``answers``:
    what to answer the next verified deliveries, in turn (a status, or a status and headers),
    then 200 for the rest. A delivery whose signature does not check out is refused (401)."""

    def __init__(self, answers=()):
        self.secret: str | None = None
        self.answers = list(answers)
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/hooks/parley"

    def start(self) -> "Receiver":
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver._take(self, body)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _take(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        headers = {name.lower(): value for name, value in handler.headers.items()}
        event, refusal = None, ""
        try:
            event = Webhook(self.secret).verify(body, headers)
        except (WebhookVerificationError, TypeError, ValueError) as error:
            refusal = f"{type(error).__name__}: {error}"
        with self._lock:
            if event is None:
                # As a receiver should: what it cannot verify, it refuses.
                status, extra = 401, {}
            else:
                answer = self.answers.pop(0) if self.answers else 200
                status, extra = answer if isinstance(answer, tuple) else (answer, {})
            self.received.append(Received(headers, body, event, refusal, status))
        said = b'{"ok": true}' if status < 300 else b'{"error": "not now"}'
        handler.send_response(status)
        for name, value in extra.items():
            handler.send_header(name, value)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(said)))
        handler.end_headers()
        handler.wfile.write(said)

    def of_type(self, event_type: str) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.type == event_type]

    def wait_for(self, count: int, timeout: float = 30, event_type: str | None = None):
        """The first ``count`` deliveries (of ``event_type`` if given), once they arrived."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                got = [r for r in self.received if event_type is None or r.type == event_type]
            if len(got) >= count:
                return got[:count]
            time.sleep(0.05)
        raise AssertionError(
            f"{len(got)} of {count} webhooks arrived in {timeout} s: {self.received}"
        )
