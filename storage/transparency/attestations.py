"""The archive's storage attestation feed: one signed attestation (``pith.attestation``)
per bundle version a run stores, chained per archiver key across runs.

A run's attestations are signed when it commits (each interim commit of a long crawl is
a run of its own), once every object they name is stored, in the order the store
acknowledged them; they are written before the manifest as
``attestations/<run_id>.jsonl`` (listed in the manifest like any object) and as rows
of the ``attestations`` table. The chain continues from the last attestation of the
same key in a committed feed, so one key must not write from two runs at once:
concurrent workers use keys of their own, and each key has its own chain.
"""

import logging
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pith.attestation import new_attestation, read_attestation
from pith.canonical import canon
from pith.keyring import Keyring
from pith.reasons import Rejected
from pith.signing import Signer
from storage.archive.reader import read_entry
from storage.archive.stores import ObjectInfo, ObjectStore, StorageError

from .key_logs import key_logs

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Stored:
    """A bundle version this run stored, owed an attestation."""

    pith_number: str
    bundle_sha256: str
    canonical_sha256: str
    raw_path: str
    raw_sha256: str
    size: int


class AttestationFeed:
    """The attestation chain of one key, continued from ``head`` (the key's last
    committed attestation, None when it has none) by each batch a run seals."""

    def __init__(self, signer: Signer, archive_uri: str, head: str | None):
        self.signer = signer
        self.archive_uri = archive_uri
        self.head = head

    def seal(self, owed: Iterable[tuple[Stored, str]], run_id: str) -> Iterator[dict]:
        """Sign attestations of the ``owed`` versions, ``(Stored, stored_at)`` pairs
        with when the store acknowledged each, in order, for the run ``run_id``, one at
        a time as they are consumed (the chain's head moves with each)."""
        for item, when in owed:
            payload = {
                "bundle_sha256": item.bundle_sha256,
                "canonical_sha256": item.canonical_sha256,
                "raw_path": item.raw_path,
                "raw_sha256": item.raw_sha256,
                "size": item.size,
                "storage_uri": f"{self.archive_uri}/{item.raw_path}",
                "stored_at": when,
                "run_id": run_id,
            }
            event = new_attestation(
                self.signer,
                pith_number=item.pith_number,
                archive=self.archive_uri,
                payload=payload,
                prev_event=self.head,
                created_at=when,
                exact=True,  # text and one integer
            )
            self.head = event["event_id"]
            yield event


class FeedSpool:
    """A run's attestation feed spooled to a local file as its attestations are signed
    (then read back, a line at a time, as its key's log entries): a commit of ten
    thousand versions never holds ten thousand signed events at once."""

    def __init__(self, spool_dir: str | Path) -> None:
        fd, name = tempfile.mkstemp(prefix="attestations-", suffix=".jsonl", dir=spool_dir)
        self.path = Path(name)
        self.count = 0
        self._handle = os.fdopen(fd, "wb")

    def add(self, event: dict) -> dict:
        """Append ``event``, an attestation AttestationFeed signed (no float), to the feed; returns it."""
        self._handle.write(canon(event, exact=True) + b"\n")
        self.count += 1
        return event

    def entries(self) -> Iterator[bytes]:
        """The feed's lines, once closed: its attestations as log entries."""
        with open(self.path, "rb") as handle:
            for line in handle:
                yield line.rstrip(b"\n")

    def close(self) -> None:
        self._handle.close()

    def discard(self) -> None:
        self._handle.close()
        self.path.unlink(missing_ok=True)


def chain_head(store: ObjectStore, entry: ObjectInfo, keyring: Keyring) -> str:
    """The event id of the last attestation in a committed feed (``entry`` is its
    manifest entry): the bytes are checked against the entry, the event verified."""
    data = read_entry(store, entry)
    try:
        return read_attestation(data.rstrip(b"\n").rpartition(b"\n")[2], keyring, entry.path)["event_id"]
    except Rejected as exc:
        raise StorageError(f"{entry.path}: its last attestation does not verify ({exc})") from None


def chain_head_of(store: ObjectStore, manifests: Iterable[dict], signer: Signer) -> str | None:
    """Where ``signer``'s chain stands in the committed ``manifests``: the last
    attestation of its last committed feed (None when it has none)."""
    log = key_logs(m for m in manifests if m["signature"]["key_id"] == signer.key_id).get(signer.key_id)
    # a key's runs follow one another: the last part of its log holds its chain's head
    feed = next((part.feed for part in reversed(log.parts) if part.feed), None) if log else None
    return chain_head(store, feed, Keyring([signer.pinned()])) if feed else None
