"""The mirror as a public server, over real sockets: read deadlines, the idle keep-alive
timeout, the send deadline, the connection cap and strict request parsing, mostly
against a real ``serve`` process whose log must never show a traceback for any of it.
Deadlines are 1 s here (``QUICK``) so that the file runs in seconds."""

import logging
import resource
import socket
import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from storage.serving.limits import ServerLimits, descriptor_room
from storage.serving.source import BUNDLES_DIR
from tests.plugins.cli import run_cli
from tests.plugins.mirror import serve_process

REAL = "RLLQL6357CWNZYHNBMCYD3UK5B"  # arXiv 1904.12043v2, a real registry bundle
BUNDLE = f"/pith/{REAL}/bundle.json"
DEADLINE = 1.0
QUICK = ("--header-timeout", "1", "--body-timeout", "1", "--idle-timeout", "1", "--send-timeout", "1")
SLACK = 1.5  # what a loaded machine may add to a deadline
EARLY = 0.1  # the server starts its clock a moment before the client starts its own
GET = f"GET {BUNDLE} HTTP/1.1\r\nHost: mirror\r\n\r\n".encode()


@dataclass
class Served:
    url: str
    address: tuple[str, int]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text()


@contextmanager
def serving(corpus_dir, tmp_path, *options, **popen):
    """A ``serve`` process with 1 s deadlines; its stderr (at -v) goes to a file."""
    log_path = tmp_path / "serve.log"
    with open(log_path, "w") as log, serve_process(corpus_dir, "-v", *QUICK, *options, stderr=log, **popen) as (_, url):
        parts = urlsplit(url)
        yield Served(url, (parts.hostname, parts.port), log_path)


def assert_no_traceback(served: Served) -> None:
    log = served.log()
    assert "Traceback" not in log and "Too many open files" not in log, log[-3000:]


