"""A peer's key log, read and checked before anything it names is fetched: its
published checkpoint under the peer's pinned archive key (and a witness policy's
cosignatures), that it extends the checkpoint synced last time, and its new entries,
each a storage attestation signed by the peer's key, against the checkpoint's root.

The new entries are spooled to a local file as they are checked (a few fields each),
so the objects they name are fetched only once the whole log holds together, and
memory stays flat with the log's size. Each entry's signature is checked on the
verifying processes (``check_entry``), an entry bundle at a time, as the next is read.
"""

import logging
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO

import orjson

from pith.attestation import read_attestation
from pith.checkpoint import Checkpoint, open_checkpoint
from pith.keyring import Keyring
from pith.policy import Policy
from pith.reasons import Finding, Reason, Rejected
from pith.signed_note import read_note
from pith.tile_reading import Read, append, edge_of, entry_batches
from pith.tiles import TileEdge
from storage.archive import layout
from storage.syncing.peers import Peer, PeerError, PeerMissing, PeerUnreachable

logger = logging.getLogger(__name__)


class PeerFailed(Exception):
    """The sync from one peer's log stops: ``PeerFailed(code, detail)``, the code a
    ``pith.reasons`` one."""

    @property
    def code(self) -> str:
        return str(self.args[0])

    def __str__(self) -> str:
        return f"{self.args[0]}: {self.args[1]}"


@dataclass(frozen=True)
class Attested:
    """What one log entry says the peer holds."""

    index: int
    pith_number: str
    raw_path: str
    raw_sha256: str
    bundle_sha256: str


@dataclass(frozen=True, slots=True)
class LogEntry:
    """An entry of a peer's log as read from its tiles, to check (``check_entry``)."""

    entry: bytes
    index: int
    origin: str
    key_id: str


EntryMap = Callable[[list[LogEntry]], Iterable[bytes]]  # check_entry of each, in order; under way once called


@dataclass(frozen=True)
class PeerCheckpoint:
    key_id: str
    note: bytes
    checkpoint: Checkpoint


def read_peer_checkpoint(peer: Peer, key_id: str, keys: Keyring, policy: Policy | None) -> PeerCheckpoint | None:
    """The peer's published checkpoint of ``key_id``'s log (None: it publishes none),
    signed by that pinned key and, with ``policy``, cosigned to its quorum;
    PeerUnreachable when the peer could not be read at all."""
    path = layout.published_checkpoint(key_id)
    try:
        note = peer.read(path)
    except PeerMissing:
        return None
    except PeerUnreachable:
        raise
    except PeerError as exc:
        raise PeerFailed(Finding.CHECKPOINT_UNPUBLISHED, str(exc)) from None
    try:
        checkpoint, key = open_checkpoint(note, keys)
    except Rejected as exc:
        raise PeerFailed(Reason.CHECKPOINT_INVALID, f"{peer.url(path)}: {exc}") from None
    if key.key_id != key_id:
        raise PeerFailed(Reason.CHECKPOINT_INVALID, f"{peer.url(path)} is signed by {key.key_id}, not {key_id}")
    if policy is not None:
        try:
            cosigned = policy.cosigned(read_note(note))
        except Rejected as exc:
            raise PeerFailed(Reason.CHECKPOINT_INVALID, f"{peer.url(path)}: {exc}") from None
        if not policy.met(cosigned):
            raise PeerFailed(Reason.QUORUM_UNMET, f"{peer.url(path)}: cosigned by {sorted(cosigned) or 'no witness'}")
    return PeerCheckpoint(key_id, note, checkpoint)


def resume_edge(peer: Peer, new: PeerCheckpoint, old: Checkpoint | None) -> TileEdge:
    """The edge of the log as synced last time (``old``, of the same origin and key;
    None: never), read from the new log's tiles; PeerFailed ``log_rolled_back`` or
    ``log_forked`` when the new log does not extend it."""
    if old is None:
        return TileEdge()
    if new.checkpoint.size < old.size:
        raise PeerFailed(
            Finding.LOG_ROLLED_BACK, f"{new.checkpoint.origin} went from {old.size} to {new.checkpoint.size} entries"
        )
    try:
        edge = edge_of(old.size, new.checkpoint.size, _tile_reader(peer, new.key_id))
    except ValueError as exc:
        raise PeerFailed(Finding.TILE_MISMATCH, str(exc)) from None
    if edge.root() != old.root:
        raise PeerFailed(
            Finding.LOG_FORKED, f"{new.checkpoint.origin} at {new.checkpoint.size} does not extend it at {old.size}"
        )
    return edge


def spool_entries(peer: Peer, new: PeerCheckpoint, edge: TileEdge, check_map: EntryMap) -> IO[bytes]:
    """Read the entries past ``edge`` up to the new checkpoint and check each
    (``check_map``, one entry bundle while the next is read); returns a spool of them
    (``spooled`` reads it) once their root is the one it signs."""
    spool = tempfile.TemporaryFile()
    read = _tile_reader(peer, new.key_id)
    origin, key_id = new.checkpoint.origin, new.key_id
    checked: Iterable[bytes] = ()
    try:
        for first, entries in entry_batches(edge.size, new.checkpoint.size, read):
            under_way = check_map([LogEntry(entry, first + at, origin, key_id) for at, entry in enumerate(entries)])
            append(edge, entries)
            spool.writelines(checked)
            checked = under_way
        spool.writelines(checked)
    except ValueError as exc:
        spool.close()
        raise PeerFailed(Finding.TILE_MISMATCH, str(exc)) from None
    except PeerFailed:
        spool.close()
        raise
    if edge.root() != new.checkpoint.root:
        spool.close()
        raise PeerFailed(Finding.TILE_MISMATCH, f"the entries of {new.checkpoint.origin} do not give its root")
    spool.seek(0)
    return spool


def spooled(spool: IO[bytes]) -> Iterator[Attested]:
    for line in spool:
        yield Attested(*orjson.loads(line))


def check_entry(item: LogEntry, keys: Keyring) -> bytes:
    """The spool line of an entry: a storage attestation signed by the log's key
    (pinned in ``keys``), naming its raw object by its digest; else PeerFailed."""
    where = f"{item.origin}[{item.index}]"
    try:
        event = read_attestation(item.entry, keys, where)
        payload = event["payload"]
        if event["signer"].get("key_id") not in (None, item.key_id):
            raise Rejected(Reason.WRONG_KEY_ROLE, f"{where}.signer", "signed by another key than the log's")
        if payload["raw_path"] != layout.raw_bundle(payload["raw_sha256"]):
            raise Rejected(Reason.ATTESTATION_MISMATCH, f"{where}.payload.raw_path", "not its raw_sha256's path")
        fields = [item.index, event["subject_pith_number"], payload["raw_path"], payload["raw_sha256"]]
        return orjson.dumps([*fields, payload["bundle_sha256"]]) + b"\n"
    except (Rejected, layout.LayoutError) as exc:
        raise PeerFailed(Finding.ATTESTATION_INVALID, str(exc)) from None
    except orjson.JSONEncodeError as exc:  # a lone surrogate in its record's name
        raise PeerFailed(Finding.ATTESTATION_INVALID, f"{where}: {exc}") from None


def _tile_reader(peer: Peer, key_id: str) -> Read:
    def read(tile: str) -> bytes:
        try:
            return peer.read(layout.log_tile(key_id, tile))
        except PeerError as exc:
            raise PeerFailed(Finding.TILE_MISMATCH, str(exc)) from None

    return read
