"""A HEAD request gets its GET's headers and no body, however long the body would be (Daphne
drops only the first 64 KiB of a body itself: the rest reached the client as a next response)."""

import socket

import pytest

from tests.helpers import read_to_end

pytestmark = pytest.mark.django_db(transaction=True)


def _raw(server, method: str, path: str, token: str) -> tuple[bytes, bytes]:
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
        sock.sendall(
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token {token}\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        head, _, body = read_to_end(sock).partition(b"\r\n\r\n")
    return head, body


def _length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            return int(value)
    raise AssertionError(f"no Content-Length in {head!r}")


@pytest.mark.parametrize("path", ["/api/schema/", "/api/workspaces/", "/answer/s_0/"])
def test_a_head_request_has_its_get_s_length_and_no_body(server, people, path):
    got_head, got_body = _raw(server, "GET", path, people.alice.token)
    head, body = _raw(server, "HEAD", path, people.alice.token)
    assert head.split(b"\r\n")[0] == got_head.split(b"\r\n")[0]
    assert _length(head) == _length(got_head) == len(got_body)
    assert body == b""
