"""Reading your own archive: which manifests to trust, what they list, and their
table files, each checked against its manifest entry before it is believed.

Trust comes from keys pinned outside the archive. The archiver keys the archive
publishes under ``keys/`` are trusted only when asked for (``archive_keys``): whoever
can write to the archive can publish a key there. Even then a published key is only
ever an archive key (manifests, attestations), never a registry key.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from pith.canonical import sha256_hex
from pith.keyring import ARCHIVE, Keyring, KeyringError, PinnedKey, key_from_entry
from storage.archive import layout
from storage.archive.manifest import Committed, ManifestInvalid, ManifestRead, read_committed, union
from storage.archive.stores import ObjectInfo, ObjectStore, StorageError

if TYPE_CHECKING:
    import pyarrow as pa

logger = logging.getLogger(__name__)

BATCH_ROWS = 10_000


class NothingCommitted(StorageError):
    """No manifest of the archive verifies under the trusted keys: nothing to read.
    ``unpinned`` names the keys that sign manifests but are not pinned."""

    def __init__(self, message: str, unpinned: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.unpinned = sorted(set(unpinned))


class ObjectAltered(StorageError):
    """A stored object no longer matches the manifest entry that lists it."""


def published_keys(store: ObjectStore) -> Iterator[PinnedKey]:
    """The archiver keys the archive publishes (``keys/<key_id>.json``), as archive
    keys; unusable, misnamed or non-archive documents are logged and skipped."""
    for stored in store.list(f"{layout.KEYS}/"):
        try:
            key = key_from_entry(json.loads(store.get_bytes(stored.path)), ARCHIVE)
        except (ValueError, KeyringError) as exc:  # JSONDecodeError is a ValueError
            logger.warning("%s: not a key document: %s", stored.path, exc)
            continue
        if layout.key_document(key.key_id) != stored.path or key.role != ARCHIVE:
            logger.warning("%s: holds %s key %s; skipped", stored.path, key.role, key.key_id)
            continue
        yield key


def signing_key_ids(store: ObjectStore) -> set[str]:
    """The ids of the keys that commit to the archive, by the key documents each commit
    publishes (one listing of ``keys/``, no document read)."""
    names = (stored.path[len(layout.KEYS) + 1 :] for stored in store.list(f"{layout.KEYS}/"))
    return {unquote(name.removesuffix(".json")) for name in names if name.endswith(".json") and "/" not in name}


def reading_keyring(store: ObjectStore, pinned: Keyring | None = None, archive_keys: bool = False) -> Keyring:
    """The keys a read of this archive trusts: ``pinned``, plus, with ``archive_keys``,
    the archive's published keys. A published key under a key_id already pinned is
    ignored (the pinned one stands)."""
    ring = Keyring(pinned or ())
    for key in published_keys(store) if archive_keys else ():
        known = ring.get(key.key_id)
        if known is not None:
            if known != key:
                logger.warning("keys/%s.json differs from the pinned key of that id; ignored", key.key_id)
            continue
        ring.add(key)
    return ring


def nothing_committed(store: ObjectStore, keyring: Keyring, committed: Committed) -> NothingCommitted:
    """The error for an archive none of whose manifests is trusted, naming the keys
    that signed them where they are not pinned."""
    why = "; ".join(f"{read.path}: {read.error}" for read in committed.untrusted[:3]) or "no manifests/ entries"
    return NothingCommitted(
        f"{store.uri}: no manifest verifies under the trusted keys "
        f"({', '.join(sorted(k.key_id for k in keyring)) or 'none'}): {why}",
        [
            read.error.unpinned["signature"]["key_id"]
            for read in committed.untrusted
            if isinstance(read.error, ManifestInvalid) and read.error.unpinned
        ],
    )


@dataclass
class CommittedArchive:
    """The committed state of an archive under a keyring: verified manifests (in run
    order), the objects they list (path -> ObjectInfo) and the manifests not trusted."""

    store: ObjectStore
    keyring: Keyring
    manifests: list[dict[str, Any]]
    objects: dict[str, ObjectInfo]
    untrusted: list[ManifestRead]

    @classmethod
    def read(cls, store: ObjectStore, keyring: Keyring) -> "CommittedArchive":
        committed = read_committed(store, keyring)
        manifests, untrusted = committed.manifests, committed.untrusted
        if not manifests:
            raise nothing_committed(store, keyring, committed)
        return cls(store, keyring, manifests, union(manifests), untrusted)

    def table_files(self, table: str) -> list[ObjectInfo]:
        """The table's committed files, by path."""
        return sorted((info for info in self.objects.values() if info.table == table), key=lambda info: info.path)

    def under(self, prefix: str) -> list[ObjectInfo]:
        """The committed objects under ``prefix``, by path."""
        return sorted(
            (info for path, info in self.objects.items() if path.startswith(prefix)), key=lambda info: info.path
        )


def check_digest(entry: ObjectInfo, sha256: str, size: int) -> None:
    """ObjectAltered unless ``sha256`` and ``size`` are what the manifest entry lists."""
    if (sha256, size) != (entry.sha256, entry.size):
        raise ObjectAltered(
            f"{entry.path} does not match its manifest entry: sha256 {sha256} "
            f"({size} bytes) where {entry.sha256} ({entry.size} bytes) was committed"
        )


def read_entry(store: ObjectStore, entry: ObjectInfo) -> bytes:
    """A committed object's bytes, checked against its manifest entry: the one way
    a reader takes an object whole (``export`` streams the large ones)."""
    data = store.get_bytes(entry.path)
    check_digest(entry, sha256_hex(data), len(data))
    return data


def table_batches(store: ObjectStore, entry: ObjectInfo, columns: Sequence[str]) -> Iterator[pa.RecordBatch]:
    """Record batches of a committed table file, checked against its entry first;
    ``columns`` the file does not have are left out (older schema versions). pyarrow
    is imported here, not with the module: a first crawl reads no table until it
    commits, and keeps its ~30 MiB out of its process until then."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = read_entry(store, entry)
    parquet = pq.ParquetFile(pa.BufferReader(data))
    present = [name for name in columns if name in parquet.schema_arrow.names]
    yield from parquet.iter_batches(batch_size=BATCH_ROWS, columns=present)
