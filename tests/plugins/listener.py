"""A loopback HTTP listener that records what it is sent: a stand-in for a webhook
endpoint or a Prometheus Pushgateway (both are plain HTTP receivers), for the tests
of ``--notify`` and ``--pushgateway``."""

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


def free_port() -> int:
    """A loopback port nothing listens on (just now)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def closed_port_url() -> str:
    """An http URL whose connections are refused: an unreachable receiver or resolver."""
    return f"http://127.0.0.1:{free_port()}"


@dataclass
class Received:
    method: str
    path: str
    headers: dict
    body: bytes


class Listener:
    """Answers ``statuses`` in turn (then 200 for ever) and keeps every request."""

    def __init__(self, statuses=()):
        self.received: list[Received] = []
        self.statuses = list(statuses)
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                listener.received.append(Received(self.command, self.path, dict(self.headers), body))
                status = listener.statuses.pop(0) if listener.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_POST = do_PUT = _record

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener():
    """``listener(statuses=())`` -> a started Listener (``url``, ``received``)."""
    started = []

    def start(statuses=()):
        started.append(Listener(statuses))
        return started[-1]

    yield start
    for one in started:
        one.close()


class HostileReceiver:
    """A receiver that reads each request, then ``mode``: ``trickle`` sends its answer's
    status line and a header a byte every ``every`` seconds, for ever; ``trickle_body``
    sends a whole head promising a megabyte, then the body a byte every ``every``
    seconds; ``silent`` never answers; ``endless`` answers 200 with headers promising a
    terabyte and sends body bytes as fast as they are taken. Counts the requests it read."""

    def __init__(self, mode: str, every: float = 0.5):
        self.mode, self.every, self.requests = mode, every, 0
        self.stopped = threading.Event()
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopped.is_set():
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection):
        head, trickled = {
            "trickle": (b"", b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10**6),
            "trickle_body": (b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n", b"x" * 10**6),
            "endless": (b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\n", b""),
            "silent": (b"", b""),
        }[self.mode]
        with connection:
            try:
                request = b""
                while b"\r\n\r\n" not in request:
                    request += connection.recv(65536)
                self.requests += 1
                connection.sendall(head)
                for at in range(len(trickled) if trickled else 10**9):
                    if self.stopped.wait(self.every if trickled else self.every / 100):
                        return
                    if trickled:
                        connection.sendall(trickled[at : at + 1])
                    elif self.mode == "endless":
                        connection.sendall(b"x" * 65536)
            except OSError:
                return  # the client cut the connection

    def close(self):
        self.stopped.set()
        self.socket.close()


@pytest.fixture
def hostile_receiver():
    """``hostile_receiver(mode, every=0.5)`` -> a started HostileReceiver (``url``, ``requests``)."""
    started = []

    def start(mode, every=0.5):
        started.append(HostileReceiver(mode, every))
        return started[-1]

    yield start
    for one in started:
        one.close()


@contextmanager
def handler_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A stdlib server of ``handler`` on loopback (a witness that lies, say); yields its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
