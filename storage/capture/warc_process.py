"""The crawl's WARC files, written by a child process on the other core.

Writing a WARC record is Python work under the GIL: warcio builds its headers and
digests, and gzips it, ~1 ms a bundle with its request and verdict records, a quarter
of Scrapy's thread in a crawl (bench/RESULTS.md, "Second round: WARC off Scrapy's
thread"). ``WarcProcess`` hands each exchange, as a JSON header and the body's bytes, to
a child (``storage.capture.warc_child``) that runs ``storage.capture.warc.WarcWriter``, which indexes
each file (CDXJ) as it writes it. The crawl waits for nothing but a roll: the files
finished since the last one come back then, and are stored in the run that rolls
(at each commit, and at the end).

The child is watched (``child_process.WatchedChild``): records go down its socket
from a thread of their own, behind a queue of at most the policy's ``queue_bytes``; a full queue
asks the crawl to hold off (``record`` returns False, ``when_room`` says when to go
on), never blocks it. A child that dies, or that takes nothing for the policy's
``stall_timeout`` (then it is killed), costs the records it had not written, never the
run: the next roll salvages what it left (its finished files, and its open file up to
the last whole record, by a child of their own) into the run, the crawl goes on
without WARC records, and ``lost`` counts the exchanges handed over that no file holds.
"""

import logging
import socket
from collections.abc import Callable
from dataclasses import asdict
from datetime import timezone
from pathlib import Path
from typing import Generic, Protocol, TypeVar

import orjson
from warcio.timeutils import datetime_to_iso_date

from storage.archive import layout
from storage.archive.manifest import listed
from storage.archive.reader import table_batches
from storage.archive.stores import ObjectInfo, ObjectStore, StorageError
from storage.capture.captures import read_batches
from storage.capture.exchanges import Exchange, FetchFailure
from storage.capture.warc import DIGESTS_KEPT, SEED_COLUMNS, Run, WarcPolicy
from storage.runtime.child_process import WatchedChild

logger = logging.getLogger(__name__)

CHILD = "storage.capture.warc_child:serve_warc_writer"

_Run = TypeVar("_Run", contravariant=True)


class StoreFile(Protocol[_Run]):
    """What stores each file the child hands back, in the run ``roll`` or ``close``
    named (it then owns the spool files): the file, its captures rows and its sorted
    CDXJ index; ``failure`` says why the child could not index it (None: it did)."""

    def __call__(self, run: _Run, path: str, spool: Path, captures: Path, index: Path, failure: str | None, /) -> None:
        """Store the file, or fail the run."""


