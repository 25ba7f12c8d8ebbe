"""A peer archive, read-only: a folder, an archive served as static files over HTTP(S),
or a bucket. Nothing is ever written to it, and every read is counted (what an
incremental sync costs the peer) and bounded: an HTTP read by one deadline for the
whole exchange (``storage.runtime.deadline_http``), a bucket by its client's timeouts.
"""

import logging
import threading
import urllib.request
from collections.abc import Callable
from datetime import datetime, timezone
from urllib.parse import quote

from storage.archive.folder_store import LocalStore
from storage.archive.layout import LayoutError, check_path
from storage.archive.open_store import open_store
from storage.archive.stores import ObjectMissing, ObjectStore, StorageError
from storage.capture.warc import Exchange, FetchFailure
from storage.capture.warc_process import WarcProcess
from storage.runtime.deadline_http import NoAnswer, exchange

logger = logging.getLogger(__name__)

READ_DEADLINE = 60.0  # seconds for one HTTP read, head and body
MAX_OBJECT_BYTES = 64 << 20  # no object of an archive a peer reads is near this


class PeerError(Exception):
    """A read from the peer failed (unreachable, refused, too large)."""


class PeerMissing(PeerError):
    """The peer holds no object at the path."""


class Peer:
    """What a sync reads from: ``read(path)`` of a path relative to the archive root."""

    uri: str

    def __init__(self) -> None:
        self.reads = 0

    def read(self, path: str) -> bytes:
        try:
            check_path(path)
        except LayoutError as exc:
            raise PeerError(str(exc)) from None
        self.reads += 1
        return self._read(path)

    def url(self, path: str) -> str:
        """Where ``path`` is read from, for the tables' url column."""
        return f"{self.uri.rstrip('/')}/{path}"

    def _read(self, path: str) -> bytes:
        raise NotImplementedError


class StorePeer(Peer):
    """A folder or a bucket, through the archive's own object store."""

    def __init__(self, store: ObjectStore) -> None:
        super().__init__()
        self.store = store
        self.uri = store.uri

    def _read(self, path: str) -> bytes:
        try:
            return self.store.get_bytes(path)
        except (ObjectMissing, FileNotFoundError):
            raise PeerMissing(f"{self.url(path)}: no such object") from None
        except (StorageError, OSError) as exc:
            raise PeerError(f"{self.url(path)}: {exc}") from None


class HttpPeer(Peer):
    """An archive served as static files: any web server, or a bucket's website. Each
    exchange, or what became of a request that got none, goes to ``recorder`` (the
    run's WARC files) when there is one."""

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

    def _read(self, path: str) -> bytes:
        url = f"{self.uri}/{quote(path, safe='/%')}"
        request = urllib.request.Request(url)  # noqa: S310 - open_peer makes one for http(s) URLs only
        fetched_at = datetime.now(timezone.utc)
        try:
            answer = exchange(request, self.deadline, MAX_OBJECT_BYTES)
        except NoAnswer as exc:
            if self.recorder is not None:
                self.recorder(FetchFailure(url, "GET", str(exc), fetched_at))
            raise PeerError(f"{url}: {exc}") from None
        if self.recorder is not None:
            headers = [(name, str(value)) for name, value in answer.headers.items()]
            sent = [("Host", request.host), *request.header_items()]
            self.recorder(Exchange(url, "GET", sent, b"", answer.status, "HTTP/1.1", headers, answer.body, fetched_at))
        if answer.status == 404:
            raise PeerMissing(f"{url}: no such object (HTTP 404)")
        if answer.status != 200:
            raise PeerError(f"{url}: HTTP {answer.status}")
        if len(answer.body) > MAX_OBJECT_BYTES:
            raise PeerError(f"{url}: larger than {MAX_OBJECT_BYTES} bytes")
        return answer.body


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
