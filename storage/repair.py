"""Repairing an archive from its peers (``audit --repair-from``): each object the audit
found missing, or not as a committed manifest lists it, is fetched from the first peer
whose copy has the sha256 and size that this archive's own signed manifests list.
That covers raw bundles (content addressed, so any peer holding the version has
them), and WARC files, indexes, tables, tiles and every other listed object a peer
holding a copy of this archive has.

Trust, as a sync's: a peer is asked for objects only once it publishes a checkpoint
signed by a pinned archive key (``storage.syncing.peer_log``); what it then gives is
believed only when it hashes to what this archive listed. Peers are read with the
sync's own readers (``storage.syncing.peers``): streamed into a local file, refused one
chunk past the size listed, an HTTP read within its deadline. A peer that cannot be
read is asked nothing more in this run; one whose copy is not the listed one is named
and the next peer asked.

The archive is never left worse: nothing is overwritten in place. Only once a good copy
is at hand is the damaged one moved aside (copied create-only to
``quarantine/damaged/<run>/<path>``, then removed), and the object written again
create-only. A derived file (a table file, a WARC file's index) no peer has is rebuilt
from the raw objects it was derived from (``storage.rebuild``): its damaged copy moved
aside, the rebuilt one written at a new path that the run's manifest says supersedes
the listed one (or at the listed path, when the rebuild gave the listed bytes back).
A published checkpoint not the newest committed one (the one object rewritten) is
moved aside and that checkpoint published again. Each repair is a signed event (``pith.attestation.new_repair``) in the
run's repair feed, ``attestations/<run>.repairs.jsonl``; the run's signed manifest lists
the feed and the damaged copies, so the audit after it finds no orphan, and reports
the repairs as the archive's history. A crash between moving a copy aside and writing
the good one leaves the object missing, which the next repair fetches again.
"""

import logging
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from pith.attestation import new_repair
from pith.canonical import canon
from pith.keyring import Keyring
from pith.policy import Policy
from pith.reasons import Finding
from pith.signing import Signer, utc_now
from storage.archive import layout
from storage.archive.manifest import Superseded, build_manifest, commit_manifest, sign_manifest
from storage.archive.stores import ObjectExists, ObjectInfo, ObjectMissing, ObjectStore, hash_file
from storage.checkpoint_repair import StaleCheckpoint, stale_checkpoints
from storage.rebuild import FROM_RAW, NotRebuilt, Rebuilder, rebuildable
from storage.syncing.peer_log import PeerFailed, read_peer_checkpoint
from storage.syncing.peers import Peer, PeerError, PeerMissing, PeerTooLarge, PeerUnreachable
from storage.transparency.key_logs import KeyLog
from storage.transparency.tiles import publish

logger = logging.getLogger(__name__)

WORKER = layout.REPAIR_WORKER


@dataclass
class PeerState:
    """A peer of the repair: ``refused`` says why it is asked nothing (''. usable), and
    ``unreachable`` whether that is because it could not be read."""

    peer: Peer
    refused: str = ""
    unreachable: bool = False


@dataclass(frozen=True)
class Repaired:
    entry: ObjectInfo
    damage: Finding
    peer: str
    damaged_copy: str | None  # where the damaged copy went; None: there was none


@dataclass(frozen=True)
class NotRepaired:
    entry: ObjectInfo
    damage: Finding
    why: str


@dataclass
class RepairReport:
    """What a repair did: each peer's state, what was repaired and what was not, every
    copy a peer gave that was refused (named), and the manifest it committed."""

    peers: list[PeerState]
    repaired: list[Repaired] = field(default_factory=list)
    not_repaired: list[NotRepaired] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    manifest: str | None = None

    @property
    def reached(self) -> bool:
        """Whether any peer could be read at all."""
        return any(not state.unreachable for state in self.peers)

    @property
    def reads(self) -> int:
        return sum(state.peer.reads for state in self.peers)


