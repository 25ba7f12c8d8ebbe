"""Object stores: a local folder and S3-compatible buckets, both create-only.

An archive never changes an object once written. ``put_*`` creates the object, or
finds it already holding exactly these bytes (an idempotent retry, or a
content-addressed object someone else wrote) and succeeds; any other object under
that name raises ObjectExists. An object is visible under its name only once it is
whole (LocalStore links a finished temp file; S3 writes are atomic), so a
crash leaves temp files or unlisted objects, never a torn object under a final name.

The interface only: the backends import it, and ``storage.archive.open_store`` picks one by URI.
"""

import hashlib
import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from storage.archive.layout import check_path

logger = logging.getLogger(__name__)

CHUNK = 1 << 20


LocalPath = str | os.PathLike[str]  # a file or folder on this machine


MiB = 1 << 20


class StorageError(Exception):
    """The store failed, after its own retries; nothing may be committed on top of it."""


class ObjectExists(StorageError):
    """A create-only put found another object under the name; ``existing`` is its digest."""

    def __init__(self, path: str, existing: "ObjectInfo"):
        super().__init__(f"{path} already exists with sha256 {existing.sha256} ({existing.size} bytes)")
        self.path = path
        self.existing = existing


class StoreRefused(StorageError):
    """The store refused the archive's bucket (it does not exist) or the credentials:
    the caller's setup to fix, not a failure of the store."""


class ObjectMissing(StorageError):
    """A read named an object the store does not hold."""


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """What a manifest says about an object: enough to re-check it byte for byte; for
    a table file also its table and row count. Writers and readers keep it typed:
    ``entry()`` and ``from_entry`` are the one conversion to and from a manifest's
    JSON entry."""

    path: str
    sha256: str
    size: int
    table: str | None = None
    rows: int | None = None

    def entry(self) -> dict[str, Any]:
        entry = {"path": self.path, "sha256": self.sha256, "size": self.size}
        if self.table is not None:
            entry.update(table=self.table, rows=self.rows)
        return entry

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> "ObjectInfo":
        """An entry of a verified manifest (``storage.archive.manifest.listed``)."""
        return cls(entry["path"], entry["sha256"], entry["size"], entry.get("table"), entry.get("rows"))


class Put(NamedTuple):
    """What a create-only put did: the object, and whether it made it (False: the same
    bytes were there already, an object some run may list)."""

    info: ObjectInfo
    made: bool


@dataclass(frozen=True)
class StoredObject:
    """One listing row: what the store itself reports, no content read."""

    path: str
    size: int
    modified: datetime


def hash_file(local_path: LocalPath) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with open(local_path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


class ObjectStore(ABC):
    """The operations the archive needs, on paths relative to the archive root."""

    uri: str
    upload_threads = 8  # writes a run keeps under way at once
    inline_write_max = 0  # bytes up to which a run writes an object in the caller's thread, not an upload's
    # a folder that processes beside the crawl (its verifiers) may write objects into as
    # ``put_bytes`` does, with a store of their own over it (LocalStore); None: only this one
    folder: str | None = None

    def adopt(self, path: str) -> None:
        """Take in an object another process wrote into ``folder``: the next ``flush``
        makes it durable with this store's own writes."""
        raise StorageError(f"{self.uri}: takes no objects written by other processes")

    def put_bytes(self, path: str, data: bytes) -> ObjectInfo:
        return self.create_bytes(path, data).info

    def create_bytes(self, path: str, data: bytes) -> "Put":
        """``put_bytes``, saying whether this put made the object or found its bytes there."""
        info = ObjectInfo(check_path(path), hashlib.sha256(data).hexdigest(), len(data))
        return Put(info, True) if self._create_bytes(path, data, info.sha256) else Put(self._settle(info), False)

    def put_file(self, path: str, local_path: LocalPath) -> ObjectInfo:
        """Store a local file (large tables): streamed, multipart on S3."""
        info = ObjectInfo(check_path(path), *hash_file(local_path))
        return info if self._create_file(path, local_path, info.sha256) else self._settle(info)

    def _settle(self, info: ObjectInfo) -> ObjectInfo:
        existing = self.digest(info.path)
        if existing != info:
            raise ObjectExists(info.path, existing)
        logger.debug("%s already holds these bytes", info.path)
        return info

    def digest(self, path: str) -> ObjectInfo:
        """Hash an object as stored, streaming (what an audit re-checks)."""
        digest, size = hashlib.sha256(), 0
        for chunk in self.read_chunks(path):
            digest.update(chunk)
            size += len(chunk)
        return ObjectInfo(path, digest.hexdigest(), size)

    def get_bytes(self, path: str) -> bytes:
        return b"".join(self.read_chunks(path))

    @abstractmethod
    def _create_bytes(self, path: str, data: bytes, sha256: str) -> bool:
        """Create the object; False when the name is taken."""

    @abstractmethod
    def _create_file(self, path: str, local_path: LocalPath, sha256: str) -> bool:
        """Create the object from a file; False when the name is taken."""

    @abstractmethod
    def read_chunks(self, path: str, chunk_size: int = CHUNK) -> Iterator[bytes]:
        """Yield the object's bytes in chunks; ObjectMissing when absent."""

    @abstractmethod
    def list(self, prefix: str = "") -> Iterator[StoredObject]:
        """Yield StoredObject for every object whose path starts with ``prefix``."""

    @abstractmethod
    def delete(self, path: str) -> None:
        """Remove an object (an orphan); absent is fine."""

    @abstractmethod
    def replace_bytes(self, path: str, data: bytes) -> None:
        """Write the one kind of object that changes (a log's published checkpoint):
        readers see the old bytes or the new, never a part."""

    @abstractmethod
    def flush(self) -> None:
        """Make every object written so far durable (before a manifest names it)."""

    @abstractmethod
    def probe(self) -> None:
        """Raise StorageError now if this store cannot take writes: a run checks before
        its first request rather than failing at its first object."""

    def probe_reads(self) -> None:
        """Raise StorageError now if this store cannot be read at all (a bucket that does
        not exist, credentials refused): a command that reads says so in one line."""

    def release(self) -> None:
        """Let go of what this store holds for the run (a single writer's lease)."""
