"""A TCP proxy on loopback between a browser and Daphne, which a test can use to cut the
browser's sockets (as a flaky network or a restarting balancer would) and to refuse new ones."""

import socket
import threading


class CuttableProxy:
    def __init__(self, target_port: int):
        self.target_port = target_port
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        # While set, WebSocket handshakes are dropped (plain HTTP still goes through).
        self.refuse_websockets = False
        self.websocket_connections = 0
        self._lock = threading.Lock()
        self._websockets: set[tuple[socket.socket, socket.socket]] = set()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def cut_websockets(self) -> int:
        """Drop every open WebSocket at once; returns how many there were."""
        with self._lock:
            pairs, self._websockets = self._websockets, set()
        for pair in pairs:
            for sock in pair:
                _shut(sock)
        return len(pairs)

    def close(self) -> None:
        self._closed = True
        _shut(self.listener)
        self.cut_websockets()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        client.settimeout(10)
        try:
            first = client.recv(65536)
        except OSError:
            _shut(client)
            return
        websocket = b"upgrade: websocket" in first.lower()
        if not first or (websocket and self.refuse_websockets):
            _shut(client)
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=10)
            upstream.sendall(first)
        except OSError:
            _shut(client)
            return
        client.settimeout(None)
        upstream.settimeout(None)
        pair = (client, upstream)
        if websocket:
            with self._lock:
                self._websockets.add(pair)
                self.websocket_connections += 1
        threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()
        _pump(client, upstream)
        with self._lock:
            self._websockets.discard(pair)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    _shut(source)
    _shut(sink)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