class Repair:
    """One repair of ``store`` from ``peers`` (in order), signed by ``signer``, the
    archive's key; ``peer_keys``: the archive keys pinned, one of which each peer's log
    must be signed by (``policy``: and cosigned as it asks); ``keys``: the keys an audit
    pins, registry and archive, under which derived files are rebuilt (None: they are not)."""

    def __init__(
        self,
        store: ObjectStore,
        signer: Signer,
        peers: list[Peer],
        peer_keys: Keyring,
        policy: Policy | None = None,
        keys: Keyring | None = None,
    ) -> None:
        self.store = store
        self.signer = signer
        self.peer_keys = peer_keys
        self.policy = policy
        self.run_id = layout.new_run_id(WORKER)
        self.started_at = utc_now()
        self.report = RepairReport([PeerState(peer) for peer in peers])
        self.keys = keys
        self._listed: list[ObjectInfo] = []  # the damaged copies moved aside, for the run's manifest
        self._supersedes: list[Superseded] = []  # the listed files rebuilt at new paths
        self._events = tempfile.SpooledTemporaryFile(1 << 20)
        self._rebuilder: Rebuilder | None = None

    def run(self, damaged: list[tuple[ObjectInfo, Finding]], logs: dict[str, KeyLog] | None = None) -> RepairReport:
        """Repair each of ``damaged`` (an object's entry and what the audit found; the
        objects derived files are made from first), and each of ``logs``' published
        checkpoints, then commit the run when anything was repaired."""
        with self._events, tempfile.TemporaryDirectory(prefix="pith-repair-") as work:
            if self.keys is not None:
                self._rebuilder = Rebuilder(self.store, self.keys, self.run_id, Path(work))
            if damaged:
                for state in self.report.peers:
                    self._vet(state)
            for entry, damage in sorted(damaged, key=lambda found: rebuildable(found[0])):
                self._repair(entry, damage)
            if self.keys is not None and logs:
                for stale in stale_checkpoints(self.store, self.keys, logs):
                    self._republish(stale)
            if self.report.repaired:
                self._commit()
        return self.report

    def _vet(self, state: PeerState) -> None:
        """Use the peer only if it publishes a log of a pinned archive key."""
        why = []
        for key in self.peer_keys:
            try:
                if read_peer_checkpoint(state.peer, key.key_id, self.peer_keys, self.policy) is not None:
                    return
            except PeerUnreachable as exc:
                state.refused, state.unreachable = f"unreachable: {exc}", True
                return
            except PeerFailed as exc:
                why.append(str(exc))
        state.refused = "; ".join(why) or "it publishes no log of a pinned archive key"

    def _repair(self, entry: ObjectInfo, damage: Finding) -> None:
        asked = [state for state in self.report.peers if not state.refused]
        for state in asked:
            with tempfile.NamedTemporaryFile(prefix="pith-repair-") as copy:
                if self._fetched(state, entry, copy):
                    self._put(entry, damage, copy.name, state.peer.uri)
                    return
        reachable = [state for state in self.report.peers if not state.unreachable]
        why = "no peer could be read" if not reachable else "no peer gave a copy with its listed sha256"
        if self._rebuilder is not None and rebuildable(entry):
            try:
                local, target = self._rebuilder.rebuild(entry)
            except NotRebuilt as exc:
                why = f"{why}, and it is not rebuilt: {exc}"
            else:
                self._put(entry, damage, str(local), FROM_RAW, target)
                return
        self.report.not_repaired.append(NotRepaired(entry, damage, why))

    def _fetched(self, state: PeerState, entry: ObjectInfo, copy: IO[bytes]) -> bool:
        """Whether ``state``'s peer gave ``entry``'s very bytes (into ``copy``); a copy
        that is not is named among the refusals, a peer that cannot be read refused for
        the rest of the run."""
        peer = state.peer
        try:
            peer.copy(entry.path, copy, entry.size)
        except PeerMissing:
            return False
        except PeerUnreachable as exc:
            state.refused, state.unreachable = f"unreachable: {exc}", True
            return False
        except PeerTooLarge:
            self.report.refusals.append(f"{peer.uri}: {entry.path}: larger than the {entry.size} bytes listed")
            return False
        except PeerError as exc:
            self.report.refusals.append(f"{peer.uri}: {entry.path}: {exc}")
            return False
        copy.flush()
        sha256, size = hash_file(copy.name)
        if (sha256, size) != (entry.sha256, entry.size):
            self.report.refusals.append(
                f"{peer.uri}: {entry.path}: its copy has sha256 {sha256} ({size} bytes), "
                f"not the {entry.sha256} ({entry.size} bytes) listed"
            )
            return False
        return True

    def _put(self, entry: ObjectInfo, damage: Finding, local: str, peer: str, target: ObjectInfo | None = None) -> None:
        """Move the damaged copy aside, then write the good one create-only (a rebuilt
        file: at ``target``, superseding ``entry`` when that is another path), and sign
        the repair."""
        moved = self._move_aside(entry.path) if damage is not Finding.MISSING else None
        target = target or entry
        try:
            written = self.store.put_file(target.path, local)
        except ObjectExists as exc:  # another writer put other bytes there meanwhile: theirs stay
            why = f"other bytes were written there meanwhile (sha256 {exc.existing.sha256}); left as they are"
            self.report.not_repaired.append(NotRepaired(entry, damage, why))
            return
        replaced = {}
        if target.path != entry.path:
            self._listed.append(ObjectInfo(target.path, written.sha256, written.size, target.table, target.rows))
            self._supersedes.append(Superseded(entry.path, entry.sha256, target.path))
            replaced["replaced_by"] = target.path
        self._sign(Repaired(entry, damage, peer, moved), replaced)

    def _republish(self, stale: StaleCheckpoint) -> None:
        """Publish the newest committed checkpoint again, the stale or damaged one moved aside."""
        moved = self._move_aside(stale.published.path)
        publish(self.store, stale.key_id, stale.note.decode("utf-8"))
        self._sign(Repaired(stale.published, Finding.CHECKPOINT_UNPUBLISHED, stale.source, moved))

    def _sign(self, repaired: Repaired, more: dict | None = None) -> None:
        """The repair's signed event, in the run's feed, and in the report."""
        entry = repaired.entry
        payload = {
            "path": entry.path,
            "sha256": entry.sha256,
            "size": entry.size,
            "damage": str(repaired.damage),
            "damaged_copy": repaired.damaged_copy,
            "peer": repaired.peer,
            "run_id": self.run_id,
            **(more or {}),
        }
        event = new_repair(self.signer, archive=self.store.uri, subject="", payload=payload, created_at=utc_now())
        self._events.write(canon(event, exact=True) + b"\n")
        self.report.repaired.append(repaired)
        logger.info("repaired %s from %s (%s)", entry.path, repaired.peer, repaired.damage)

    def _move_aside(self, path: str) -> str | None:
        """Copy the damaged object create-only into ``quarantine/damaged/`` and remove it;
        where it went (None: it was gone already)."""
        target = layout.damaged_copy(self.run_id, path)
        with tempfile.NamedTemporaryFile(prefix="pith-damaged-") as copy:
            try:
                for chunk in self.store.read_chunks(path):
                    copy.write(chunk)
            except ObjectMissing:
                return None
            copy.flush()
            self._listed.append(self.store.put_file(target, copy.name))
        self.store.delete(path)
        return target

    def _commit(self) -> None:
        """The repair feed and the damaged copies, listed in a manifest of the run signed by the archive's key."""
        self._events.seek(0)
        with tempfile.NamedTemporaryFile(prefix="pith-repairs-") as feed:
            feed.write(self._events.read())
            feed.flush()
            self._listed.append(self.store.put_file(layout.repair_feed(self.run_id), feed.name))
        self.store.flush()
        damage = Counter(str(repaired.damage) for repaired in self.report.repaired)
        manifest = build_manifest(
            run_id=self.run_id,
            worker=WORKER,
            started_at=self.started_at,
            objects=self._listed,
            stats={"repaired": len(self.report.repaired), "damage": dict(sorted(damage.items()))},
            params={"repair_from": [state.peer.uri for state in self.report.peers]},
            supersedes=self._supersedes,
        )
        self.report.manifest = commit_manifest(self.store, sign_manifest(manifest, self.signer)).path
