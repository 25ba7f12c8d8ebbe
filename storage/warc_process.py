"""The crawl's WARC files, written by a child process on the other core.

Writing a WARC record is Python work under the GIL: warcio builds its headers and
digests, and gzips it, ~1 ms a bundle with its request and verdict records, a quarter
of Scrapy's thread in a crawl (bench/RESULTS.md, "Second round: WARC off Scrapy's
thread"). ``WarcProcess`` sends each exchange down a socket instead, as a JSON header and the body's bytes, to
a child (``storage.warc_child``) that runs ``storage.warc.WarcWriter`` and indexes
each file it finishes (CDXJ). The crawl waits for nothing but a roll: the files
finished since the last one come back then, and are stored in the run that rolls
(at each commit, and at the end).

A child that dies takes its open file with it: the crawl goes on without WARC
records, logs the error once and counts the records it could not hand over
(``lost``: those sent in the moment before the kernel closed the dead child's socket
are gone uncounted); the bundles themselves are archived and committed as ever.
"""

import logging
import subprocess
import threading
from collections.abc import Callable
from dataclasses import asdict
from datetime import timezone
from pathlib import Path
from typing import Any

import orjson
from warcio.timeutils import datetime_to_iso_date

from . import layout
from .captures import read_batches
from .child_process import framed, messages, start_child
from .manifest import listed
from .reader import table_batches
from .stores import ObjectInfo, ObjectStore, StorageError
from .warc import DIGESTS_KEPT, SEED_COLUMNS, Exchange, FetchFailure, WarcPolicy

logger = logging.getLogger(__name__)

STOP_WAIT = 30.0  # seconds a closing crawl waits for the child to exit


class WarcProcess:
    """The WARC files of one crawl, in a child process: ``record``, ``failure`` and
    ``verdict`` from any thread, ``roll(run)``, ``close(run)``, ``discard()``.
    ``emit(run, path, spool, captures, index, failure)`` stores a finished file in
    ``run`` (it then owns its spool files)."""

    def __init__(
        self,
        run_id: str,
        spool_dir: str | Path,
        emit: Callable[..., None],
        info: dict,
        policy: WarcPolicy = WarcPolicy(),
    ) -> None:
        self._emit = emit
        self._process, self._socket = start_child("storage.warc_child")
        self._answers = messages(self._socket.makefile("rb"))
        self._sending = threading.Lock()  # one message at a time down the socket
        self._asking = threading.Lock()  # one question awaiting its answer at a time
        self._closed = False
        self._gone = False  # the child died
        self.lost = 0  # records the child did not take (it died) or could not write
        self._send(["open", layout.check_run_id(run_id), str(spool_dir), info, policy.max_bytes])

    def record(self, exchange: Exchange) -> None:
        """The exchange's response (or revisit) and request records."""
        fields = {name: value for name, value in vars(exchange).items() if name != "body"}
        fields["request_body"] = exchange.request_body.decode("latin-1")
        self._record(["record", fields], exchange.body)

    def failure(self, failure: FetchFailure) -> None:
        """A ``metadata`` record of a request that got no response."""
        self._record(["failure", asdict(failure)])

    def verdict(self, url: str, verdict: dict) -> None:
        """A ``metadata`` record of what the archive made of the bundle from ``url``."""
        self._record(["verdict", url, verdict])

    def seed(self, payloads: list[tuple[str, tuple[str, str, str]]]) -> None:
        """Payloads committed runs archived (``recent_payloads``): revisits refer to them."""
        self._send(["seed", payloads])

    def roll(self, target: Any) -> None:
        """Finish the open file; it and every file finished since go into ``target``."""
        self._hand_over(target, self._ask(["roll"]))

    def close(self, target: Any) -> None:
        """Finish the last file into ``target``; the child exits."""
        self._hand_over(target, self._ask(["close"]))
        self._closed = True
        self._stop()

    def discard(self) -> None:
        """Drop every file not yet handed over (an aborted run); the child exits."""
        self._ask(["discard"])
        self._closed = True
        self._stop()

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self._process.pid

    def _record(self, message: list, body: bytes | None = None) -> None:
        if not self._send(message, body) and not self._closed:
            self.lost += 1

    def _send(self, message: list, body: bytes | None = None) -> bool:
        header = orjson.dumps(message)
        data = framed(header) if body is None else framed(header, body)
        with self._sending:
            if self._closed:
                return False
            if not self._gone:
                try:
                    self._socket.sendall(data)
                    return True
                except OSError as exc:
                    self._died(exc)
            return False

    def _ask(self, message: list) -> dict | None:
        with self._asking:
            if not self._send(message):
                return None
            try:
                answer = next(self._answers, None)
            except OSError as exc:
                self._died(exc)
                return None
            if answer is None:
                self._died(f"exit status {self._process.wait()}")
                return None
            return orjson.loads(answer)

    def _hand_over(self, target: Any, answer: dict | None) -> None:
        if answer is None:
            return
        for error in answer["errors"]:
            self.lost += 1
            logger.error("a WARC record could not be written: %s", error)
        for path, spool, captures, index, failure in answer["files"]:
            self._emit(target, path, Path(spool), Path(captures), Path(index), failure)

    def _died(self, error: object) -> None:
        """Said once: the child is gone, and the file it was writing with it."""
        if not self._gone:
            self._gone = True
            logger.error("the WARC writer stopped (%s): the crawl goes on without WARC records", error)

    def _stop(self) -> None:
        try:
            self._process.wait(STOP_WAIT)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._socket.close()


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
