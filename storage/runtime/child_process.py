"""A child process of our own code, spoken to over sockets in length-framed messages.

The crawl moves GIL-bound work per record (verifying a bundle, writing its WARC
records) to a child on the other core. A child hosts one or more *services*, each a
function of ours taking a socket (``"package.module:function"``):
``start_child(service, ...)`` runs ``python -P -m storage.runtime.child_process FD=service ...``
with the crawl's own import path (not the working folder's) and hands back the process
and the crawl's end of each service's socket. The first service runs in the child's
main thread and its end is the child's end; the others run in threads of their own.
One child hosting both the WARC writer and the verifier is one interpreter and one
import set fewer than two (bench/RESULTS.md, issue 40). Each message is its length
(``FRAME``) and its bytes; no pickle crosses (a process that unpickles runs whatever it
is sent).

``WatchedChild`` is such a child that the crawl never waits on: messages go down the
first service's socket from a sender thread of its own, behind a queue bounded in
bytes, and a child that makes no progress for a bounded time is killed (a child stopped
by ``kill -STOP``, or stuck, would otherwise hold whoever writes to it for as long as
it stays so); the other services' sockets are their users' (``take_channel``).
"""

import importlib
import logging
import os
import queue
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import BinaryIO

from storage.runtime.kept_out import keep_out

logger = logging.getLogger(__name__)

FRAME = struct.Struct(">Q")  # each message: its length, then its bytes
HEARTBEAT = 2.0  # seconds between a watched child's empty messages, its sign of life
POLL = 0.5  # seconds between two looks at a child that does not read or answer
BUFFERS_AT_ONCE = 512  # buffers handed to one sendmsg (the system allows 1024)
STOP_WAIT = 30.0  # seconds a stopping child may take to exit before it is killed
STILL_RUNNING = "still running"
# imported by a library when installed, used by no service of ours: warcio imports fsspec (~3 MiB)
NEVER_IN_A_CHILD = ("fsspec",)


def start_child(*services: str) -> tuple[subprocess.Popen, list[socket.socket]]:
    """A child hosting ``services`` (``"package.module:function"``), each given its end of
    a socket pair; returns the process and our ends, in the same order."""
    pairs = [socket.socketpair() for _ in services]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(path for path in sys.path if path)}
    process = subprocess.Popen(  # noqa: S603 - this interpreter running functions of our own
        [
            sys.executable,
            "-P",
            "-m",
            __name__,
            *(f"{theirs.fileno()}={service}" for (_, theirs), service in zip(pairs, services)),
        ],
        pass_fds=[theirs.fileno() for _, theirs in pairs],
        stdin=subprocess.DEVNULL,
        env=environment,
    )
    for _, theirs in pairs:
        theirs.close()
    return process, [ours for ours, _ in pairs]


def host(arguments: list[str]) -> None:
    """In the child: run each ``FD=package.module:function`` of ``arguments`` with its
    socket, the first in this thread; the child ends when the first returns."""
    for signum in (signal.SIGINT, signal.SIGTERM):  # the crawl's to handle (a terminal or systemd signals us all):
        signal.signal(signum, signal.SIG_IGN)  # it finishes what is under way; a parent gone, our socket ends
    hosted = []
    for argument in arguments:
        descriptor, _, service = argument.partition("=")
        module, _, function = service.partition(":")
        serve = getattr(importlib.import_module(module), function)
        hosted.append((serve, socket.socket(fileno=int(descriptor))))
    (first, first_socket), *others = hosted
    for serve, sock in others:
        threading.Thread(target=serve, args=(sock,), daemon=True, name=serve.__name__).start()
    first(first_socket)


def framed(*messages: bytes) -> bytes:
    """Messages as they go down the socket, each behind its length."""
    return b"".join(FRAME.pack(len(message)) + message for message in messages)


def messages(incoming: BinaryIO) -> Iterator[bytes]:
    """The messages read from a socket's file, until the other end closes it."""
    while len(header := incoming.read(FRAME.size)) == FRAME.size:
        yield incoming.read(FRAME.unpack(header)[0])


