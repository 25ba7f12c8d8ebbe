"""Copying a peer archive through its logs (``sync``): for each of the
peer's pinned archive keys, its log is read and checked (``storage.syncing.peer_log``),
then every raw object a new entry names is fetched, and archived through this
archive's own writer, as a crawl archives: its own attestations, its own log. What
needs only the bytes is done on every core (``PeerChecks``): each entry's signature;
each object checked against its entry, its bundle verified under the registry keys and
its table rows made (``storage.writing.prepared``), so this process gets the rows, not
the parsed bundle, and writes them a batch at a time. A raw object is read streamed and
refused past the bundle size limit (``too_large``): it never reaches memory, nor the
archive, whole.

Trusted from the peer: nothing but what its pinned key signed (checkpoint, entries)
and the registry signed (bundles); its tables and manifests are never read. What a
sync got from a peer's log is kept per log, its origin and its key together, as
``peers/<origin>/<key_id>/checkpoints/<size>`` (listed in the run's manifest): a
log's origin is only a name, which another pinned key may sign too, and neither log
then stands for the other. The next sync reads only what the log added since. A log
that does not extend it stops that log's sync, both notes kept as evidence under
``peers/<origin>/<key_id>/evidence/``.
"""

import hashlib
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from itertools import islice
from typing import Any, NamedTuple
from urllib.parse import quote, unquote

from pith.canonical import sha256_hex
from pith.checkpoint import Checkpoint, open_checkpoint, parse_checkpoint
from pith.keyring import Keyring
from pith.parse import DEFAULT_MAX_BYTES
from pith.policy import Policy
from pith.reasons import Reason, Rejected
from pith.signed_note import read_note
from pith.verdict import Status, Verdict
from pith.verify import verify_bundle
from storage.archive.manifest import listed
from storage.archive.reader import read_entry
from storage.archive.stores import ObjectInfo, ObjectStore
from storage.syncing.peer_log import (
    Attested,
    LogEntry,
    PeerCheckpoint,
    PeerFailed,
    check_entry,
    read_peer_checkpoint,
    resume_edge,
    spool_entries,
    spooled,
)
from storage.syncing.peers import Peer, PeerError, PeerTooLarge
from storage.writing.prepared import Prepared, prepare
from storage.writing.writer import ArchiveWriter

logger = logging.getLogger(__name__)

PEERS = "peers"
BATCH = 1024  # raw objects read, then verified on every core, at a time
Fetched = list[tuple[Attested, bytes, str]]  # entry, its raw object, the url the rows give


class CheckedObject(NamedTuple):
    """What checking a fetched object found: its digest, its verdict (without the parsed
    bundle) and, when it verified and is what its log entry attests, its version as
    the archive writer takes it (``storage.writing.prepared``)."""

    raw_sha256: str
    verdict: Verdict
    prepared: Prepared | None


CheckMap = Callable[[list[Any]], Iterable[Any]]  # a PeerChecks of each, in order; under way once called


class PeerChecks:
    """What a sync checks that needs no more than what it was given, as a picklable
    callable for a process pool (on every core): a log entry (``peer_log.check_entry``,
    under the peer's pinned keys), or an object fetched from the peer, as ``(raw, entry)``
    (``check_object``)."""

    def __init__(self, keyring: Keyring, peer_keys: Keyring) -> None:
        self.keyring = keyring
        self.peer_keys = peer_keys

    def __call__(self, item: LogEntry | tuple[bytes, Attested]) -> bytes | CheckedObject:
        if isinstance(item, LogEntry):
            return check_entry(item, self.peer_keys)
        return self.check_object(*item)

    def check_object(self, raw: bytes, entry: Attested) -> CheckedObject:
        """``raw`` checked against its log entry, then verified under the registry's
        keys and prepared for the writer: all of a record's work that needs its bytes."""
        digest = sha256_hex(raw)
        if digest != entry.raw_sha256:
            detail = f"its sha256 is {digest}, log entry {entry.index} attests {entry.raw_sha256}"
            verdict = Verdict(Status.REJECTED, Reason.ATTESTATION_MISMATCH, "raw_sha256", detail, entry.pith_number)
            return CheckedObject(digest, verdict, None)
        verdict = verify_bundle(raw, self.keyring)
        if verdict.ok and verdict.bundle_sha256 != entry.bundle_sha256:
            detail = f"its bundle_sha256 is {verdict.bundle_sha256}, log entry {entry.index} attests another"
            verdict = Verdict(Status.REJECTED, Reason.ATTESTATION_MISMATCH, "bundle_sha256", detail)
        if not verdict.ok:
            return CheckedObject(digest, replace(verdict, bundle=None), None)
        prepared = prepare(verdict, digest, len(raw))
        return CheckedObject(digest, prepared.verdict, prepared)


