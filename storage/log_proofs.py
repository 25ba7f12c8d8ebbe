"""What others ask of an archive's transparency logs (``storage.transparency.key_logs``): the latest
checkpoint of each key, for a witness to keep; an inclusion proof of a record's latest
storage attestation; and whether the archive's log of a key still extends a
checkpoint saved earlier (RFC 9162 consistency), which catches a rollback or a fork.

The audit findings it adds (docs/TRANSPARENCY.md): log_rolled_back, log_forked,
log_broken, checkpoint_invalid, tile_mismatch and checkpoint_unpublished.
"""

import hashlib
import json
import logging
from collections.abc import Iterator

from pith.checkpoint import open_checkpoint
from pith.keyring import Keyring
from pith.merkle import Tree, leaf_hash, verify_consistency
from pith.numbers import suffix_of
from pith.proof import check_proof, proof_document
from pith.reasons import Rejected
from pith.signed_note import read_note
from pith.tiles import TileEdge
from storage.archive import layout
from storage.archive.manifest import read_committed
from storage.archive.reader import CommittedArchive, nothing_committed, read_entry, table_batches
from storage.archive.stores import ObjectStore, StorageError
from storage.audit import Discrepancy, Finding
from storage.transparency.key_logs import KeyLog, LogBroken, key_logs, latest_checkpoints, part_entries, read_tree

logger = logging.getLogger(__name__)

ROW_COLUMNS = ["pith_number", "event_id", "run_id", "stored_at"]


class NotAttested(StorageError):
    """The archive holds no storage attestation of the record asked about."""


def checkpoint_notes(store: ObjectStore, keyring: Keyring) -> dict[str, str]:
    """The newest committed checkpoint note of each key, each verified under ``keyring``."""
    notes = {}
    committed = read_committed(store, keyring)
    if committed.untrusted and not committed.manifests:  # signed, by keys not pinned: say which
        raise nothing_committed(store, keyring, committed)
    for key_id, note in latest_checkpoints(store, committed.manifests).items():
        try:
            open_checkpoint(note, keyring)
        except Rejected as exc:
            raise LogBroken(f"the latest checkpoint of {key_id} does not verify: {exc}") from None
        notes[key_id] = note.decode("utf-8")
    return notes


def current_log(store: ObjectStore, keyring: Keyring, log: KeyLog | None) -> tuple[Tree, str | None]:
    """The key's committed log and its newest checkpoint note, once the note verifies
    and signs the size and root of the leaves; LogBroken otherwise."""
    tree = read_tree(store, log)
    latest = log.latest_checkpoint if log else None
    if log is None or latest is None:
        return tree, None
    note = read_entry(store, latest).decode("utf-8")
    try:
        checkpoint, _ = open_checkpoint(note, keyring)
    except Rejected as exc:
        raise LogBroken(f"{latest.path}: {exc}") from None
    if (checkpoint.size, checkpoint.root) != (tree.size, tree.root()):
        raise LogBroken(
            f"{latest.path} signs {checkpoint.size} leaves and a root the "
            f"{tree.size} committed leaves of {log.key_id} do not give"
        )
    return tree, note


def prove_record(archive: CommittedArchive, pith_number: str) -> dict:
    """An inclusion proof (``pith.proof``) of the record's latest storage attestation
    against the newest checkpoint of its key; NotAttested or LogBroken when there is none."""
    store, keyring = archive.store, archive.keyring
    event_id, run_id = _latest_attestation(archive, suffix_of(pith_number))
    signers = {m["run_id"]: m["signature"]["key_id"] for m in archive.manifests}
    log = key_logs(archive.manifests).get(signers.get(run_id, ""))
    tree, note = current_log(store, keyring, log)
    part = next((part for part in log.parts if part.run_id == run_id), None) if log else None
    if log is None or note is None or part is None:
        raise LogBroken(f"run {run_id} attested {pith_number} but its key's log has no checkpoint of it")
    for entry in part_entries(store, part):
        attestation = json.loads(entry)
        if attestation["event_id"] == event_id:
            leaf = tree.index_of(leaf_hash(entry))
            if leaf is None:
                raise LogBroken(f"the log of {log.key_id} does not hold {event_id}, which {part.feed} lists")
            document = proof_document(attestation, leaf, tree.inclusion_proof(leaf), note, tree.size)
            try:
                check_proof(document, keyring)
            except Rejected as exc:
                raise LogBroken(f"the proof of {pith_number} does not hold: {exc}") from None
            return document
    raise LogBroken(f"the feed of run {run_id} does not hold {event_id}, which its run's table lists")


def _latest_attestation(archive: CommittedArchive, suffix: str) -> tuple[str, str]:
    """``(event_id, run_id)`` of the record's newest storage attestation, from the
    committed ``attestations`` table."""
    best = None
    for entry in archive.table_files("attestations"):
        for batch in table_batches(archive.store, entry, ROW_COLUMNS):
            for number, event_id, run_id, stored_at in zip(*(batch.column(name).to_pylist() for name in ROW_COLUMNS)):
                if suffix_of(number) == suffix and (best is None or (stored_at, run_id) > best[:2]):
                    best = (stored_at, run_id, event_id)
    if best is None:
        raise NotAttested(f"{archive.store.uri} holds no storage attestation of {suffix}")
    return best[2], best[1]