def keep_alive(sock: socket.socket, sending: threading.Lock) -> None:
    """In a watched child: an empty message at once and every ``HEARTBEAT`` seconds, from
    a daemon thread, while the process runs (``sending`` serializes it with the child's
    answers)."""

    def beat() -> None:
        while True:
            with sending:
                try:
                    sock.sendall(framed(b""))
                except OSError:
                    return
            time.sleep(HEARTBEAT)

    threading.Thread(target=beat, daemon=True, name="heartbeat").start()


class WatchedChild:
    """A child (``start_child``) that never blocks its caller. ``send`` sends a
    message as far as the socket takes it at once and queues the rest for a sender
    thread; ``full`` says the queue holds ``max_queued`` bytes or more, and
    ``when_room`` calls back (from any thread) once it holds less, or the child is
    gone. ``ask`` sends a message and waits for the child's next one. A child that
    takes none of the queued bytes for ``stall_timeout`` seconds, or says nothing that
    long (it sends an empty message every ``HEARTBEAT`` seconds), whether an answer is
    awaited or not (a service it hosts may be waited on), is killed; ``gone`` then says
    why (or how it died), and what was queued is dropped. ``hosted``: more services in
    the same process, whose sockets their users take (``take_channel``)."""

    def __init__(self, service: str, stall_timeout: float, max_queued: int, hosted: tuple[str, ...] = ()) -> None:
        self.process, (self._socket, *channels) = start_child(service, *hosted)
        self._channels: list[socket.socket | None] = list(channels)
        self.module = service.partition(":")[0]
        self.stall_timeout = stall_timeout
        self.max_queued = max_queued
        self.gone: str | None = None
        self._state = threading.Condition()  # the queue, ``gone``, the callbacks
        self._queue: deque[bytes] = deque()
        self._queued = 0  # bytes in the queue and in the sender's hands
        self._room_waiters: list[Callable[[], None]] = []
        self._stopping = False
        self._sending = False  # the sender holds buffers taken from the queue
        self._last_asked = False  # its exit is expected once it answers
        self._answers: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._heard = time.monotonic()
        self._sender = threading.Thread(target=self._send_all, daemon=True, name=f"{self.module}-send")
        self._sender.start()
        threading.Thread(target=self._read_all, daemon=True, name=f"{self.module}-read").start()

    def send(self, *parts: bytes) -> bool:
        """Queue ``parts``, each a message (no copy is made); False once the child is gone.
        When nothing is queued they go down the socket at once, as far as it takes them
        without waiting: waking the sender thread for each message costs the caller more
        than the send, as the sender's every call then waits for the GIL the caller holds."""
        buffers: list = [buffer for part in parts for buffer in (FRAME.pack(len(part)), part)]
        with self._state:
            if self.gone is not None or self._stopping:
                return False
            if not self._queue and not self._sending:
                buffers = self._send_now(buffers)
                if not buffers:
                    return True
            self._queue.extend(buffers)
            self._queued += sum(map(len, buffers))
            self._state.notify()
        return True

    def _send_now(self, buffers: list) -> list:
        """Send what the socket takes of ``buffers`` without waiting (under the state
        lock, nothing queued); returns the rest, for the sender."""
        views = [memoryview(buffer) for buffer in buffers if buffer]
        try:
            sent = self._socket.sendmsg(views[:BUFFERS_AT_ONCE], [], socket.MSG_DONTWAIT)
        except OSError:  # full, or closed: the sender waits, or says how the child died
            return buffers
        while views and sent >= len(views[0]):
            sent -= len(views.pop(0))
        if views and sent:
            views[0] = views[0][sent:]
        return views

    def take_channel(self, index: int) -> socket.socket | None:
        """Our end of the socket of hosted service ``index``, now the caller's to close;
        None once taken, or when the child is gone."""
        with self._state:
            channel, self._channels[index] = self._channels[index], None
            if self.gone is not None and channel is not None:
                channel.close()
                return None
        return channel

    @property
    def full(self) -> bool:
        return self._queued >= self.max_queued and self.gone is None

    def when_room(self, callback: Callable[[], None]) -> None:
        with self._state:
            if self.full:
                self._room_waiters.append(callback)
                return
        callback()

    def ask(self, message: bytes, last: bool = False) -> bytes | None:
        """Send ``message`` and return the child's answer: None when it is gone.
        ``last``: the child exits once it has answered."""
        self._last_asked = last
        if not self.send(message):
            return None
        while True:
            try:
                answer = self._answers.get(timeout=POLL)
            except queue.Empty:
                if time.monotonic() - self._heard > self.stall_timeout:
                    self.kill(f"no answer for {self.stall_timeout:g} s, killed")
                continue
            if answer is None:
                self._lose(_exit_status(self.process))
            return answer

    def kill(self, why: str) -> None:
        """Kill the child (a stopped one too); ``why`` becomes ``gone``."""
        self._lose(why)
        self.process.kill()

    def stop(self) -> None:
        """Let the sender send what is queued and the child exit (killed past
        ``STOP_WAIT``), then close the socket."""
        with self._state:
            self._stopping = True
            self._state.notify()
        try:
            self.process.wait(STOP_WAIT)
        except subprocess.TimeoutExpired:
            self.kill(f"did not exit within {STOP_WAIT:g} s, killed")
            self.process.wait()
        self._sender.join(STOP_WAIT)
        self._socket.close()
        for channel in self._channels:  # those nobody took
            if channel is not None:
                channel.close()

    def _lose(self, why: str) -> None:
        with self._state:
            if self.gone is not None:
                return
            self.gone = why
            logger.warning("child %s (pid %d) stopped: %s", self.module, self.process.pid, why)
            self._queue.clear()
            self._queued = 0
            waiters, self._room_waiters = self._room_waiters, []
            self._state.notify_all()
        for callback in waiters:
            callback()

    def _send_all(self) -> None:
        while True:
            with self._state:
                while not self._queue and self.gone is None and not self._stopping:
                    self._state.wait(POLL)
                    if time.monotonic() - self._heard > self.stall_timeout:  # a frozen child, idle or not
                        self.kill(f"said nothing for {self.stall_timeout:g} s, killed")
                if self.gone is not None or not self._queue:
                    return
                count = min(len(self._queue), BUFFERS_AT_ONCE)
                buffers = [self._queue.popleft() for _ in range(count)]
                self._sending = True
            size = sum(map(len, buffers))
            if not self._write(buffers):
                return
            with self._state:
                self._sending = False
                if self.gone is not None:
                    return
                self._queued -= size
                waiters = [] if self.full else self._room_waiters
                self._room_waiters = [] if waiters else self._room_waiters
            for callback in waiters:
                callback()

    def _write(self, buffers: list[bytes]) -> bool:
        """Send ``buffers`` whole; False when the child died or was killed meanwhile."""
        views = [memoryview(buffer) for buffer in buffers if buffer]  # an empty body is its frame alone
        progress = time.monotonic()
        while views:
            try:
                sent = self._socket.sendmsg(views, [], socket.MSG_DONTWAIT)
            except BlockingIOError:
                select.select([], [self._socket], [], POLL)
                if self.gone is not None:
                    return False
                if time.monotonic() - progress > self.stall_timeout:
                    self.kill(f"took nothing for {self.stall_timeout:g} s, killed")
                    return False
                continue
            except OSError as exc:  # its end closed: say how it died, when it has (the reader may not have seen it yet)
                status = _exit_status(self.process, POLL)
                self._lose(status if status != STILL_RUNNING else f"{type(exc).__name__}: {exc}")
                return False
            progress = time.monotonic()
            while sent:
                if sent >= len(views[0]):
                    sent -= len(views.pop(0))
                else:
                    views[0], sent = views[0][sent:], 0
        return True

    def _read_all(self) -> None:
        try:
            for message in messages(self._socket.makefile("rb")):
                self._heard = time.monotonic()
                if message:  # an empty one only says the child lives
                    self._answers.put(message)
        except OSError:
            pass
        if not self._stopping and not self._last_asked:
            self._lose(_exit_status(self.process))
        self._answers.put(None)


def _exit_status(process: subprocess.Popen, timeout: float = STOP_WAIT) -> str:
    try:
        code = process.wait(timeout)
    except subprocess.TimeoutExpired:
        return STILL_RUNNING
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}"


if __name__ == "__main__":
    keep_out(NEVER_IN_A_CHILD, "kept out of the crawl's children")
    host(sys.argv[1:])
