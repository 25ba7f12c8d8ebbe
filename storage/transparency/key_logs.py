"""The archive's transparency logs: one Merkle tree log (``pith.merkle``) per archiver
key, whose entries are the key's storage attestations (each one feed line) in chain
order across all its runs.

Each commit with attestations writes, beside its feed, the tiles and entry bundles
the grown log adds (``storage.transparency.tiles``, C2SP tlog-tiles under
``log/<key_id>/``) and a signed checkpoint of it (``log/<key_id>/checkpoints/<tree
size>``), all listed in its manifest like any object; the manifest is still the
commit point. A key's log is read from the manifests it signed, in commit order; a
commit of one worker touches only its own key's log. Runs committed before logs were
tiles have no tiles (and a checkpoint of an older log, in ``checkpoints/``, that no
longer counts): their feeds give their entries, and the key's next commit tiles them.
"""

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from pith.merkle import Tree, leaf_hash
from pith.tiles import hashes, level0_paths
from storage.archive import layout
from storage.archive.manifest import listed
from storage.archive.reader import read_entry
from storage.archive.stores import ObjectExists, ObjectInfo, ObjectStore, StorageError

logger = logging.getLogger(__name__)


class LogBroken(StorageError):
    """A key's committed log does not hold together: a checkpoint names a size its
    entries do not reach, or a tile it needs is not listed or not whole hashes."""


@dataclass
class LogPart:
    """What one commit added to a key's log: manifest entries of its feed, tiles and
    checkpoint (no tiles nor checkpoint for runs committed before logs were tiles)."""

    run_id: str
    feed: ObjectInfo | None
    tiles: dict[str, ObjectInfo]
    checkpoint: ObjectInfo | None
    key_id: str
    committed_at: str

    @property
    def size(self) -> int:
        """The tree size its checkpoint names (0 without one)."""
        named = layout.checkpoint_of(self.checkpoint.path) if self.checkpoint else None
        return named[1] if named else 0


@dataclass
class KeyLog:
    key_id: str
    parts: list[LogPart] = field(default_factory=list)

    @property
    def tiled(self) -> int:
        """How many of its parts the newest checkpoint covers (the rest were committed
        before logs were tiles)."""
        return next((len(self.parts) - at for at, part in enumerate(reversed(self.parts)) if part.checkpoint), 0)

    @property
    def latest_checkpoint(self) -> ObjectInfo | None:
        return self.parts[self.tiled - 1].checkpoint if self.tiled else None

    def listed_tile(self, tile: str) -> ObjectInfo:
        """The manifest entry of a tile (``pith.tiles`` path) of the log."""
        path = layout.log_tile(self.key_id, tile)
        for part in self.parts[: self.tiled]:
            if path in part.tiles:
                return part.tiles[path]
        raise LogBroken(f"no committed manifest lists {path}")


def log_part(manifest: dict) -> LogPart | None:
    """What a verified manifest adds to its key's log (None: nothing)."""
    key_id = manifest["signature"]["key_id"]
    feed = checkpoint = None
    tiles = {}
    for entry in listed(manifest):
        if layout.is_attestation_feed(entry.path):
            feed = entry
        elif layout.is_log_tile(key_id, entry.path):
            tiles[entry.path] = entry
        elif (layout.checkpoint_of(entry.path) or ("",))[0] == key_id:
            checkpoint = entry
    if feed or checkpoint:
        return LogPart(manifest["run_id"], feed, tiles, checkpoint, key_id, manifest["committed_at"])
    return None


def key_logs(manifests: Iterable[dict]) -> dict[str, KeyLog]:
    """Each archiver key's log, from the verified manifests it signed."""
    return logs_of(part for part in map(log_part, manifests) if part is not None)


def logs_of(parts: Iterable[LogPart]) -> dict[str, KeyLog]:
    """Each key's log from the LogParts of its manifests, in the order they grew it: by
    the tree size each one's checkpoint signs (a key's runs follow one another, each
    appending), never by the clock of the machine that ran them (a run whose clock was
    fast stamps its commit years ahead, and the runs after it would sort before it);
    parts from before logs were tiles first, in commit order."""
    logs: dict[str, KeyLog] = {}
    for part in sorted(parts, key=lambda part: (part.size, part.committed_at)):
        logs.setdefault(part.key_id, KeyLog(part.key_id)).parts.append(part)
    return logs


def part_entries(store: ObjectStore, part: LogPart) -> list[bytes]:
    """The log entries a part added: its feed's attestations, one line each, checked
    against the feed's manifest entry."""
    if part.feed is None:
        where = part.checkpoint.path if part.checkpoint else f"run {part.run_id}"
        raise LogBroken(f"{where}: its run lists no attestation feed")
    return read_entry(store, part.feed).splitlines()


def read_tree(store: ObjectStore, log: KeyLog | None) -> Tree:
    """A key's committed log: the leaf hashes of the level 0 tiles its newest
    checkpoint covers (32 bytes a leaf), then the entries of any later run committed
    before logs were tiles."""
    tree = Tree()
    if log is None:
        return tree
    if log.tiled:
        size = log.parts[log.tiled - 1].size
        for tile in level0_paths(size):
            entry = log.listed_tile(tile)
            try:
                for leaf in hashes(read_entry(store, entry)):
                    tree.append(leaf)
            except ValueError as exc:
                raise LogBroken(f"{entry.path}: {exc}") from None
        if tree.size != size:
            raise LogBroken(f"the level 0 tiles of {log.key_id} hold {tree.size} leaves, its checkpoint {size}")
    for part in log.parts[log.tiled :]:
        for line in part_entries(store, part):
            tree.append(leaf_hash(line))
    return tree


def put_replacing_orphan(store: ObjectStore, path: str, data: bytes) -> ObjectInfo:
    """A tile or checkpoint past the key's committed log can only be a crashed run's
    leftover (no manifest lists it, and one key has one live writer): it gives way."""
    try:
        return store.put_bytes(path, data)
    except ObjectExists:
        logger.warning("%s: replacing an object that no committed manifest lists", path)
        store.delete(path)
        return store.put_bytes(path, data)


def latest_checkpoints(store: ObjectStore, manifests: Iterable[dict]) -> dict[str, bytes]:
    """The newest committed checkpoint note of each key, checked against its entry."""
    notes = {}
    for key_id, log in sorted(key_logs(manifests).items()):
        if log.latest_checkpoint:
            notes[key_id] = read_entry(store, log.latest_checkpoint)
    return notes
