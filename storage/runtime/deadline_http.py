"""One HTTP exchange within one deadline, however the other side behaves: the
project's every request outside the crawl (Scrapy bounds the crawl's) goes through
``exchange``.

A socket timeout bounds each wait for a byte, not the exchange: a server that sends
its answer a byte a second, or reads the request and never answers, holds a plain
urllib or http.client call for ever. Here the exchange runs in a thread of its own
and the caller waits for it at most the deadline, the name lookup, connecting,
sending, the answer's head and body all counted together. When the time is up the
connection's socket is shut down, which ends whatever that thread waits on; a thread
still looking up a host name, the one wait a shutdown cannot cut, holds nobody (it is
a daemon, and the caller has gone on).
"""

import functools
import http.client
import socket
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from email.message import Message
from typing import IO, Any

CHUNK = 1 << 20  # bytes of a body read at a time into a sink


class NoAnswer(OSError):
    """No answer came: the connection was refused or reset, the answer was not HTTP,
    or the deadline ran out."""


class DeadlineExceeded(NoAnswer, TimeoutError):
    """The whole exchange took longer than its deadline."""


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Message
    body: bytes  # at most max_bytes + 1: one byte past the cap tells the caller the answer is too large


def exchange(
    request: urllib.request.Request, deadline: float, max_bytes: int | None = None, sink: IO[bytes] | None = None
) -> Answer:
    """Send ``request`` and return its answer, whatever its status, within ``deadline``
    seconds in all, redirects followed and proxies from the environment used as urllib
    does. ``max_bytes``: the body is read up to one byte past it, into ``sink`` a chunk
    at a time when given (the answer's body is then empty: a large object never sits in
    memory); None: only the status and headers are waited for, the body never.

    DeadlineExceeded when the time ran out; NoAnswer for what else failed on the way."""
    watch = _Watch(deadline)
    args = (request, max_bytes, sink)
    threading.Thread(target=watch.run, args=args, name="deadline-http", daemon=True).start()
    try:
        if not watch.done.wait(deadline):
            raise DeadlineExceeded(watch.late())
    finally:
        if not watch.done.is_set():  # late, or the caller interrupted
            watch.cut()
    if isinstance(watch.outcome, Exception):
        raise watch.outcome
    return watch.outcome


class _Watch:
    """One exchange: its connections, cut when the time is up, and how it ended."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.connections: list[http.client.HTTPConnection] = []
        self.sockets: list[socket.socket] = []  # kept: urllib lets go of a connection's socket once the head is in
        self.expired = threading.Event()
        self.done = threading.Event()
        self.outcome: Answer | Exception = NoAnswer("not sent")

    def late(self) -> str:
        return f"no answer within {self.deadline:.1f} s"

    def run(self, request: urllib.request.Request, max_bytes: int | None, sink: IO[bytes] | None) -> None:
        try:
            self.outcome = self._exchange(request, max_bytes, sink)
        except Exception as exc:  # handed to the caller, raised there
            self.outcome = self._named(exc)
        finally:
            for connection in self.connections:
                connection.close()
            self.done.set()

    def _exchange(self, request: urllib.request.Request, max_bytes: int | None, sink: IO[bytes] | None) -> Answer:
        opener = urllib.request.build_opener(_WatchedHandler(self))
        try:
            response = opener.open(request, timeout=self.deadline)
        except urllib.error.HTTPError as error:  # an answer all the same: its status is the caller's to judge
            response = error
        with response:
            body, read = b"", 0
            if max_bytes is not None and sink is None:
                body = response.read(max_bytes + 1)
                read = len(body)
            elif max_bytes is not None and sink is not None:
                while read <= max_bytes and (chunk := response.read(min(CHUNK, max_bytes + 1 - read))):
                    sink.write(chunk)
                    read += len(chunk)
            missing = getattr(response, "length", None)  # of the length the head promised
            if max_bytes is not None and read <= max_bytes and missing:
                raise http.client.IncompleteRead(body, missing)  # the server closed early
            return Answer(response.status, response.headers, body)

    def _named(self, exc: Exception) -> Exception:
        cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(cause, TimeoutError) or self.expired.is_set():
            return DeadlineExceeded(self.late())
        if isinstance(cause, http.client.HTTPException):  # not HTTP, or cut short
            return NoAnswer(f"a broken answer ({type(cause).__name__}: {cause})")
        if isinstance(cause, (OSError, str)):
            return NoAnswer(str(getattr(cause, "strerror", None) or cause))
        return exc

    def cut(self) -> None:
        """Shut down every socket of the exchange; one connecting now ends itself once
        connected (``_Connection.connect``)."""
        self.expired.set()
        for sock in [*self.sockets, *(connection.sock for connection in list(self.connections))]:
            if sock is not None:
                try:  # the plain socket's shutdown, under any TLS: its reader is another thread
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
                except OSError:
                    pass  # closed already


class _Connection(http.client.HTTPConnection):
    """A connection known to its watch, which ends itself if the time ran out while it
    connected."""

    def __init__(self, *args: Any, watch: _Watch, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.watch = watch
        watch.connections.append(self)

    def connect(self) -> None:
        super().connect()
        self.watch.sockets.append(self.sock)
        if self.watch.expired.is_set():
            self.close()
            raise DeadlineExceeded(self.watch.late())


class _TLSConnection(_Connection, http.client.HTTPSConnection):
    pass


class _WatchedHandler(urllib.request.HTTPSHandler):
    """urllib's handler of https, and of http too (asked before urllib's own http
    handler), its connections watched."""

    handler_order = urllib.request.HTTPHandler.handler_order - 1
    WATCHED = {http.client.HTTPConnection: _Connection, http.client.HTTPSConnection: _TLSConnection}

    def __init__(self, watch: _Watch) -> None:
        super().__init__()
        self.watch = watch

    def http_open(self, req: Any) -> Any:
        return self.do_open(http.client.HTTPConnection, req)

    def do_open(self, http_class: Any, req: Any, **http_conn_args: Any) -> Any:
        return super().do_open(functools.partial(self.WATCHED[http_class], watch=self.watch), req, **http_conn_args)
