"""A loopback HTTP listener that records what it is sent: a stand-in for a webhook
endpoint or a Prometheus Pushgateway (both are plain HTTP receivers), for the tests
of ``--notify`` and ``--pushgateway``."""

import socket
import threading
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
