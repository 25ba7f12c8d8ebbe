"""WARC/1.1 files of a crawl, written as the exchanges happen.

Records are gzipped one by one into a local spool file (memory stays flat however
large the file grows; ``storage.capture.warc_file``), and each capture's CDXJ line is
spooled as its record is written (``storage.capture.cdxj``); a file is rolled once it
passes ``max_bytes`` and at every commit, its index sorted (stored next to it), and
stored through the archive's create-only store in the run that commits it, with one
``captures`` row per response or revisit record (Common Crawl's index names). A crashed
run's spool never reaches the store; a rolled file that no manifest lists is an orphan.

What is recorded comes as plain values (``storage.capture.exchanges``): the storage
layer knows nothing of Scrapy.
"""

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from io import BytesIO
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from warcio.timeutils import datetime_to_iso_date

from pith.canonical import canon
from pith.shipped import version
from storage.archive import layout
from storage.archive.stores import MiB
from storage.capture.captures import Position, capture_row
from storage.capture.exchanges import (
    Exchange,
    FetchFailure,
    Held,
    not_modified_record,
    payload_digest,
    request_record,
    response_http,
    response_record,
    revisit_record,
)
from storage.capture.warc_file import WarcFile

logger = logging.getLogger(__name__)

VERDICT_TYPE = "bundle_verdict"  # a metadata record's record_type; the other is fetch_failure
SEED_COLUMNS = ["url", "fetch_time", "content_digest", "warc_record_id", "warc_record_type"]
DIGESTS_KEPT = 10_000  # payload digests remembered for identical-payload revisits (a bounded LRU)

Run = TypeVar("Run")  # the run a finished file goes into: the caller's own, handed back as it came
_Run = TypeVar("_Run", contravariant=True)


class FinishedFile(Protocol[_Run]):
    """What takes each file a ``WarcWriter`` finishes: the run ``roll``, ``close`` or
    ``target()`` named, the file's path in the archive and its spool files, which it
    then owns (``index_lines``: its CDXJ lines unsorted, ``cdxj.sort_index``), and the
    exchanges the file holds."""

    def __call__(self, run: _Run, path: str, spool: Path, captures: Path, index_lines: Path, exchanges: int, /) -> None:
        """Store the file, or hand it on."""


@dataclass(frozen=True)
class WarcPolicy:
    """When a WARC file is done: past ``max_bytes`` (compressed, on disk), and at each
    commit. A writer that takes no record for ``stall_timeout`` seconds while records
    wait (or says nothing that long when asked for its files) is stopped; past
    ``queue_bytes`` of records waiting for it, the crawl holds off. ``hosted``: other
    services its process runs beside it (the crawl's verifier), one interpreter fewer."""

    max_bytes: int = 1024 * MiB
    stall_timeout: float = 30.0
    queue_bytes: int = 8 * MiB
    hosted: tuple[str, ...] = ()  # more services for the writer's process (``storage.runtime.child_process``)