def check_logs(store: ObjectStore, keyring: Keyring, logs: dict[str, KeyLog]) -> list[Discrepancy]:
    """Each key's committed log against its feeds: the tiles and entry bundles each
    commit lists must be those its entries give (tile_mismatch), its checkpoint must
    sign their size and root (log_broken), and the published checkpoint must be the
    newest committed one (checkpoint_unpublished). A missing or altered object is left
    to the audit's own checks."""
    found = []
    for key_id, log in sorted(logs.items()):
        edge, pending = TileEdge(), []
        try:
            for part in log.parts[: log.tiled]:
                pending += part_entries(store, part)
                if part.checkpoint is None:
                    continue
                expected = {layout.log_tile(key_id, tile): data for tile, data in edge.extend(pending)}
                pending = []
                found += _tile_misfits(part.tiles, expected, key_id, part.checkpoint.path)
                why = _misfit(read_entry(store, part.checkpoint), keyring, key_id, edge)
                if why:
                    found.append(Discrepancy(Finding.LOG_BROKEN, part.checkpoint.path, f"{key_id}: {why}"))
            if log.latest_checkpoint is not None:
                found += unpublished(store, keyring, key_id, read_entry(store, log.latest_checkpoint))
        except StorageError as exc:
            logger.info("the log of %s is not checked: %s", key_id, exc)
    return found


def _tile_misfits(listed: dict, expected: dict[str, bytes], key_id: str, where: str) -> list[Discrepancy]:
    found = []
    for path, data in sorted(expected.items()):
        entry = listed.get(path)
        if entry is None or entry.sha256 != hashlib.sha256(data).hexdigest():
            why = "is not listed" if entry is None else "is not what the log's entries give"
            found.append(Discrepancy(Finding.TILE_MISMATCH, path, f"{key_id}: {why} (the commit of {where})"))
    for path in sorted(set(listed) - set(expected)):
        found.append(Discrepancy(Finding.TILE_MISMATCH, path, f"{key_id}: not a tile the commit of {where} writes"))
    return found


def unpublished(store: ObjectStore, keyring: Keyring, key_id: str, committed: bytes) -> list[Discrepancy]:
    """checkpoint_unpublished when the key's published checkpoint is missing, does not
    verify, or is not the newest committed checkpoint (cosignature lines aside)."""
    path = layout.published_checkpoint(key_id)
    try:
        published = store.get_bytes(path)
        checkpoint, _ = open_checkpoint(published, keyring)
    except (StorageError, Rejected) as exc:
        return [Discrepancy(Finding.CHECKPOINT_UNPUBLISHED, path, f"{key_id}: {exc}")]
    newest = committed.decode("utf-8", "replace")
    if read_note(published).text != newest[: newest.rfind("\n\n") + 1]:
        size = newest.partition("\n")[2].partition("\n")[0]
        return [
            Discrepancy(
                Finding.CHECKPOINT_UNPUBLISHED,
                path,
                f"{key_id}: signs {checkpoint.size} leaves, the newest committed checkpoint {size}",
            )
        ]
    return []


def _misfit(note: bytes, keyring: Keyring, key_id: str, edge: TileEdge) -> str:
    """Why a committed checkpoint does not sign the log as its entries give it ('' if it does)."""
    try:
        checkpoint, key = open_checkpoint(note, keyring)
    except Rejected as exc:
        return str(exc)
    if key.key_id != key_id:
        return f"is the log of {key.key_id}"
    if (checkpoint.size, checkpoint.root) != (edge.size, edge.root()):
        return f"signs {checkpoint.size} leaves and a root; the {edge.size} entries before it give another"
    return ""


def log_findings(
    store: ObjectStore, keyring: Keyring, logs: dict[str, KeyLog], saved: dict[str, bytes]
) -> Iterator[Discrepancy]:
    """What the audit adds about the committed ``logs`` (``Audit.logs()``: the manifests
    are not read again): ``check_logs``, then ``check_consistency`` with each saved
    checkpoint (source -> note)."""
    yield from check_logs(store, keyring, logs)
    for source, note in saved.items():
        yield from check_consistency(store, keyring, logs, note, source)


def check_consistency(
    store: ObjectStore, keyring: Keyring, logs: dict[str, KeyLog], note: bytes, source: str
) -> list[Discrepancy]:
    """Whether the archive's log of the key that signed the checkpoint ``note`` (read
    from ``source``) extends it: nothing when it does; log_rolled_back or log_forked,
    naming the key and both sizes, when it does not."""
    try:
        saved, key = open_checkpoint(note, keyring)
    except Rejected as exc:
        return [Discrepancy(Finding.CHECKPOINT_INVALID, source, str(exc))]
    log = logs.get(key.key_id)
    try:
        tree, _ = current_log(store, keyring, log)
    except StorageError as exc:
        return [Discrepancy(Finding.LOG_BROKEN, source, f"{key.key_id}: {exc}")]
    if tree.size < saved.size:
        return [
            Discrepancy(
                Finding.LOG_ROLLED_BACK,
                source,
                f"{key.key_id}: the archive's log has {tree.size} leaves, behind the checkpoint's {saved.size}",
            )
        ]
    if not verify_consistency(saved.size, tree.size, tree.consistency_proof(saved.size), saved.root, tree.root()):
        return [
            Discrepancy(
                Finding.LOG_FORKED,
                source,
                f"{key.key_id}: the archive's log of {tree.size} leaves does not extend the checkpoint of {saved.size}",
            )
        ]
    logger.info("%s: the log of %s grew from %d to %d leaves", source, key.key_id, saved.size, tree.size)
    return []
