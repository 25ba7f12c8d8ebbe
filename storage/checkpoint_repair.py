"""The published checkpoints a repair publishes again: a key's published checkpoint
(``log/<key>/checkpoint``, the one object of the archive that is rewritten, and that no
manifest lists) that is missing, damaged or not the newest committed checkpoint, the
audit's checkpoint_unpublished. The newest committed checkpoint is what it must be:
that one is listed, checked against its entry, and must verify and sign the log its
entries give (``storage.log_proofs``); when it does not, nothing is published."""

import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass

from pith.keyring import Keyring
from storage.archive import layout
from storage.archive.reader import read_entry
from storage.archive.stores import ObjectInfo, ObjectStore, StorageError
from storage.log_proofs import current_log, unpublished
from storage.transparency.key_logs import KeyLog

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StaleCheckpoint:
    """A key's published checkpoint to publish again: ``published`` the object as it
    must be (its path, and the note's sha256 and size), ``note`` the newest committed
    checkpoint, read from ``source``."""

    key_id: str
    published: ObjectInfo
    note: bytes
    source: str


def stale_checkpoints(store: ObjectStore, keyring: Keyring, logs: dict[str, KeyLog]) -> Iterator[StaleCheckpoint]:
    """Each key of ``logs`` whose published checkpoint is not its newest committed one,
    when that one can be trusted (its log's checks pass); others are logged, and left
    to the audit to name."""
    for key_id, log in sorted(logs.items()):
        latest = log.latest_checkpoint
        if latest is None:
            continue
        try:
            current_log(store, keyring, log)  # the newest checkpoint verifies and signs the committed leaves
            note = read_entry(store, latest)
        except StorageError as exc:
            logger.warning("the published checkpoint of %s is not repaired: %s", key_id, exc)
            continue
        if unpublished(store, keyring, key_id, note):
            published = ObjectInfo(layout.published_checkpoint(key_id), hashlib.sha256(note).hexdigest(), len(note))
            yield StaleCheckpoint(key_id, published, note, latest.path)
