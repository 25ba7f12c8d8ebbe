"""The archive's transparency logs: one Merkle tree log (``pith.merkle``) per archiver
key, whose leaves are the key's storage attestations in chain order across all its
runs, each leaf the 32 bytes of an attestation's ``content_sha256``.

Each commit with attestations writes, beside its feed, the leaves it adds
(``log/<key_id>/<run_id>.leaves``, 32 bytes a leaf) and a signed checkpoint of the
grown log (``checkpoints/<key_id>/<tree size>``, ``pith.checkpoint``), both listed in
its manifest like any object; the manifest is still the commit point. A key's log is
read from the manifests it signed, in commit order; a commit of one worker touches
only its own key's log. Runs committed before logs existed have no leaves file: their
feed gives the leaves.
"""

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from pith.checkpoint import Checkpoint, log_origin, sign_checkpoint
from pith.merkle import HASH_SIZE, MerkleEdge, Tree, leaf_hash
from pith.signing import Signer

from . import layout
from .manifest import listed
from .reader import read_entry
from .stores import ObjectExists, ObjectInfo, ObjectStore, StorageError

logger = logging.getLogger(__name__)

LeafSink = TypeVar("LeafSink", Tree, MerkleEdge)  # what read_log appends leaves to


class LogBroken(StorageError):
    """A key's committed log does not hold together: a checkpoint names a size its
    leaves do not reach, or a leaves file is not whole hashes."""


@dataclass
class LogPart:
    """What one commit added to a key's log: manifest entries of its feed, leaves file
    and checkpoint (the latter two absent for runs committed before logs existed)."""

    run_id: str
    feed: ObjectInfo | None
    leaves: ObjectInfo | None
    checkpoint: ObjectInfo | None
    key_id: str
    committed_at: str

    @property
    def size(self) -> int | None:
        """The tree size its checkpoint names."""
        named = layout.checkpoint_of(self.checkpoint.path) if self.checkpoint else None
        return named[1] if named else None


@dataclass
class KeyLog:
    key_id: str
    parts: list[LogPart] = field(default_factory=list)
    starts: dict[str, int] = field(default_factory=dict)  # run id -> its first leaf's index, once read

    @property
    def latest_checkpoint(self) -> ObjectInfo | None:
        """The newest checkpoint of its parts."""
        return next((part.checkpoint for part in reversed(self.parts) if part.checkpoint), None)


def log_part(manifest: dict) -> LogPart | None:
    """What a verified manifest adds to its key's log (None: nothing)."""
    key_id = manifest["signature"]["key_id"]
    feed = leaves = checkpoint = None
    for entry in listed(manifest):
        if layout.is_attestation_feed(entry.path):
            feed = entry
        elif entry.path == layout.log_leaves(key_id, manifest["run_id"]):
            leaves = entry
        elif (layout.checkpoint_of(entry.path) or ("",))[0] == key_id:
            checkpoint = entry
    if feed or checkpoint:
        return LogPart(manifest["run_id"], feed, leaves, checkpoint, key_id, manifest["committed_at"])
    return None


def key_logs(manifests: Iterable[dict]) -> dict[str, KeyLog]:
    """Each archiver key's log, from the verified manifests it signed."""
    return logs_of(part for part in map(log_part, manifests) if part is not None)


def logs_of(parts: Iterable[LogPart]) -> dict[str, KeyLog]:
    """Each key's log from the LogParts of its manifests, in commit order (a key's runs
    follow one another; run ids only sort by start second)."""
    logs: dict[str, KeyLog] = {}
    for part in sorted(parts, key=lambda part: part.committed_at):
        logs.setdefault(part.key_id, KeyLog(part.key_id)).parts.append(part)
    return logs


def part_leaves(store: ObjectStore, part: LogPart) -> bytes:
    """The leaf inputs a part added, concatenated, each checked against its entry."""
    entry = part.leaves or part.feed
    if entry is None:
        where = part.checkpoint.path if part.checkpoint else f"run {part.run_id}"
        raise LogBroken(f"{where}: its run lists no leaves and no feed")
    data = read_entry(store, entry)
    if part.leaves is None:
        return b"".join(bytes.fromhex(json.loads(line)["content_sha256"]) for line in data.splitlines())
    if len(data) % HASH_SIZE:
        raise LogBroken(f"{entry.path}: {len(data)} bytes are not whole {HASH_SIZE}-byte hashes")
    return data


def add_leaves(into: Tree | MerkleEdge, leaves: bytes) -> None:
    """Append concatenated 32-byte leaf inputs to a Tree or MerkleEdge."""
    for at in range(0, len(leaves), HASH_SIZE):
        into.append(leaf_hash(leaves[at : at + HASH_SIZE]))


def read_log(store: ObjectStore, log: KeyLog | None, into: LeafSink) -> LeafSink:
    """Append the leaves of ``log`` to ``into`` (a ``pith.merkle.Tree``, or a MerkleEdge when only the
    root and appending matter), checking every checkpoint's size on the way."""
    if log is None:
        return into
    for part in log.parts:
        log.starts[part.run_id] = into.size
        add_leaves(into, part_leaves(store, part))
        if part.checkpoint and part.size is not None and part.size != into.size:
            raise LogBroken(
                f"{part.checkpoint.path} names {part.size} leaves where the log of {log.key_id} has {into.size}"
            )
    return into


class LogAppender:
    """One writer's key's log, as far as its commits took it: each commit with
    attestations writes their leaves and the grown log's signed checkpoint."""

    def __init__(self, signer: Signer, archive_uri: str, frontier: MerkleEdge):
        self.signer = signer
        self.origin = log_origin(archive_uri, signer.key_id)
        self.frontier = frontier

    def extend(self, store: ObjectStore, run_id: str, leaves: bytes) -> list[ObjectInfo]:
        """Write ``leaves`` (a run's attestations' leaf inputs, in chain order) and the
        grown log's checkpoint; returns their ObjectInfos for the manifest."""
        written = [store.put_bytes(layout.log_leaves(self.signer.key_id, run_id), leaves)]
        add_leaves(self.frontier, leaves)
        note = sign_checkpoint(Checkpoint(self.origin, self.frontier.size, self.frontier.root()), self.signer)
        written.append(
            _put_replacing_orphan(
                store, layout.checkpoint(self.signer.key_id, self.frontier.size), note.encode("utf-8")
            )
        )
        return written


def _put_replacing_orphan(store: ObjectStore, path: str, data: bytes) -> ObjectInfo:
    """A checkpoint past the key's committed log can only be a crashed run's leftover
    (no manifest lists it, and one key has one live writer): it gives way."""
    try:
        return store.put_bytes(path, data)
    except ObjectExists:
        logger.warning("%s: replacing a checkpoint that no committed manifest lists", path)
        store.delete(path)
        return store.put_bytes(path, data)


def latest_checkpoints(store: ObjectStore, manifests: Iterable[dict]) -> dict[str, bytes]:
    """The newest committed checkpoint note of each key, checked against its entry."""
    notes = {}
    for key_id, log in sorted(key_logs(manifests).items()):
        if log.latest_checkpoint:
            notes[key_id] = read_entry(store, log.latest_checkpoint)
    return notes
