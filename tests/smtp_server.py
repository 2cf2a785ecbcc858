"""A real SMTP server for the tests (aiosmtpd on 127.0.0.1, a free port): it keeps every message
it accepts, and can hold a message before accepting it (a test then stops the sender mid-send).

A held message is accepted only if its sender is still there when it is let go: a client that
died before the server's reply had not handed the message over (RFC 5321: a message is the
server's once it has said 250), so it is refused, as a real server would lose it."""

import asyncio
import email
import email.policy
import logging
import socket
import threading
import time

from aiosmtpd.controller import Controller

CEILING = 30.0
# aiosmtpd tells every command at INFO: the tests read what arrived instead.
logging.getLogger("mail.log").setLevel(logging.WARNING)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Mailbox:
    """Messages received, in order; ``hold_to``: an address whose first message is held."""

    def __init__(self):
        self.messages: list[email.message.EmailMessage] = []
        self.arrivals: list[float] = []  # time.time() of each message's acceptance
        self.raw: list[bytes] = []  # each message as it came
        self.refused: list[str] = []
        self.hold_to: str | None = None
        # An address whose messages are refused for now (451: try again later).
        self.refuse_to: str | None = None
        self.holding = threading.Event()
        self.release = threading.Event()
        self._changed = threading.Condition()
        self.controller = None

    # aiosmtpd's handler hook.
    async def handle_DATA(self, server, session, envelope):
        if self.refuse_to and self.refuse_to in envelope.rcpt_tos:
            return "451 Mailbox busy, try again later"
        if self.hold_to and self.hold_to in envelope.rcpt_tos:
            self.hold_to = None
            self.holding.set()
            try:
                # The release comes from the test's thread (a threading.Event): looked at often.
                while not self.release.is_set():  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                # aiosmtpd cancels the handler when its client goes away: never accepted.
                self.refused.append(envelope.rcpt_tos[0])
                raise
            if server.transport is None or server.transport.is_closing():
                self.refused.append(envelope.rcpt_tos[0])
                return "451 The client went away before the message was accepted"
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        with self._changed:
            self.messages.append(message)
            self.arrivals.append(time.time())
            self.raw.append(envelope.original_content or envelope.content)
            self._changed.notify_all()
        return "250 Message accepted"

    def start(self, port: int | None = None) -> "Mailbox":
        """Listen on a free port, or on ``port`` (one a stopped mailbox had: a server told to
        send there finds it open again)."""
        for _ in range(1 if port else 5):
            self.controller = Controller(self, hostname="127.0.0.1", port=port or _free_port())
            try:
                self.controller.start()
                return self
            except OSError:
                continue
        raise RuntimeError("no free port for the SMTP server")

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.controller.port}"

    def stop(self) -> None:
        self.release.set()
        if self.controller is not None:
            self.controller.stop()

    def wait_for(self, count: int, timeout: float = CEILING) -> list:
        """The first ``count`` messages, once they have arrived."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self.messages) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"{len(self.messages)} messages arrived, {count} awaited: "
                        f"{[m['To'] for m in self.messages]}"
                    )
                self._changed.wait(remaining)
            return list(self.messages[:count])

    def to(self, address: str) -> list:
        return [m for m in self.messages if address in m["To"]]