class WarcProcess(Generic[Run]):
    """The WARC files of one crawl, in a child process: ``record``, ``failure`` and
    ``verdict`` from the crawl's thread, ``roll(run)``, ``close(run)``, ``discard()``
    from one thread at a time. ``emit`` stores each finished file in its run (``StoreFile``)."""

    def __init__(
        self,
        run_id: str,
        spool_dir: str | Path,
        emit: StoreFile[Run],
        info: dict,
        policy: WarcPolicy = WarcPolicy(),
    ) -> None:
        self._emit = emit
        self._run_id = layout.check_run_id(run_id)
        self._spool_dir = str(spool_dir)
        self._policy = policy
        self._child = WatchedChild(CHILD, policy.stall_timeout, policy.queue_bytes, policy.hosted)
        self._handed: set[str] = set()  # names of the files handed back
        self._salvaged = False
        self.exchanges = 0  # exchanges (and requests that got no response) handed to the child
        self.recorded = 0  # of them, those the files handed back hold
        self._send(["open", self._run_id, self._spool_dir, info, policy.max_bytes])

    @property
    def stopped(self) -> str | None:
        """Why the writer stopped before the crawl closed it (None: it did not)."""
        return self._child.gone

    @property
    def lost(self) -> int:
        """Exchanges handed over that no file holds (read once closed)."""
        return self.exchanges - self.recorded

    def record(self, exchange: Exchange) -> bool:
        """The exchange's response (or revisit) and request records. False: the queue
        is full, hold off until ``when_room`` calls back."""
        fields = {name: value for name, value in vars(exchange).items() if name != "body"}
        fields["request_body"] = exchange.request_body.decode("latin-1")
        self.exchanges += 1
        self._send(["record", fields], exchange.body)
        return not self._child.full

    def when_room(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (from any thread) once the queue has room, or the writer is gone."""
        self._child.when_room(callback)

    def failure(self, failure: FetchFailure) -> None:
        """A ``metadata`` record of a request that got no response."""
        self.exchanges += 1
        self._send(["failure", asdict(failure)])

    def verdict(self, url: str, verdict: dict) -> None:
        """A ``metadata`` record of what the archive made of the bundle from ``url``."""
        self._send(["verdict", url, verdict])

    def seed(self, payloads: list[tuple[str, tuple[str, str, str]]]) -> None:
        """Payloads committed runs archived (``recent_payloads``): revisits refer to them."""
        self._send(["seed", payloads])

    def roll(self, target: Run) -> None:
        """Finish the open file; it and every file finished since go into ``target``."""
        self._hand_over(target, self._ask(["roll"]))

    def close(self, target: Run) -> None:
        """Finish the last file into ``target``; the child exits."""
        self._hand_over(target, self._ask(["close"], last=True))
        self._child.stop()

    def discard(self) -> None:
        """Drop every file not yet handed over (an aborted run); the child exits."""
        self._child.ask(orjson.dumps(["discard"]), last=True)
        self._child.stop()

    def channel(self, service: str) -> socket.socket | None:
        """Our end of the socket of ``service``, hosted in the writer's process (the
        policy's ``hosted``), for the caller to keep and close; None when it is not
        hosted, already taken, or the writer is gone."""
        if service not in self._policy.hosted:
            return None
        return self._child.take_channel(self._policy.hosted.index(service))

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self._child.process.pid

    def _send(self, message: list, body: bytes | None = None) -> None:
        parts = [orjson.dumps(message)] if body is None else [orjson.dumps(message), body]
        self._child.send(*parts)

    def _ask(self, message: list, last: bool = False) -> dict | None:
        answer = self._child.ask(orjson.dumps(message), last)
        if answer is not None:
            return orjson.loads(answer)
        return self._salvage()

    def _salvage(self) -> dict | None:
        """Once the writer is gone: the files it left, made whole by a child of their own."""
        if self._salvaged:
            return None
        self._salvaged = True
        logger.error("the WARC writer stopped (%s): the crawl goes on without WARC records", self.stopped)
        salvager = WatchedChild(CHILD, self._policy.stall_timeout, self._policy.queue_bytes)
        try:
            answer = salvager.ask(orjson.dumps(["salvage", self._spool_dir, self._run_id, sorted(self._handed)]), True)
        finally:
            salvager.stop()
        if answer is None:
            logger.error("the WARC files the writer left could not be salvaged (%s)", salvager.gone)
            return None
        return orjson.loads(answer)

    def _hand_over(self, target: Run, answer: dict | None) -> None:
        if answer is None:
            return
        for error in answer["errors"]:
            logger.error("a WARC record could not be written: %s", error)
        for path, spool, captures, index, failure, exchanges in answer["files"]:
            self._handed.add(path.rsplit("/", 1)[-1])
            self.recorded += exchanges
            self._emit(target, path, Path(spool), Path(captures), Path(index), failure)


def recent_payloads(store: ObjectStore, manifests: list[dict], most: int = DIGESTS_KEPT) -> list:
    """``(payload digest, (url, WARC-Date, record id))`` of the newest ``most``
    response records the committed ``manifests`` list in their captures tables,
    oldest first: what a re-crawl's identical-payload revisits refer to."""
    found = []
    for manifest in reversed(manifests):
        files = [entry for entry in listed(manifest) if entry.table == "captures"]
        for entry in files:
            for batch in table_batches(store, entry, SEED_COLUMNS):
                for row in batch.to_pylist():
                    if row["warc_record_type"] == "response" and row["content_digest"]:
                        date = datetime_to_iso_date(row["fetch_time"].astimezone(timezone.utc))
                        found.append(
                            (row["fetch_time"], row["content_digest"], (row["url"], date, row["warc_record_id"]))
                        )
        if len(found) >= most:
            break
    found.sort(key=lambda item: item[0])
    return [(digest, where) for _, digest, where in found[-most:]]


def store_warc(
    store: ObjectStore,
    path: str,
    spool: Path,
    captures: Path,
    index: Path,
    failure: str | None,
    add_rows: Callable[[list[dict]], None],
) -> list[ObjectInfo]:
    """Store a finished WARC with its sorted CDXJ index, and hand its spooled
    ``captures`` rows to ``add_rows(rows)``: in an upload thread, before the run's
    tables close (its commit waits for this job). ``failure``: why the child could not
    index it (the run fails). The spool files are removed."""
    try:
        if failure is not None:
            raise StorageError(f"indexing {path.rsplit('/', 1)[-1]} failed: {failure}")
        for batch in read_batches(captures):
            add_rows(batch)
        return [store.put_file(path, spool), store.put_file(layout.warc_index(path), index)]
    finally:
        for name in (captures, spool, index):
            name.unlink(missing_ok=True)