class WarcWriter(Generic[Run]):
    """The WARC files of one crawl. ``emit`` takes each finished file (``FinishedFile``)
    with the run it goes into; ``target()`` names the run files rolled by size go to
    (the current one). Thread safe."""

    def __init__(
        self,
        run_id: str,
        spool_dir: str,
        emit: FinishedFile[Run],
        target: Callable[[], Run],
        info: dict,
        policy: WarcPolicy = WarcPolicy(),
    ) -> None:
        self.target = target
        self.run_id = layout.check_run_id(run_id)
        self.info = info
        self.policy = policy
        self._spool_dir = spool_dir
        self._emit = emit
        self._lock = threading.Lock()
        self._file: WarcFile | None = None
        self._seq = 0
        self._closed = False
        self._digests: OrderedDict[str, Held] = OrderedDict()  # digest: (uri, date, record id)
        self._payloads: OrderedDict[str, Held] = OrderedDict()  # url: where its bytes last were
        self.records = 0

    # --- recording ------------------------------------------------------------
    def record(self, exchange: Exchange) -> Position | None:
        """Write the exchange's response (or revisit) and request records. Returns
        the position of the response record (None once the writer is closed)."""
        date = datetime_to_iso_date(exchange.fetched_at.astimezone(timezone.utc))
        http = response_http(exchange)
        digest = payload_digest(exchange.body)
        warc_headers = {"WARC-Date": date}
        if exchange.ip_address:
            warc_headers["WARC-IP-Address"] = exchange.ip_address
        with self._lock:
            if self._closed:
                return None
            file = self._current()
            earlier = self._digests.get(digest) if exchange.body else None
            if exchange.status == 304:
                held = self._payloads.get(exchange.url)
                record = not_modified_record(file.writer, exchange.url, digest, date, http, warc_headers, held)
            elif earlier is not None:
                record = revisit_record(file.writer, exchange.url, digest, http, warc_headers, earlier)
            else:
                record = response_record(file.writer, exchange, digest, http, warc_headers)
            position = file.write(record)
            self._remember_payload(exchange, digest, record.rec_type, (exchange.url, date, position.record_id), earlier)
            file.write(request_record(file.writer, exchange, date, position.record_id))
            file.captures.add(
                capture_row(
                    exchange.url,
                    exchange.fetched_at,
                    exchange.status,
                    digest,
                    exchange.response_headers,
                    position,
                    record.rec_type,
                )
            )
            file.exchanges += 1
            self.records += 2
            self._roll_if_full()
        return position

    def _remember_payload(
        self, exchange: Exchange, digest: str, kind: str, written: Held, earlier: Held | None
    ) -> None:
        """Where the URL's bytes now are, for the revisits that follow: in the response
        record ``written`` (its bytes under their digest too), or, for the revisit of an
        identical payload, where they were ``earlier``."""
        if kind == "response":
            self._remember(self._payloads, exchange.url, written)
            if exchange.body:
                self._remember(self._digests, digest, written)
        elif earlier is not None and exchange.status != 304:
            self._remember(self._payloads, exchange.url, earlier)

    def failure(self, failure: FetchFailure) -> Position | None:
        """A ``metadata`` record of a request that got no response (the error is the evidence)."""
        return self._metadata(
            failure.url,
            {"record_type": "fetch_failure", "method": failure.method, "error": failure.error},
            failure.fetched_at,
            exchange=True,
        )

    def verdict(self, url: str, verdict: dict) -> Position | None:
        """A ``metadata`` record of what the archive made of the bundle fetched from
        ``url`` (``verdict``: status, reason, pith_number, bundle_sha256, raw path...),
        referring to its response record when this file holds it; its capture row
        then carries the verdict too. None once the writer is closed."""
        return self._metadata(url, {"record_type": VERDICT_TYPE, **verdict}, verdict=verdict)

    def _metadata(
        self, url: str, fields: dict, when: datetime | None = None, verdict: dict | None = None, exchange: bool = False
    ) -> Position | None:
        body = canon(fields, exact=True) + b"\n"  # a record's body, never hashed as canonical: orjson's bytes
        headers = {"WARC-Date": datetime_to_iso_date(when.astimezone(timezone.utc))} if when else {}
        with self._lock:
            if self._closed:
                return None
            file = self._current()
            if verdict is not None:
                refers_to = file.captures.judge(
                    url,
                    pith_number=verdict.get("pith_number"),
                    bundle_sha256=verdict.get("bundle_sha256"),
                    status=verdict.get("status"),
                )
                if refers_to is not None:
                    headers["WARC-Refers-To"] = refers_to
            record = file.writer.create_warc_record(
                url,
                "metadata",
                payload=BytesIO(body),
                length=len(body),
                warc_content_type="application/json",
                warc_headers_dict=headers,
            )
            position = file.write(record)
            file.exchanges += exchange
            self.records += 1
            self._roll_if_full()
        return position

    # --- rolling --------------------------------------------------------------
    def roll(self, target: Run) -> None:
        """Finish the open file (if any) into ``target``, the run that commits it."""
        with self._lock:
            self._finish(target)

    def close(self, target: Run) -> None:
        """Finish the last file; nothing is recorded after."""
        with self._lock:
            self._finish(target)
            self._closed = True

    def discard(self) -> None:
        """Drop the open file unstored (an aborted run)."""
        with self._lock:
            if self._file is not None:
                self._file.discard()
                self._file = None
            self._closed = True

    def _current(self) -> WarcFile:
        if self._file is None:
            name = f"{self.run_id}-{self._seq:05d}.warc.gz"
            self._seq += 1
            self._file = WarcFile(name, self._spool_dir)
            info = {**self.info, "run_id": self.run_id, "format": "WARC File Format 1.1"}
            self._file.write(self._file.writer.create_warcinfo_record(name, info))
        return self._file

    def seed(self, payloads: Iterable[tuple[str, Held]]) -> None:
        """Remember payloads committed runs archived (``recent_payloads``), oldest
        first: a re-crawl that gets the same bytes again writes a revisit that refers
        to them, and so does a 304 from their URL."""
        with self._lock:
            for digest, where in payloads:
                self._remember(self._digests, digest, where)
                self._remember(self._payloads, where[0], where)

    @staticmethod
    def _remember(kept: OrderedDict, key: str, where: Held) -> None:
        kept[key] = where
        kept.move_to_end(key)
        while len(kept) > DIGESTS_KEPT:
            kept.popitem(last=False)

    def _roll_if_full(self) -> None:
        if self._file is not None and self._file.handle.tell() >= self.policy.max_bytes:
            self._finish(self.target())

    def _finish(self, target: Run) -> None:
        file, self._file = self._file, None
        if file is None:
            return
        file.close()
        self._emit(target, layout.warc(file.name), file.spool, file.captures.path, file.index.path, file.exchanges)


def software() -> str:
    return f"pith-archiver/{version()} (warcio)"
