"""What the crawl's WARC child runs: ``storage.capture.warc.WarcWriter``, fed over a socket.

Started by ``storage.capture.warc_process.WarcProcess`` as the service
``storage.capture.warc_child:serve_warc_writer`` of a child (``storage.runtime.child_process``).
Each message is a JSON list naming what to do (``open``, ``seed``, ``record``
followed by the body's bytes, ``failure``, ``verdict``, ``roll``, ``close``,
``discard``). Only ``roll``, ``close`` and ``discard`` are answered: with the files
finished since the last answer (each with its CDXJ index, whose lines the writer
spooled as it wrote the records, sorted in a thread of the child's own so the
records keep coming meanwhile, and the exchanges it holds) and the records that
could not be written. Meanwhile the child says every few seconds that it lives
(``child_process.keep_alive``): the crawl kills a child that falls silent.

A child started after the writer died gets one message, ``salvage``: it makes whole
the files the dead one left in the spool folder and did not hand back
(``storage.capture.warc_salvage``), and answers as ``close`` does.
"""

import os
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from storage.archive import layout
from storage.capture.cdxj import sort_index
from storage.capture.exchanges import Exchange, FetchFailure
from storage.capture.warc import WarcPolicy, WarcWriter
from storage.capture.warc_salvage import salvage
from storage.runtime.child_process import framed, keep_alive, messages

# Below the crawl's own priority: where the cores are short, Scrapy's thread goes first,
# and the WARC records wait in the socket (the crawl blocks only once its buffer is full)
NICENESS = 10


def _pairs(headers: list[list[str]]) -> list[tuple[str, str]]:
    return [(name, value) for name, value in headers]


def exchange_of(fields: dict, body: bytes) -> Exchange:
    return Exchange(
        **{
            **fields,
            "request_headers": _pairs(fields["request_headers"]),
            "response_headers": _pairs(fields["response_headers"]),
            "request_body": fields["request_body"].encode("latin-1"),
            "fetched_at": datetime.fromisoformat(fields["fetched_at"]),
            "body": body,
        }
    )


class Child:
    """One crawl's WARC files, written as the messages come, their indexes sorted as they finish."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sending = threading.Lock()  # answers and signs of life, one at a time
        self.writer: WarcWriter[None] | None = None  # the crawl names the runs: it stores the files
        self.later = ThreadPoolExecutor(1, thread_name_prefix="warc-index")  # indexing, then each answer, in order
        self.finished: list[list[Any]] = []  # files since the last answer (touched in ``later`` only)
        self.errors: list[str] = []

    def handle(self, message: list, incoming: Iterator[bytes]) -> bool:
        """Do what ``message`` says; False once the crawl said it is done."""
        kind, *args = message
        if kind == "open":
            run_id, spool_dir, info, max_bytes = args
            self.writer = WarcWriter(run_id, spool_dir, self._finished, lambda: None, info, WarcPolicy(max_bytes))
            return True
        if kind == "salvage":
            self.salvage(*args)
            return False
        writer = self._writer()
        if kind == "record":
            self._guard(writer.record, exchange_of(args[0], next(incoming)))
        elif kind == "failure":
            fields = args[0]
            self._guard(
                writer.failure, FetchFailure(**{**fields, "fetched_at": datetime.fromisoformat(fields["fetched_at"])})
            )
        elif kind == "verdict":
            self._guard(writer.verdict, *args)
        elif kind == "seed":
            writer.seed((digest, (url, date, record_id)) for digest, (url, date, record_id) in args[0])
        elif kind == "roll":
            writer.roll(None)
            self._answer()
        elif kind == "close":
            writer.close(None)
            self._answer()
            return False
        elif kind == "discard":
            writer.discard()
            self.later.submit(self._drop_finished)
            self._answer()
            return False
        return True

    def salvage(self, spool_dir: str, run_id: str, handed: list[str]) -> None:
        """Make whole the files of ``run_id`` a dead writer left in ``spool_dir``
        (those not in ``handed``, the names it handed back), then answer."""
        for spool in sorted(Path(spool_dir).glob(f"{layout.check_run_id(run_id)}-*.warc.gz")):
            if spool.name not in handed:
                self.later.submit(self._salvage, spool)
        self._answer()

    def _salvage(self, spool: Path) -> None:
        kept = salvage(spool, str(spool.parent))
        if kept is not None:
            self._index(layout.warc(spool.name), spool, *kept)

    def _writer(self) -> WarcWriter[None]:
        if self.writer is None:
            raise RuntimeError("the WARC child was not opened")
        return self.writer

    def _guard(self, write: Callable[..., Any], *args: Any) -> None:
        try:
            write(*args)
        except Exception as exc:  # the crawl goes on without the record; the answer says so
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def _finished(self, target: None, path: str, spool: Path, captures: Path, lines: Path, exchanges: int) -> None:
        self.later.submit(self._index, path, spool, captures, lines, exchanges)

    def _index(self, path: str, spool: Path, captures: Path, lines: Path, exchanges: int) -> None:
        index = spool.with_suffix(".cdxj")
        try:
            sort_index(lines, index)
            failure = None
        except Exception as exc:  # reported to the crawl, whose run then fails
            failure = f"{type(exc).__name__}: {exc}".replace("\n", " ")
        finally:
            lines.unlink(missing_ok=True)
        self.finished.append([path, str(spool), str(captures), str(index), failure, exchanges])

    def _drop_finished(self) -> None:
        for _, *files, _, _ in self.finished:
            for name in files:
                Path(name).unlink(missing_ok=True)
        self.finished.clear()

    def _answer(self) -> None:
        errors, self.errors = self.errors, []
        self.later.submit(self._send_answer, errors)

    def _send_answer(self, errors: list[str]) -> None:
        files, self.finished = self.finished, []
        with self.sending:
            self.sock.sendall(framed(orjson.dumps({"files": files, "errors": errors})))


def serve_warc_writer(sock: socket.socket) -> None:
    """The child's life: the crawl's messages, in order, until it closes or discards.
    Its thread runs below the crawl's priority (a thread of another service the child
    hosts, started before, keeps its own)."""
    os.nice(NICENESS)
    child = Child(sock)
    keep_alive(sock, child.sending)
    incoming = messages(sock.makefile("rb"))
    try:
        for message in incoming:
            if not child.handle(orjson.loads(message), incoming):
                break
    finally:
        child.later.shutdown(wait=True)