@dataclass
class PeerOutcome:
    """What a sync got from one of a peer's logs: versions archived new, versions this
    archive held already, objects quarantined (by reason), objects refused unread past
    the bundle size limit, and objects the peer did not give."""

    origin: str
    key_id: str
    from_size: int = 0
    to_size: int = 0
    archived: int = 0
    held: int = 0
    quarantined: Counter[str] = field(default_factory=Counter)
    too_large: int = 0
    missing: int = 0
    failed: PeerFailed | None = None
    checkpoint_path: str = ""

    @property
    def clean(self) -> bool:
        return self.failed is None and not self.quarantined and not self.too_large and not self.missing

    def describe(self) -> dict[str, Any]:
        """The manifest's record of it (``params.from_archive.logs``)."""
        return {
            "origin": self.origin,
            "key_id": self.key_id,
            "entries": [self.from_size, self.to_size],
            "checkpoint": self.checkpoint_path,
            "archived": self.archived,
            "held": self.held,
            "quarantined": self.quarantined.total(),
            "quarantine_reasons": dict(sorted(self.quarantined.items())),
            "too_large": self.too_large,
            "missing": self.missing,
            "failed": str(self.failed) if self.failed else None,
        }


@dataclass
class PeerSync:
    """One sync from ``peer`` into ``writer``'s archive."""

    peer: Peer
    writer: ArchiveWriter
    peer_keys: Keyring  # the peer's archive keys, pinned
    check_map: CheckMap  # PeerChecks on every core (the command's eager_map)
    policy: Policy | None = None
    commit_every: int = 0  # an interim commit every N versions (0: none), as a crawl's
    outcomes: list[PeerOutcome] = field(default_factory=list)
    _commits: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1, "pith-interim"), init=False)
    _interim: "Future[str] | None" = field(default=None, init=False)  # the interim commit under way, if any.

    def run(self, manifests: list[dict]) -> list[PeerOutcome]:
        """Sync every log of the peer's pinned keys; ``manifests``: this archive's
        committed ones (where each log's last synced checkpoint is). Every log's
        checkpoint is read first: PeerUnreachable, before anything is written, when the
        peer cannot be read at all."""
        synced = last_synced(self.writer.store, manifests, self.peer_keys)
        logs: list[PeerCheckpoint] = []
        for key in self.peer_keys:
            try:
                new = read_peer_checkpoint(self.peer, key.key_id, self.peer_keys, self.policy)
            except PeerFailed as exc:
                self.outcomes.append(PeerOutcome("", key.key_id, failed=exc))
                continue
            if new is not None:
                logs.append(new)
        with self._commits:
            for new in logs:
                self.outcomes.append(self._sync_log(new, synced.get((new.checkpoint.origin, new.key_id))))
        if self._interim is not None:
            self._interim.result()  # its failure is the sync's
        return self.outcomes

    def params(self) -> dict[str, Any]:
        """What a manifest of the sync says of it (``params.from_archive``): the logs synced so far."""
        return {"from_archive": {"source": self.peer.uri, "logs": [outcome.describe() for outcome in self.outcomes]}}

    def _commit_if_due(self) -> None:
        """An interim commit, beside the sync, once ``commit_every`` versions wait (one at
        a time): what a manifest lists, and what a crash loses, stay bounded. Only the
        last run lists the peer's checkpoint as synced: a sync cut short starts again
        from the one before, and what was committed counts as duplicates."""
        if not self.commit_every or self.writer.pending_bundles() < self.commit_every:
            return
        if self._interim is not None:
            if not self._interim.done():
                return
            self._interim.result()
        self._interim = self._commits.submit(self.writer.commit_interim, {"peer_reads": self.peer.reads}, self.params())

    def _sync_log(self, new: PeerCheckpoint, old: tuple[Checkpoint, bytes] | None) -> PeerOutcome:
        origin, key_id = new.checkpoint.origin, new.key_id
        outcome = PeerOutcome(origin, key_id, old[0].size if old else 0, new.checkpoint.size)
        if old is not None and new.checkpoint == old[0]:
            self._synced(outcome, new)  # nothing new, not a tile read: the run says what it checked
            return outcome
        try:
            edge = resume_edge(self.peer, new, old[0] if old else None)
        except PeerFailed as exc:
            outcome.failed = exc
            if old is not None:
                for note in (old[1], new.note):
                    self.writer.add_object(evidence_path(origin, key_id, note), note)
            return outcome
        try:
            spool = spool_entries(self.peer, new, edge, self.check_map)
        except PeerFailed as exc:
            outcome.failed = exc
            return outcome
        with spool:
            under_way: tuple[Fetched, Iterable[CheckedObject]] | None = None
            for batch in _batches(spooled(spool), BATCH):
                fetched = self._fetch(batch, outcome)
                checked = self.check_map([(raw, entry) for entry, raw, _ in fetched])  # as the last is written
                if under_way is not None:
                    self._archive(*under_way, outcome)
                under_way = fetched, checked
            if under_way is not None:
                self._archive(*under_way, outcome)
        if not outcome.missing:  # else the next sync reads these entries again: a read may have failed in passing
            self._synced(outcome, new)
        return outcome

    def _synced(self, outcome: PeerOutcome, new: PeerCheckpoint) -> None:
        """List the peer's checkpoint as synced in this run (one already stored at its
        size, the same tree, is listed again): where the next sync starts from."""
        outcome.checkpoint_path = synced_path(outcome.origin, outcome.key_id, new.checkpoint.size)
        self.writer.add_object(outcome.checkpoint_path, new.note)

    def _fetch(self, batch: list[Attested], outcome: PeerOutcome) -> Fetched:
        """The objects ``batch`` names that the peer gave, each read no further than the
        bundle size limit; the others recorded as failed (one past it as refused, ``too_large``:
        no bundle is that large, and what was read of it is dropped)."""
        fetched: Fetched = []
        now = datetime.now(timezone.utc)
        for entry in batch:
            url = f"{self.peer.url(entry.raw_path)}#{outcome.origin}/{entry.index}"
            try:
                raw = self.peer.read(entry.raw_path, DEFAULT_MAX_BYTES)
            except PeerTooLarge as exc:
                outcome.too_large += 1
                self.writer.add_failure(url, Reason.TOO_LARGE, str(exc), now, entry.pith_number, entry.raw_path)
                continue
            except PeerError as exc:
                outcome.missing += 1
                self.writer.add_failure(url, Reason.FETCH_FAILED, str(exc), now, entry.pith_number, entry.raw_path)
                continue
            fetched.append((entry, raw, url))
        return fetched

    def _archive(self, fetched: Fetched, checked: Iterable[CheckedObject], outcome: PeerOutcome) -> None:
        """Archive each fetched object as checking it found: verified, or quarantined."""
        now = datetime.now(timezone.utc)
        verified = []
        for (_, raw, url), (digest, verdict, prepared) in zip(fetched, checked, strict=True):
            if prepared is not None:
                verified.append((raw, prepared, url))
            else:
                outcome.quarantined[verdict.reason or Reason.ATTESTATION_MISMATCH] += 1
                self.writer.add_rejected(raw, verdict, url, now, digest)
        before = self.writer.counts().get("duplicates", 0)
        self.writer.add_prepared_all(verified, now)
        held = self.writer.counts().get("duplicates", 0) - before  # versions this archive had already
        outcome.held += held
        outcome.archived += len(verified) - held
        self._commit_if_due()


