"""A peer archive, read-only: a folder, an archive served as static files over HTTP(S),
or a bucket. Nothing is ever written to it, and every read is counted (what an
incremental sync costs the peer) and bounded: in size, whatever the peer (streamed a
chunk at a time and refused one chunk past the reader's cap, so a huge file where a
bundle should be costs a chunk of memory, not its size), and in time, an HTTP read by
one deadline for the whole exchange (``storage.runtime.deadline_http``), a bucket by
its client's timeouts.
"""

import io
import logging
import threading
import urllib.request
from collections.abc import Callable
from datetime import datetime, timezone
from typing import IO
from urllib.parse import quote

from storage.archive.folder_store import LocalStore
from storage.archive.layout import LayoutError, check_path
from storage.archive.open_store import open_store
from storage.archive.stores import CHUNK, ObjectMissing, ObjectStore, StorageError
from storage.capture.exchanges import Exchange, FetchFailure
from storage.capture.warc_process import WarcProcess
from storage.runtime.deadline_http import NoAnswer, exchange

logger = logging.getLogger(__name__)

READ_DEADLINE = 60.0  # seconds for one HTTP read, head and body
MAX_OBJECT_BYTES = 64 << 20  # no object of an archive a peer reads is near this


class PeerError(Exception):
    """A read from the peer failed (unreachable, refused, too large)."""


class PeerMissing(PeerError):
    """The peer holds no object at the path."""


class PeerUnreachable(PeerError):
    """The peer could not be read at all: no answer (refused, reset, out of time), a
    server error, or its store failed under the read."""


class PeerTooLarge(PeerError):
    """The object is larger than the read allows: refused once the cap was passed,
    never read further."""


class Peer:
    """What a sync reads from: ``read(path)`` of a path relative to the archive root,
    or ``copy`` of it into a file; either streamed and refused (``PeerTooLarge``) one
    chunk past ``max_bytes``, whichever kind of peer it is."""

    uri: str

    def __init__(self) -> None:
        self.reads = 0

    def read(self, path: str, max_bytes: int = MAX_OBJECT_BYTES) -> bytes:
        sink = io.BytesIO()
        self.copy(path, sink, max_bytes)
        return sink.getvalue()

    def copy(self, path: str, sink: IO[bytes], max_bytes: int = MAX_OBJECT_BYTES) -> int:
        """Write the object at ``path`` into ``sink``; returns its size. On an error what
        the sink got is the caller's to drop."""
        try:
            check_path(path)
        except LayoutError as exc:
            raise PeerError(str(exc)) from None
        self.reads += 1
        size = self._copy(path, sink, max_bytes)
        if size > max_bytes:
            raise PeerTooLarge(f"{self.url(path)}: larger than {max_bytes} bytes")
        return size

    def url(self, path: str) -> str:
        """Where ``path`` is read from, for the tables' url column."""
        return f"{self.uri.rstrip('/')}/{path}"

    def _copy(self, path: str, sink: IO[bytes], max_bytes: int) -> int:
        """Write at most ``max_bytes`` + 1 bytes of the object into ``sink``; their count."""
        raise NotImplementedError


class StorePeer(Peer):
    """A folder or a bucket, through the archive's own object store."""

    def __init__(self, store: ObjectStore) -> None:
        super().__init__()
        self.store = store
        self.uri = store.uri

    def _copy(self, path: str, sink: IO[bytes], max_bytes: int) -> int:
        size = 0
        try:
            for chunk in self.store.read_chunks(path, min(CHUNK, max_bytes + 1)):
                sink.write(chunk[: max_bytes + 1 - size])
                size += len(chunk)
                if size > max_bytes:
                    break  # the file, or the bucket's answer, let go of with the reader
        except (ObjectMissing, FileNotFoundError):
            raise PeerMissing(f"{self.url(path)}: no such object") from None
        except (StorageError, OSError) as exc:
            raise PeerUnreachable(f"{self.url(path)}: {exc}") from None
        return size


class HttpPeer(Peer):
    """An archive served as static files: any web server, or a bucket's website. Each
    exchange, or what became of a request that got none, goes to ``recorder`` (the
    run's WARC files) when there is one: what it records is read into memory, so only
    a read without one (``copy`` into a file) holds no more than a chunk."""

    def __init__(
        self,
        base_url: str,
        deadline: float = READ_DEADLINE,
        recorder: Callable[[Exchange | FetchFailure], None] | None = None,
    ) -> None:
        super().__init__()
        self.uri = base_url.rstrip("/")
        self.deadline = deadline
        self.recorder = recorder

    def _copy(self, path: str, sink: IO[bytes], max_bytes: int) -> int:
        url = f"{self.uri}/{quote(path, safe='/%')}"
        request = urllib.request.Request(url)  # noqa: S310 - open_peer makes one for http(s) URLs only
        fetched_at = datetime.now(timezone.utc)
        recorded = io.BytesIO() if self.recorder is not None else None
        body = sink if recorded is None else recorded
        start = body.tell()
        deadline = self.deadline * max(1.0, max_bytes / MAX_OBJECT_BYTES)  # a large object: at least ~1 MiB/s
        try:
            answer = exchange(request, deadline, max_bytes, body)
        except NoAnswer as exc:
            if self.recorder is not None:
                self.recorder(FetchFailure(url, "GET", str(exc), fetched_at))
            raise PeerUnreachable(f"{url}: {exc}") from None
        if self.recorder is not None and recorded is not None:
            headers = [(name, str(value)) for name, value in answer.headers.items()]
            sent = [("Host", request.host), *request.header_items()]
            got = recorded.getvalue()
            self.recorder(Exchange(url, "GET", sent, b"", answer.status, "HTTP/1.1", headers, got, fetched_at))
        if answer.status == 404:
            raise PeerMissing(f"{url}: no such object (HTTP 404)")
        if answer.status >= 500:
            raise PeerUnreachable(f"{url}: HTTP {answer.status}")
        if answer.status != 200:
            raise PeerError(f"{url}: HTTP {answer.status}")
        if recorded is not None:
            sink.write(recorded.getvalue())
        return body.tell() - start


def open_peer(source: str, endpoint_url: str | None = None) -> Peer:
    """The peer ``source`` names: ``http(s)://`` a static archive, ``s3://bucket/prefix``,
    ``file://`` or a folder (which must exist). ValueError when it names none."""
    if source.startswith(("http://", "https://")):
        return HttpPeer(source)
    store = open_store(source, endpoint_url if source.startswith("s3://") else None)
    if isinstance(store, LocalStore) and not store.root.is_dir():
        raise ValueError(f"{source}: no such folder")
    return StorePeer(store)


def warc_recorder(warc: WarcProcess) -> Callable[[Exchange | FetchFailure], None]:
    """What hands an HTTP peer's exchanges to the run's WARC writer, holding the sync
    while the writer's queue is full."""

    def record(what: Exchange | FetchFailure) -> None:
        if isinstance(what, FetchFailure):
            warc.failure(what)
        elif not warc.record(what):
            room = threading.Event()
            warc.when_room(room.set)
            room.wait()

    return record
