"""A loopback TCP proxy for the tests that cuts a stream: the first connection through it is
closed once the client has been sent ``cut_after`` whole SSE frames with an ``id`` and a piece of
the next one (as a network that drops mid-stream leaves it); later connections pass whole. It
keeps what each connection carried (the request's head, the response's status), so a test can
see what a client sent when it came back."""

import re
import socket
import threading
from dataclasses import dataclass, field

FRAME_START = b"\nid: "
# How much of the next frame the cut connection still delivers: its start only.
PIECE = 8


@dataclass
class Passage:
    """One connection through the proxy: what the client sent and what the server answered on
    it (a client may send several requests on one connection, one after another), and whether
    the proxy cut it."""

    request: bytes = b""
    response: bytearray = field(default_factory=bytearray)
    cut: bool = False

    def exchanges(self) -> list[tuple[dict, int | None]]:
        """Each request's headers (lower-case names) and the status it was answered, in order
        (requests without a body, as GETs are; a status not yet come is None)."""
        statuses = [int(s) for s in re.findall(rb"(?:^|\r\n)HTTP/1\.[01] (\d{3}) ", self.response)]
        heads = [head for head in self.request.split(b"\r\n\r\n") if head]
        return [
            (_headers(head), statuses[n] if n < len(statuses) else None)
            for n, head in enumerate(heads)
        ]


def _headers(head: bytes) -> dict:
    lines = head.decode("latin-1").split("\r\n")[1:]
    return {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}


class CutProxy:
    """Listens on 127.0.0.1 (a free port) and forwards to ``upstream_port`` there. Use as a
    context manager; ``url`` is its address."""

    def __init__(self, upstream_port: int, cut_after: int):
        self.upstream_port = upstream_port
        self.cut_after = cut_after
        self.passages: list[Passage] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def __enter__(self):
        self._start(self._accept)
        return self

    def __exit__(self, *exc):
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=10)
        self._listener.close()

    def _start(self, target, *args):
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self):
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            passage = Passage()
            first = not self.passages
            self.passages.append(passage)
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=10)
            self._start(self._requests, client, upstream, passage)
            self._start(self._responses, upstream, client, passage, first)

    def _requests(self, client, upstream, passage: Passage):
        """Client to server, unchanged."""
        client.settimeout(0.5)
        while not self._stopping.is_set():
            try:
                data = client.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data:
                break
            passage.request += data
            try:
                upstream.sendall(data)
            except OSError:
                break
        _shut(upstream)

    def _responses(self, upstream, client, passage: Passage, cut: bool):
        """Server to client; on the first connection, only up to a piece of the frame after
        ``cut_after`` frames, then both ends are closed."""
        upstream.settimeout(0.5)
        sent = 0
        while not self._stopping.is_set():
            try:
                data = upstream.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data:
                break
            passage.response += data
            cut_at = None
            if cut and (at := _nth(passage.response, FRAME_START, self.cut_after + 1)) is not None:
                cut_at = at + PIECE
            end = len(passage.response) if cut_at is None else min(cut_at, len(passage.response))
            try:
                client.sendall(bytes(passage.response[sent:end]))
            except OSError:
                break
            sent = end
            if cut_at is not None and sent >= cut_at:
                passage.cut = True
                break
        _shut(client)
        _shut(upstream)


def _nth(data: bytearray, needle: bytes, n: int) -> int | None:
    """Where the ``n``-th ``needle`` starts in ``data``, if it holds that many."""
    at = -1
    for _ in range(n):
        at = data.find(needle, at + 1)
        if at < 0:
            return None
    return at


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
