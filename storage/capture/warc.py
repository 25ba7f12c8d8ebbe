"""WARC/1.1 files of a crawl, written as the exchanges happen.

Records are gzipped one by one into a local spool file (memory stays flat however
large the file grows), and each capture's CDXJ line is spooled as its record is
written (``storage.capture.cdxj``); a file is rolled once it passes ``max_bytes`` and
at every commit, its index sorted (stored next to it), and stored through the
archive's create-only store in the run that commits it, with one ``captures``
row per response or revisit record (Common Crawl's index names). A crashed run's
spool never reaches the store; a rolled file that no manifest lists is an orphan.

What is recorded comes as plain values (``Exchange``): the storage layer knows
nothing of Scrapy.
"""

import hashlib
import logging
import threading
import zlib
from base64 import b32encode
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http import HTTPStatus
from io import BytesIO
from pathlib import Path
from typing import Generic, Protocol, TypeVar
from urllib.parse import urlsplit

from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

from pith.canonical import canon
from pith.shipped import version
from storage.archive import layout
from storage.archive.stores import MiB
from storage.capture.captures import CaptureSpool, Position, capture_row
from storage.capture.cdxj import SERVER_NOT_MODIFIED, IndexSpool

logger = logging.getLogger(__name__)

WARC_VERSION = "WARC/1.1"
IDENTICAL_PAYLOAD = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
VERDICT_TYPE = "bundle_verdict"  # a metadata record's record_type; the other is fetch_failure
SEED_COLUMNS = ["url", "fetch_time", "content_digest", "warc_record_id", "warc_record_type"]
GZIP_HEADER = 16  # added to zlib's window bits: a gzip member, as WARC files hold them
MIN_WINDOW_BITS = 9  # zlib's smallest window with a gzip header
DIGESTS_KEPT = 10_000  # payload digests remembered for identical-payload revisits (a bounded LRU)
# hop-by-hop framing the HTTP client already undid: kept under another name, so a
# replay tool does not try to undo it a second time
UNDONE_FRAMING = ("transfer-encoding",)

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


@dataclass
class Exchange:
    """One HTTP exchange as the client saw it: the request as sent, the response's
    status, headers and body as received (before any decoding)."""

    url: str
    method: str
    request_headers: list[tuple[str, str]]
    request_body: bytes
    status: int
    protocol: str
    response_headers: list[tuple[str, str]]
    body: bytes = field(repr=False)
    fetched_at: datetime
    ip_address: str | None = None


@dataclass
class FetchFailure:
    """A request that got no response: what the client reported instead."""

    url: str
    method: str
    error: str
    fetched_at: datetime


def payload_digest(body: bytes) -> str:
    """The WARC payload digest warcio writes: ``sha1:`` and base32."""
    return "sha1:" + b32encode(hashlib.sha1(body).digest()).decode()  # noqa: S324 - the digest WARC and CDXJ readers expect, not a security check


def _status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def _response_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(f"X-Pith-Orig-{k}" if k.lower() in UNDONE_FRAMING else k, v) for k, v in headers]


def gzip_member(data: bytes | memoryview) -> bytes:
    """``data`` as one gzip member, at warcio's level (9), with a window no larger than
    the data: compressed as well as with zlib's full 32 KiB window (no match reaches
    further back than the data's start), without setting up its ~256 KiB of state for
    a record of a few hundred bytes (~50 µs of a request or verdict record's ~58)."""
    bits = max(MIN_WINDOW_BITS, min(zlib.MAX_WBITS, (len(data) - 1).bit_length()))
    compressor = zlib.compressobj(9, zlib.DEFLATED, bits + GZIP_HEADER, max(1, min(8, bits - 6)))
    return compressor.compress(data) + compressor.flush()