def read_until_closed(sock: socket.socket) -> bytes:
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def read_answer(sock: socket.socket) -> bytes:
    """One answer with a Content-Length, read off a connection that stays open."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(
        next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


def status(answer: bytes) -> int:
    return int(answer[9:12]) if answer.startswith(b"HTTP/1.1 ") else 0


def exchange(address, data: bytes) -> bytes:
    """Send ``data``, then read until the server closes the connection."""
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(data)
        return read_until_closed(sock)


def stored(corpus_dir) -> bytes:
    return (corpus_dir / BUNDLES_DIR / f"{REAL}.bundle.json").read_bytes()


MALFORMED = {
    "Content-Length: superscript two (latin-1)": b"GET / HTTP/1.1\r\nHost: m\r\nContent-Length: \xb2\r\n\r\n",
    "Content-Length: superscript two (UTF-8)": "GET / HTTP/1.1\r\nHost: m\r\nContent-Length: ²\r\n\r\n".encode(),
    "Content-Length: signed": b"GET / HTTP/1.1\r\nHost: m\r\nContent-Length: +0\r\n\r\n",
    "two Content-Lengths": b"GET / HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n",
    "bare LF inside a header line": b"GET / HTTP/1.1\r\nHost: m\r\nX-A: a\nContent-Length: 5\r\n\r\n",
    "bare CR inside a header line": b"GET / HTTP/1.1\r\nHost: m\r\nX-A: a\rb\r\n\r\n",
    "NUL in a header value": b"GET / HTTP/1.1\r\nHost: m\r\nX-A: a\x00b\r\n\r\n",
    "obsolete line folding": b"GET / HTTP/1.1\r\nHost: m\r\nX-A: a\r\n folded\r\n\r\n",
    "space before the colon": b"GET / HTTP/1.1\r\nHost : m\r\n\r\n",
    "a header line without a colon": b"GET / HTTP/1.1\r\nHost m\r\n\r\n",
    "too many header lines": b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(101)) + b"\r\n",
    "not HTTP/1.x": b"GET / HTTP/2.0\r\n\r\n",
    "no request target": b"GET HTTP/1.1\r\n\r\n",
    "garbage": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
}


def test_malformed_requests_are_400_and_closed_and_the_server_serves_on(corpus_dir, tmp_path):
    with serving(corpus_dir, tmp_path) as served:
        answers = {}
        for name, data in MALFORMED.items():
            with socket.create_connection(served.address, timeout=10) as sock:
                sock.sendall(data)
                answer = read_answer(sock)
            answers[name] = status(answer), b"\r\nConnection: close\r\n" in answer
        assert answers == dict.fromkeys(MALFORMED, (400, True))
        answer = exchange(served.address, f"GET {BUNDLE} HTTP/1.1\r\nConnection: close\r\n\r\n".encode())
        assert status(answer) == 200 and answer.endswith(stored(corpus_dir))
    assert_no_traceback(served)


@pytest.mark.slow
def test_a_head_trickled_past_the_header_deadline_gets_408(corpus_dir, tmp_path):
    with serving(corpus_dir, tmp_path) as served, socket.create_connection(served.address, timeout=10) as sock:
        began = time.monotonic()
        sock.sendall(b"GET / HTTP/1.1\r\n")
        answer = b""
        for i in range(10):  # a header line every 0.3 s: never idle, never done
            time.sleep(0.3)
            try:
                sock.sendall(b"X-Slow-%d: 1\r\n" % i)
            except OSError:
                break
        answer = read_until_closed(sock)
        assert status(answer) == 408
        assert DEADLINE - EARLY <= time.monotonic() - began < DEADLINE + SLACK + 0.3
    assert_no_traceback(served)


@pytest.mark.slow
def test_request_with_only_lf_line_ends_is_refused_at_the_header_deadline(corpus_dir, tmp_path):
    with serving(corpus_dir, tmp_path) as served:
        began = time.monotonic()
        assert status(exchange(served.address, b"GET / HTTP/1.1\nHost: m\n\n")) == 408
        assert time.monotonic() - began < DEADLINE + SLACK
    assert_no_traceback(served)


@pytest.mark.slow
def test_a_declared_body_never_sent_is_cut_at_the_body_deadline(corpus_dir, tmp_path):
    with serving(corpus_dir, tmp_path) as served:
        began = time.monotonic()
        answer = exchange(served.address, f"GET {BUNDLE} HTTP/1.1\r\nContent-Length: 1000\r\n\r\n".encode() + b"x" * 10)
        assert status(answer) == 408
        assert DEADLINE - EARLY <= time.monotonic() - began < DEADLINE + SLACK
    assert_no_traceback(served)


@pytest.mark.slow
def test_an_idle_keep_alive_connection_is_closed_after_the_idle_timeout(corpus_dir, tmp_path):
    with serving(corpus_dir, tmp_path) as served, socket.create_connection(served.address, timeout=10) as sock:
        sock.sendall(GET)
        assert status(read_answer(sock)) == 200
        time.sleep(DEADLINE / 2)  # within the idle timeout the connection still carries a request
        sock.sendall(GET)
        assert status(read_answer(sock)) == 200
        idle_since = time.monotonic()
        assert read_until_closed(sock) == b""  # closed quietly: no answer to a request never made
        assert DEADLINE - EARLY <= time.monotonic() - idle_since < DEADLINE + SLACK
    assert_no_traceback(served)


@pytest.mark.slow
def test_a_client_that_does_not_take_its_answers_is_dropped_at_the_send_deadline(corpus_dir, tmp_path):
    with serving(corpus_dir, tmp_path) as served:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
        sock.settimeout(10)
        with sock:
            sock.connect(served.address)
            sock.sendall(GET * 1000)  # about 14 MB of answers, pipelined, none read
            time.sleep(DEADLINE + SLACK + 1)
            received = read_until_closed(sock)
        assert received.count(b"HTTP/1.1 200 OK") < 1000
    assert_no_traceback(served)


@pytest.mark.slow
def test_300_slow_connections_under_ulimit_256_leave_room_for_a_legitimate_get(corpus_dir, tmp_path):
    """Slowloris: each slow connection trickles a head it never ends. The cap (under 256
    descriptors: descriptor_room(256), 144) keeps descriptors free (a surplus is turned
    away with 503, or waits in the kernel's queue), the header deadline cuts the slow
    ones, and a client asking properly gets its bundle within the deadline."""

    def lower_open_file_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    cap = descriptor_room(256)
    with serving(corpus_dir, tmp_path, preexec_fn=lower_open_file_limit) as served:
        slow = []
        for _ in range(300):  # each starts its request at once, and never ends it
            slow.append(socket.create_connection(served.address, timeout=10))
            slow[-1].sendall(b"GET / HTTP/1.1\r\n")
        stop = threading.Event()

        def trickle():
            while not stop.is_set():
                for sock in slow:
                    try:
                        sock.send(b"X-Slow: 1\r\n")
                    except OSError:
                        pass
                time.sleep(0.2)

        trickler = threading.Thread(target=trickle, daemon=True)
        trickler.start()
        began = time.monotonic()
        answer, refusals = b"", Counter()
        while status(answer) != 200 and time.monotonic() - began < DEADLINE + 3 * SLACK:
            answer = exchange(served.address, f"GET {BUNDLE} HTTP/1.1\r\nConnection: close\r\n\r\n".encode())
            refusals[status(answer)] += 1
            time.sleep(0.1 if status(answer) != 200 else 0)
        waited = time.monotonic() - began
        stop.set()
        trickler.join()
        answers = Counter(status(read_until_closed(sock)) for sock in slow)
        for sock in slow:
            sock.close()
    # turned away at once (503; 0 when a reset overtook it), until the deadline cut slow connections
    assert status(answer) == 200 and answer.endswith(stored(corpus_dir)), (refusals, answers)
    assert set(refusals) <= {503, 0, 200} and waited < DEADLINE + 2 * SLACK, (waited, refusals)
    # each slow connection was cut at the header deadline or turned away: none served, none left open
    assert set(answers) <= {408, 503, 0} and answers[408] >= cap // 2, answers
    assert_no_traceback(served)  # nor "Too many open files"


def test_connections_beyond_the_cap_get_503_and_a_close(mirror, caplog):
    caplog.set_level(logging.DEBUG)
    server = mirror(limits=ServerLimits(max_connections=2))
    address = urlsplit(server.url).hostname, urlsplit(server.url).port
    held = [socket.create_connection(address, timeout=10) for _ in range(2)]
    time.sleep(0.2)  # both accepted
    answer = exchange(address, GET)
    assert status(answer) == 503 and b"Retry-After: 1\r\n" in answer and b"Connection: close\r\n" in answer
    assert server.refused_connections == 1
    held.pop().close()
    time.sleep(0.2)  # its place is free again
    assert status(exchange(address, f"GET {BUNDLE} HTTP/1.1\r\nConnection: close\r\n\r\n".encode())) == 200
    held.pop().close()
    assert not [record for record in caplog.records if record.exc_info]


@pytest.mark.parametrize("options", [("--max-connections", "100000000"), ("--header-timeout", "0")])
def test_impossible_limits_are_usage_errors(corpus_dir, options):
    result = run_cli("serve", str(corpus_dir), *options)
    assert result.returncode == 2 and "Traceback" not in result.output  # a usage error, not a crash
    assert "max_connections must be between 1 and" in result.output or "x>0" in result.output