def _batches(items: Iterator[Attested], size: int) -> Iterator[list[Attested]]:
    while batch := list(islice(items, size)):
        yield batch


def log_folder(origin: str, key_id: str) -> str:
    """Where what a sync keeps of one peer log lies: its origin and its key."""
    return f"{PEERS}/{quote(origin, safe='')}/{quote(key_id, safe='')}"


def synced_path(origin: str, key_id: str, size: int) -> str:
    return f"{log_folder(origin, key_id)}/checkpoints/{size}"


def evidence_path(origin: str, key_id: str, note: bytes) -> str:
    size = parse_checkpoint(read_note(note).text).size
    return f"{log_folder(origin, key_id)}/evidence/{size}-{hashlib.sha256(note).hexdigest()[:16]}"


def last_synced(
    store: ObjectStore, manifests: list[dict], keys: Keyring
) -> dict[tuple[str, str], tuple[Checkpoint, bytes]]:
    """Per peer log, its origin and key, the newest checkpoint a committed manifest
    lists as synced (read back checked against its entry; this archive's own signed
    manifest vouches for it). One an older sync kept per origin alone
    (``peers/<origin>/checkpoints/<size>``) counts for the pinned key that signed it."""
    newest: dict[tuple[str, str], ObjectInfo] = {}
    for manifest in manifests:
        for entry in listed(manifest):
            parts = entry.path.split("/")
            if parts[0] != PEERS or parts[-2:-1] != ["checkpoints"] or not parts[-1].isdigit():
                continue
            if len(parts) == 5:
                log = (parts[1], unquote(parts[2]))
            elif len(parts) == 4:
                log = (parts[1], "")  # the key is the note's signer, found once it is read
            else:
                continue
            known = newest.get(log)
            if known is None or int(known.path.rsplit("/", 1)[1]) < int(parts[-1]):
                newest[log] = entry
    synced: dict[tuple[str, str], tuple[Checkpoint, bytes]] = {}
    for (_, key_id), entry in sorted(newest.items(), key=lambda item: item[0][1] == ""):
        note = read_entry(store, entry)
        checkpoint = parse_checkpoint(read_note(note).text)
        if not key_id:
            try:
                key_id = open_checkpoint(note, keys)[1].key_id
            except Rejected:
                continue  # of a key no longer pinned: no sync of it resumes there
        synced.setdefault((checkpoint.origin, key_id), (checkpoint, note))
    return synced
