"""The HTTP requests a run makes beside its work (``--notify``, ``--pushgateway``), each
with a deadline on the whole exchange.

urllib's timeout bounds each socket operation, not the request: a server that sends a
byte every few seconds, or reads the request and never answers, holds it for ever.
Here a watchdog shuts the connection's socket down once the time is up, which ends
whatever connect, write or read waits on it. Only the status line and headers are
read: a body, however large or slow, is never waited for. Together the side requests of
a run have a budget (``SideRequestBudget``), so a run with several of them still ends
in bounded time. The one wait not cut is a host name lookup, which the system's
resolver bounds.
"""

import http.client
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

ATTEMPT_SECONDS = 10.0  # one request, from connecting to the answer's headers
BUDGET_SECONDS = 40.0  # every side request of a run together, retries and their pauses included
BUDGET_VARIABLE = "PITH_ARCHIVER_SIDE_REQUEST_SECONDS"  # overrides BUDGET_SECONDS (a shorter wait in tests)
RECUT_SECONDS = 0.1  # once the time is up, how often sockets opened since are shut down too


class SideRequestBudget:
    """The seconds left for a run's side requests; each attempt gets at most
    ``ATTEMPT_SECONDS`` of them."""

    def __init__(self, seconds: float | None = None) -> None:
        if seconds is None:
            seconds = float(os.environ.get(BUDGET_VARIABLE) or BUDGET_SECONDS)
        self.seconds = seconds
        self.attempt_seconds = min(ATTEMPT_SECONDS, seconds / 3)  # room for a first retry, at least
        self.ends = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.ends - time.monotonic())

    def next_attempt(self) -> float:
        """Seconds the next attempt may take (0: no time left for one)."""
        return min(self.attempt_seconds, self.left())

    def spent(self) -> str:
        return f"the {self.seconds:g} s all side requests of a run may take are spent"


class _Watch:
    """The connections of one request, shut down when its time is up."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.connections: list[http.client.HTTPConnection] = []
        self.expired = False
        self.done = threading.Event()

    def maker(self, http_class: type[http.client.HTTPConnection]) -> Callable[..., http.client.HTTPConnection]:
        def make(*args: Any, **kwargs: Any) -> http.client.HTTPConnection:
            self.connections.append(http_class(*args, **kwargs))
            return self.connections[-1]

        return make

    def run(self) -> None:
        if self.done.wait(self.seconds):
            return
        self.expired = True
        while True:  # a connection opened while the first cut ran is cut at the next look
            for connection in list(self.connections):
                if connection.sock is not None:
                    try:
                        connection.sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass  # closed already
            if self.done.wait(RECUT_SECONDS):
                return


class _WatchedHandler(urllib.request.HTTPSHandler):
    """urllib's handler of https, and of http too (asked before urllib's own http
    handler), with each connection it makes known to the watch."""

    handler_order = urllib.request.HTTPHandler.handler_order - 1

    def __init__(self, watch: _Watch) -> None:
        super().__init__()
        self.watch = watch

    def http_open(self, req: Any) -> Any:
        return self.do_open(http.client.HTTPConnection, req)

    def do_open(self, http_class: Any, req: Any, **http_conn_args: Any) -> Any:
        return super().do_open(self.watch.maker(http_class), req, **http_conn_args)


def send(request: urllib.request.Request, seconds: float) -> int:
    """Send ``request`` and return its answer's status once the headers are in.

    TimeoutError when the exchange took longer than ``seconds``; urllib's HTTPError for
    an error status; OSError (URLError) for what failed on the way. Proxies from the
    environment are used as urllib uses them."""
    watch = _Watch(seconds)
    opener = urllib.request.build_opener(_WatchedHandler(watch))
    watchdog = threading.Thread(target=watch.run, name="side-request-watchdog", daemon=True)
    watchdog.start()
    try:
        with opener.open(request, timeout=seconds) as response:
            return response.status
    except (OSError, http.client.HTTPException) as exc:
        if watch.expired and not isinstance(exc, urllib.error.HTTPError):
            raise TimeoutError(f"no answer within {seconds:.1f} s") from None
        if isinstance(exc, http.client.HTTPException):  # a malformed answer
            raise OSError(f"{type(exc).__name__}: {exc}") from None
        raise
    finally:
        watch.done.set()
        for connection in watch.connections:
            connection.close()
        watchdog.join()
