"""Writing a key's log as C2SP tlog-tiles (``pith.tiles``) at each commit.

Each commit with attestations writes, under ``log/<key_id>/``, the full tiles and
entry bundles its entries complete and the new partial ones, then the signed
checkpoint of the grown log (``checkpoints/<size>``), all listed in the run's
manifest; once the manifest is committed it publishes the checkpoint as
``log/<key_id>/checkpoint``, which is all a tlog client needs besides the tiles. A
writer resumes from the partial tiles of the newest committed checkpoint (at most
255 hashes a level), never from the whole log.
"""

import logging
from collections.abc import Iterable
from itertools import chain

from pith.checkpoint import Checkpoint, log_origin, open_checkpoint, sign_checkpoint
from pith.keyring import Keyring
from pith.reasons import Rejected
from pith.signing import Signer
from pith.tiles import TileEdge, edge_paths
from storage.archive import layout
from storage.archive.reader import read_entry
from storage.archive.stores import ObjectInfo, ObjectStore
from storage.transparency.key_logs import KeyLog, LogBroken, part_entries, put_replacing_orphan

logger = logging.getLogger(__name__)


class TiledLog:
    """One writer's key's log, as far as its commits took it."""

    def __init__(self, signer: Signer, origin: str, edge: TileEdge, pending: list[bytes]):
        self.signer = signer
        self.origin = origin
        self.edge = edge
        self.pending = pending  # entries of runs committed before logs were tiles: the next commit tiles them

    @classmethod
    def resume(cls, store: ObjectStore, signer: Signer, log: KeyLog | None, origin: str | None = None) -> "TiledLog":
        """Continue ``log`` (the key's committed log; None: a new one). Its origin is
        the one its checkpoints carry; ``origin`` names a log that has none yet."""
        name = log_origin(signer.key_id, origin)
        if log is None:
            return cls(signer, name, TileEdge(), [])
        edge = TileEdge()
        if log.latest_checkpoint is not None:
            try:
                committed, _ = open_checkpoint(read_entry(store, log.latest_checkpoint), Keyring([signer.pinned()]))
            except Rejected as exc:
                raise LogBroken(f"{log.latest_checkpoint.path}: {exc}") from None
            if origin and committed.origin != name:
                logger.warning("the log of %s keeps its origin %s, not %s", signer.key_id, committed.origin, name)
            name = committed.origin
            tiles, entries = edge_paths(committed.size)
            try:
                edge = TileEdge(
                    committed.size,
                    {level: read_entry(store, log.listed_tile(tile)) for level, tile in tiles.items()},
                    read_entry(store, log.listed_tile(entries)) if entries else b"",
                )
            except ValueError as exc:
                raise LogBroken(f"the tiles of {signer.key_id} at {committed.size}: {exc}") from None
            if edge.root() != committed.root:
                raise LogBroken(f"the tiles of {signer.key_id} do not give the root its checkpoint signs")
        pending = [entry for part in log.parts[log.tiled :] for entry in part_entries(store, part)]
        return cls(signer, name, edge, pending)

    def extend(self, store: ObjectStore, entries: Iterable[bytes]) -> tuple[list[ObjectInfo], str]:
        """Write the tiles of the log grown by ``entries`` (a run's attestations, in
        chain order) and its signed checkpoint; returns their ObjectInfos for the
        manifest, and the note to publish once the manifest is committed."""
        key_id = self.signer.key_id
        written = [
            put_replacing_orphan(store, layout.log_tile(key_id, tile), data)
            for tile, data in self.edge.extend(chain(self.pending, entries))
        ]
        self.pending = []
        note = sign_checkpoint(Checkpoint(self.origin, self.edge.size, self.edge.root()), self.signer)
        written.append(put_replacing_orphan(store, layout.checkpoint_at(key_id, self.edge.size), note.encode("utf-8")))
        return written, note


def publish(store: ObjectStore, key_id: str, note: str) -> None:
    """Make ``note`` the key's published checkpoint (after the manifest that lists
    the tiles it signs is committed)."""
    store.replace_bytes(layout.published_checkpoint(key_id), note.encode("utf-8"))