class _File:
    """One WARC file being written to its spool, named as it will be stored. Each
    record reaches the file (the kernel) whole, as one gzip member, as soon as it is
    written, so a writer killed mid-file leaves every record before the one under way
    whole (``storage.capture.warc_salvage``)."""

    def __init__(self, name: str, spool_dir: str):
        self.name = name
        self.spool = Path(spool_dir) / name
        self.handle = open(self.spool, "xb")  # noqa: SIM115 - open until the file is finished
        self._record = BytesIO()  # the record being written, before it is gzipped (gzip_member)
        self.writer = WARCWriter(self._record, gzip=False, warc_version=WARC_VERSION)
        self.captures = CaptureSpool(spool_dir)
        self.index = IndexSpool(spool_dir, name)
        self.exchanges = 0  # HTTP exchanges (and requests that got no response) recorded

    def write(self, record: ArcWarcRecord) -> Position:
        offset = self.handle.tell()
        self._record.seek(0)
        self._record.truncate()
        self.writer.write_record(record)
        with self._record.getbuffer() as plain:
            self.handle.write(gzip_member(plain))
        self.handle.flush()
        length = self.handle.tell() - offset
        self.index.add(record, offset, length)
        return Position(self.name, offset, length, record.rec_headers["WARC-Record-ID"])

    def close(self) -> None:
        self.handle.close()
        self.captures.close()
        self.index.close()

    def discard(self) -> None:
        self.handle.close()
        self.spool.unlink(missing_ok=True)
        self.captures.discard()
        self.index.discard()


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
        self._file: _File | None = None
        self._seq = 0
        self._closed = False
        self._digests: OrderedDict[str, tuple[str, str, str]] = OrderedDict()  # digest: (uri, date, record id)
        self._payloads: OrderedDict[str, tuple[str, str, str]] = OrderedDict()  # url: where its bytes last were
        self.records = 0

    # --- recording ------------------------------------------------------------
    def record(self, exchange: Exchange) -> Position | None:
        """Write the exchange's response (or revisit) and request records. Returns
        the position of the response record (None once the writer is closed)."""
        date = datetime_to_iso_date(exchange.fetched_at.astimezone(timezone.utc))
        http = StatusAndHeaders(
            _status_line(exchange.status), _response_headers(exchange.response_headers), protocol=exchange.protocol
        )
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
                record = self._not_modified(file, exchange.url, digest, date, http, warc_headers)
            elif earlier is not None:
                uri, refers_date, refers_id = earlier
                record = file.writer.create_revisit_record(
                    exchange.url, digest, uri, refers_date, http_headers=http, warc_headers_dict=warc_headers
                )
                record.rec_headers.add_header("WARC-Refers-To", refers_id)
            else:
                record = file.writer.create_warc_record(
                    exchange.url,
                    "response",
                    payload=BytesIO(exchange.body),
                    length=len(exchange.body),
                    http_headers=http,
                    # the digest taken above: warcio then does not take it again
                    warc_headers_dict={**warc_headers, "WARC-Payload-Digest": digest},
                )
            position = file.write(record)
            if record.rec_type == "response":
                held = (exchange.url, date, position.record_id)
                self._remember(self._payloads, exchange.url, held)
                if exchange.body:
                    self._remember(self._digests, digest, held)
            elif earlier is not None and exchange.status != 304:  # an identical payload's revisit
                self._remember(self._payloads, exchange.url, earlier)
            request = file.writer.create_warc_record(
                exchange.url,
                "request",
                payload=BytesIO(exchange.request_body),
                length=len(exchange.request_body),
                http_headers=StatusAndHeaders(
                    f"{exchange.method} {_target(exchange.url)} {exchange.protocol}",
                    exchange.request_headers,
                    is_http_request=True,
                ),
                warc_headers_dict={"WARC-Date": date, "WARC-Concurrent-To": position.record_id},
            )
            file.write(request)
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

    def _not_modified(
        self, file: _File, url: str, digest: str, date: str, http: StatusAndHeaders, headers: dict[str, str]
    ) -> ArcWarcRecord:
        """The revisit record of a 304: it refers to the record that holds the bytes the
        server says are unchanged (the URL's latest payload capture this writer knows:
        this crawl's, or a committed run's), so a replay tool that follows revisits finds
        them; unknown, it names the URL only."""
        held = self._payloads.get(url)
        uri, refers_date = held[:2] if held else (url, date)
        record = file.writer.create_revisit_record(
            url, digest, uri, refers_date, http_headers=http, warc_headers_dict=headers
        )
        record.rec_headers.replace_header("WARC-Profile", SERVER_NOT_MODIFIED)
        record.rec_headers.remove_header("WARC-Payload-Digest")  # a 304 carries no payload to digest
        if held:
            record.rec_headers.add_header("WARC-Refers-To", held[2])
        else:
            record.rec_headers.remove_header("WARC-Refers-To-Date")
        return record

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

    def _current(self) -> _File:
        if self._file is None:
            name = f"{self.run_id}-{self._seq:05d}.warc.gz"
            self._seq += 1
            self._file = _File(name, self._spool_dir)
            info = {**self.info, "run_id": self.run_id, "format": "WARC File Format 1.1"}
            self._file.write(self._file.writer.create_warcinfo_record(name, info))
        return self._file

    def seed(self, payloads: Iterable[tuple[str, tuple[str, str, str]]]) -> None:
        """Remember payloads committed runs archived (``recent_payloads``), oldest
        first: a re-crawl that gets the same bytes again writes a revisit that refers
        to them, and so does a 304 from their URL."""
        with self._lock:
            for digest, where in payloads:
                self._remember(self._digests, digest, where)
                self._remember(self._payloads, where[0], where)

    @staticmethod
    def _remember(kept: OrderedDict, key: str, where: tuple[str, str, str]) -> None:
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


def _target(url: str) -> str:
    """The request target of an absolute URL: its path and query."""
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def software() -> str:
    return f"pith-archiver/{version()} (warcio)"
