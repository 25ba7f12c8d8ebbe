"""What a peer reads of a served archive, so that ``sync`` and ``audit
--repair-from`` work against ``serve ARCHIVE`` as against a static file server over
its folder: the published checkpoint of each of its logs, the logs' tiles and signed
checkpoints, its key documents and its raw objects, each at its path in the archive.

Only what a trusted manifest lists is served (and the published checkpoint of a log
those manifests give), each read checked against its entry first, so a damaged object
is never handed to a peer; read-only, and bounded: nothing larger than its kind can be
is read.
"""

import logging
from collections.abc import Iterable

from storage.archive import layout
from storage.archive.reader import read_entry
from storage.archive.stores import ObjectInfo, ObjectStore, StorageError

logger = logging.getLogger(__name__)

PREFIXES = (f"{layout.LOGS}/", f"{layout.KEYS}/", f"{layout.RAW}/")
MAX_FILE_BYTES = 64 << 20  # a tile, a key document or a raw bundle is far smaller
MAX_CHECKPOINT_BYTES = 64 << 10  # a checkpoint note with its cosignatures


class PeerFiles:
    """The peer-facing files of an archive, from the objects its trusted manifests list."""

    def __init__(self, store: ObjectStore, objects: Iterable[ObjectInfo]) -> None:
        self.store = store
        self.files = {info.path: info for info in objects if info.path.startswith(PREFIXES)}
        logs = {found[0] for found in map(layout.checkpoint_of, self.files) if found is not None}
        self.published = {layout.published_checkpoint(key_id) for key_id in logs}

    def get(self, path: str) -> bytes | None:
        """The file at ``path`` (as a peer names it: percent-encoded as the layout is),
        checked; None when it is not one, or cannot be read as listed (logged)."""
        try:
            if path in self.published:
                data = b""
                for chunk in self.store.read_chunks(path, MAX_CHECKPOINT_BYTES + 1):
                    data += chunk
                    if len(data) > MAX_CHECKPOINT_BYTES:
                        logger.error("not serving %s: larger than %d bytes", path, MAX_CHECKPOINT_BYTES)
                        return None
                return data
            entry = self.files.get(path)
            if entry is None or entry.size > MAX_FILE_BYTES:
                return None
            return read_entry(self.store, entry)
        except StorageError as exc:
            logger.error("not serving %s: %s", path, exc)
            return None
