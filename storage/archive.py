"""The one object a crawl pipeline talks to: it stores raw bytes, feeds the tables,
tracks every object written, attests what it stored (and signs a checkpoint of its
key's Merkle log of attestations, ``storage.tlog``), and commits it all with one
signed manifest.

A long crawl commits as it goes: ``checkpoint`` seals what was written so far under a
manifest of its own (a run id of its own) and carries on in a new segment, so memory,
and what a crash can lose, stay bounded by the segment, not the crawl. The history
used for dedup and the attestation chain run across segments.

Rows are idempotent across runs: a bundle version (``bundle_sha256``) already listed
in a committed ``records`` file, or seen earlier in this run, gets a verifications row
marked ``duplicate`` and nothing else. A record's history only grows
(``storage.history``): a version that is not append-only is stored as evidence but
not made current. Any failed write fails the run: ``add_*`` raise StorageError from
then on and ``commit`` raises instead of writing a manifest.
"""

import json
import logging
import os
import shutil
import tempfile
import threading
from collections import Counter
from concurrent.futures import Future, wait
from dataclasses import replace
from datetime import datetime
from functools import partial
from pathlib import Path

from pith.canonical import canon, sha256_hex
from pith.keyring import ARCHIVE, Keyring, KeyringError, key_from_entry
from pith.merkle import Frontier
from pith.signing import Signer, utc_now
from pith.verify import Verdict
from pith.shipped import version
from . import layout
from .attestations import AttestationFeed, Stored, chain_head, feed_bytes
from .committed import table_batches
from .history import EVENT_COLUMNS, RECORD_COLUMNS, History, event_digest
from .manifest import build_manifest, commit_manifest, committed_manifests, sign_manifest
from .stores import ObjectExists, ObjectInfo, ObjectStore, StorageError
from .tlog import LogAppender, key_logs, read_log
from .tables import (TABLES, RollPolicy, RowBudget, TableWriter, alias_rows, attestation_row, event_rows, record_row,
                     timestamp, verification_row)
from .uploads import BoundedUploader

logger = logging.getLogger(__name__)

REASON_TYPE = "pith_quarantine_reason"
SPOOL_PREFIX = "pith-spool-"   # then the writing process's id: a dead one's folder can go


def quarantine_reason(verdict, raw_sha256: str, size: int) -> bytes:
    """The sidecar of a quarantined bundle: a function of the bytes and the verifier
    only (the URL and time are in the verifications table), so re-quarantining the same
    bytes writes the same sidecar."""
    return canon({"reason_type": REASON_TYPE, "raw_sha256": raw_sha256, "size": size,
                  "status": verdict.status, "reason": verdict.reason, "path": verdict.path,
                  "detail": verdict.detail, "pith_number": verdict.pith_number,
                  "verifier": {"name": "pith-archiver", "version": version()}}) + b"\n"


def sweep_spools(spool_dir=None) -> list[str]:
    """Remove the table spool folders that killed runs left in ``spool_dir`` (default:
    the system's temp folder): those named by a process that no longer exists. A
    folder of a live process, or one not named by a process, stays."""
    removed = []
    for folder in Path(spool_dir or tempfile.gettempdir()).glob(f"{SPOOL_PREFIX}*-*"):
        pid = folder.name[len(SPOOL_PREFIX):].partition("-")[0]
        if not pid.isdigit() or int(pid) == os.getpid() or not folder.is_dir():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder.name)
        except PermissionError:
            pass  # alive, and someone else's
    if removed:
        logger.info("removed %d spool folders of killed runs: %s", len(removed), ", ".join(removed))
    return removed


def _done(value) -> Future:
    future = Future()
    future.set_result(value)
    return future


class _Segment:
    """What one manifest lists: a run id, its table files, its uploads and the
    attestations it owes. ``written`` and ``pending`` change under the writer's
    ``_written_lock``; the rest under its ``_lock``."""

    def __init__(self, run_id: str, tables_for):
        self.run_id = run_id
        self.started_at = utc_now()
        self.tables: dict[str, TableWriter] = tables_for(self)
        self.written: dict[str, dict] = {}
        self.pending: set[Future] = set()
        self.stored_at: dict[str, str] = {}
        self.owed: list[Stored] = []
        self.counts = Counter()


class ArchiveWriter:
    """One run of one worker writing into an archive."""

    def __init__(self, store: ObjectStore, signer: Signer, *, worker: str = "w0", run_id: str | None = None,
                 keyring: Keyring | None = None, uploader: BoundedUploader | None = None,
                 policy: RollPolicy = RollPolicy(), spool_dir=None, dedup: bool = True):
        """``keyring`` pins the archiver keys whose manifests are trusted for dedup and
        history (default: this signer's key). ``dedup=False`` starts as if the archive
        were empty (no dedup, no history, a new attestation chain): for a fresh archive
        only. ``uploader`` may be shared between writers. ``run_id`` names the first
        segment; checkpoints start the next ones with new run ids."""
        self.store = store
        self.signer = signer
        self.worker = worker
        self.policy = policy
        self._keyring = keyring or Keyring([signer.pinned()])
        self._known_runs: set[str] = set()
        self._history, head, log = self._read_committed() if dedup else (History(), None, Frontier())
        self._feed = AttestationFeed(signer, store.uri, head)
        self._log = LogAppender(signer, store.uri, log)
        self._uploader = uploader or BoundedUploader()
        self._owns_uploader = uploader is None
        self._quarantined: set[str] = set()
        sweep_spools(spool_dir)
        self._spool = tempfile.TemporaryDirectory(prefix=f"{SPOOL_PREFIX}{os.getpid()}-", dir=spool_dir)
        self._budget = RowBudget(policy.buffer_bytes)
        self._lock = threading.Lock()          # tables, counters, the current segment
        self._written_lock = threading.Lock()  # what upload jobs report
        self._commit_lock = threading.Lock()   # segments commit one at a time, in order
        self._failure: BaseException | None = None
        self._counts = Counter()
        self._segment = self._new_segment(layout.check_run_id(run_id) if run_id else None)
        self.run_id = self._segment.run_id     # the first segment's: names the crawl
        self._open = True
        logger.info("run %s writing to %s (attestations chained to %s)", self.run_id, store.uri, head)

    # --- what the pipeline calls -----------------------------------------------
    def add_verified(self, raw: bytes, verdict, url: str, fetched_at: datetime, equivocation=None) -> Future:
        """Archive a verified bundle version. The future gives the raw object's
        ObjectInfo once stored, or None when the version was archived before. A
        version that is not append-only is stored but not made current (reason
        ``not_append_only``); a pith.split_view.Equivocation flags it ``equivocation``."""
        if not verdict.ok:
            raise ValueError("add_verified takes verified verdicts; use add_rejected")
        self._check_usable()
        raw_sha256 = sha256_hex(raw)
        number, version = verdict.pith_number, verdict.bundle_sha256
        events = frozenset(event_digest(event["event_id"]) for event in verdict.bundle["events"])
        built_at = timestamp(verdict.bundle.get("built_at"))
        with self._lock:
            segment = self._segment
            duplicate = self._history.archived(version)
            objection = self._history.objection(number, version, events, built_at, fetched_at)
            if objection or equivocation:
                verdict = replace(verdict, reason="equivocation" if equivocation else "not_append_only",
                                  path="events", detail=equivocation.detail if equivocation else objection)
            raw_path = None if duplicate else layout.raw_bundle(raw_sha256)
            rows = [("verifications", verification_row(
                verdict, url=url, raw_sha256=raw_sha256, size=len(raw), raw_path=raw_path,
                fetched_at=fetched_at, run_id=segment.run_id, duplicate=duplicate, equivocation=equivocation))]
            if not duplicate:
                rows.append(("records", record_row(verdict, raw_sha256=raw_sha256, url=url, fetched_at=fetched_at,
                                                   run_id=segment.run_id, accepted_as_current=not objection)))
                rows += [("events", row) for row in event_rows(verdict, run_id=segment.run_id)]
                rows += [("aliases", row) for row in alias_rows(verdict, run_id=segment.run_id)]
            for table, row in rows:  # built first: a bundle that cannot be tabled changes nothing
                segment.tables[table].add(row)
            if not duplicate:
                self._history.add(number, version, events, built_at, fetched_at, current=not objection)
                segment.owed.append(Stored(number, version, verdict.canonical_sha256, raw_path, raw_sha256, len(raw)))
            self._count(segment, "duplicates" if duplicate else "verified")
            if objection:
                self._count(segment, "not_append_only")
            # tracked before the lock is released: a checkpoint taking this segment waits for it
            stored = _done(None) if duplicate else self._submit(segment, raw_path, raw)
        if objection:
            logger.warning("%s: version %s is not append-only (%s): kept as evidence, not current",
                           number, version, objection)
        return stored

    def add_rejected(self, raw: bytes, verdict, url: str, fetched_at: datetime) -> Future:
        """Quarantine a rejected bundle's bytes with a reason sidecar. The future gives
        the quarantined object's ObjectInfo, or None when this run already holds it."""
        if verdict.ok:
            raise ValueError("add_rejected takes rejected verdicts; use add_verified")
        self._check_usable()
        raw_sha256 = sha256_hex(raw)
        with self._lock:
            segment = self._segment
            first = raw_sha256 not in self._quarantined
            self._quarantined.add(raw_sha256)
            segment.tables["verifications"].add(verification_row(
                verdict, url=url, raw_sha256=raw_sha256, size=len(raw),
                raw_path=layout.quarantined(raw_sha256), fetched_at=fetched_at, run_id=segment.run_id))
            self._count(segment, "rejected")
            if not first:
                return _done(None)
            self._submit(segment, layout.quarantine_reason(raw_sha256),
                         quarantine_reason(verdict, raw_sha256, len(raw)), keep_existing=True)
            return self._submit(segment, layout.quarantined(raw_sha256), raw)

    def add_failure(self, url: str, reason: str, detail: str, fetched_at: datetime,
                    pith_number: str | None = None, path: str = "") -> None:
        """Record a fetch that gave no archivable bytes (a fetch error, an oversize
        body, a state.json that disagrees with its bundle): a ``verifications`` row
        with status ``failed``, so every failure is on record."""
        self._check_usable()
        verdict = Verdict("failed", reason, path, detail, pith_number=pith_number)
        with self._lock:
            segment = self._segment
            segment.tables["verifications"].add(verification_row(
                verdict, url=url, raw_sha256=None, size=None, raw_path=None,
                fetched_at=fetched_at, run_id=segment.run_id))
            self._count(segment, "failed")

    def counts(self) -> dict[str, int]:
        """What the run did so far, over all its segments: verified, duplicates,
        rejected, failed, not_append_only."""
        with self._lock:
            return dict(self._counts)

    def pending_bundles(self) -> int:
        """Bundle versions (stored, duplicate or quarantined) the next commit would list."""
        with self._lock:
            counts = self._segment.counts
            return counts["verified"] + counts["duplicates"] + counts["rejected"]

    def checkpoint(self, stats: dict | None = None, params: dict | None = None) -> str:
        """Commit everything added so far under a manifest of its own and go on in a
        new segment (a new run id). ``add_*`` may go on from other threads meanwhile:
        what they add belongs to the next segment. Returns the manifest's path; a
        failure fails the whole writer, as in ``commit``."""
        self._check_usable()
        with self._commit_lock:
            with self._lock:
                segment, self._segment = self._segment, self._new_segment()
            logger.info("run %s writing to %s (checkpoint of %s)", self._segment.run_id, self.store.uri,
                        segment.run_id)
            try:
                return self._commit(segment, stats, params)
            except BaseException as exc:  # its versions are in the history: nothing may commit after
                self._fail(exc)
                raise

    def commit(self, stats: dict | None = None, params: dict | None = None) -> str:
        """Finish the tables, wait for every upload, then write the signed manifest.
        Returns its path; raises StorageError (and writes no manifest) if anything failed."""
        self._check_usable()
        self._open = False
        try:
            with self._commit_lock:
                return self._commit(self._segment, stats, params)
        finally:
            self._release()

    def abort(self) -> None:
        """Stop without a manifest; what was uploaded stays as orphans to collect."""
        if self._open:
            self._open = False
            with self._commit_lock:  # a checkpoint under way still writes into the spool
                with self._lock:
                    for writer in self._segment.tables.values():
                        writer.discard()
                self._release()

    def refresh(self) -> int:
        """Read the manifests other writers committed since this one started (or last
        refreshed) into the history used for dedup: before redoing a dead worker's
        tasks, whose checkpoints may already hold some of them. Returns how many."""
        fresh = list(committed_manifests(self.store, self._keyring, skip=self._known_runs))
        records, events = self._table_entries(fresh)
        with self._lock:
            self._history.absorb(*self._table_rows(records, events))
        return len(fresh)

    # --- internals -------------------------------------------------------------
    def _read_committed(self) -> tuple[History, str | None, Frontier]:
        """What a new run must know of the committed archive: its history (every
        version, each record's current one), the head of this signer's attestation
        chain and where its log stands."""
        manifests = list(committed_manifests(self.store, self._keyring))
        feed, last = None, ""
        for manifest in manifests:
            if manifest["signature"]["key_id"] != self.signer.key_id:
                continue
            for entry in manifest["objects"]:
                if layout.is_attestation_feed(entry["path"]) and manifest["committed_at"] > last:
                    # a key's runs follow one another: its last commit holds its chain's head
                    # (run ids sort by start second only)
                    feed, last = entry, manifest["committed_at"]
        history = History.from_tables(*self._table_rows(*self._table_entries(manifests)))
        head = chain_head(self.store, feed, Keyring([self.signer.pinned()])) if feed else None
        return history, head, read_log(self.store, key_logs(manifests).get(self.signer.key_id), Frontier())

    def _table_entries(self, manifests) -> tuple[list[dict], list[dict]]:
        records, events = [], []
        for manifest in manifests:
            self._known_runs.add(manifest["run_id"])
            for entry in manifest["objects"]:
                if entry.get("table") == "records":
                    records.append(entry)
                elif entry.get("table") == "events":
                    events.append(entry)
        return records, events

    def _table_rows(self, records: list[dict], events: list[dict]):
        return ((batch for entry in records for batch in table_batches(self.store, entry, RECORD_COLUMNS)),
                (batch for entry in events for batch in table_batches(self.store, entry, EVENT_COLUMNS)))

    def _new_segment(self, run_id: str | None = None) -> _Segment:
        run_id = run_id or layout.new_run_id(self.worker)
        self._known_runs.add(run_id)
        return _Segment(run_id, lambda segment: {
            name: TableWriter(spec, run_id, partial(self._emit_table, segment), self.policy, self._spool.name,
                              self._budget)
            for name, spec in TABLES.items()})

    def _count(self, segment: _Segment, what: str) -> None:
        self._counts[what] += 1
        segment.counts[what] += 1

    def _commit(self, segment: _Segment, stats: dict | None, params: dict | None) -> str:
        self._wait(segment)  # every raw object stored: now it can be attested
        self._raise_if_failed()
        attestations = self._feed.seal(segment.owed, segment.run_id, segment.stored_at)
        with self._lock:
            for event in attestations:
                segment.tables["attestations"].add(attestation_row(event))
            for writer in segment.tables.values():
                writer.close()
        self._wait(segment)
        self._raise_if_failed()
        if attestations:
            self._record(segment, self.store.put_bytes(layout.attestation_feed(segment.run_id),
                                                       feed_bytes(attestations)))
            for info in self._log.extend(self.store, segment.run_id, attestations):
                self._record(segment, info)
        self._record(segment, self._publish_key())
        manifest = build_manifest(
            run_id=segment.run_id, worker=self.worker, started_at=segment.started_at,
            objects=list(segment.written.values()), params=params or {},
            stats={**(stats or {}), "archive": self._archive_stats(segment)})
        return commit_manifest(self.store, sign_manifest(manifest, self.signer)).path

    def _publish_key(self) -> ObjectInfo:
        """Store this signer's key document, or keep the one an earlier run stored for
        the same key (written before key documents named their role)."""
        try:
            return self.store.put_bytes(layout.key_document(self.signer.key_id),
                                        canon(self.signer.archive_key_document()) + b"\n")
        except ObjectExists as exc:
            try:
                stored = key_from_entry(json.loads(self.store.get_bytes(exc.existing.path)), ARCHIVE)
            except (ValueError, KeyringError):  # JSONDecodeError is a ValueError
                raise exc from None
            if stored != self.signer.pinned():
                raise
            return exc.existing

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise StorageError(f"run {self.run_id} failed: {self._failure}") from self._failure

    def _check_usable(self) -> None:
        self._raise_if_failed()
        if not self._open:
            raise StorageError(f"run {self.run_id} is already committed or aborted")

    def _submit(self, segment: _Segment, path: str, data: bytes, keep_existing: bool = False) -> Future:
        future = self._uploader.submit(len(data), self._put_bytes, segment, path, data, keep_existing)
        self._track(segment, future)
        return future

    def _put_bytes(self, segment: _Segment, path: str, data: bytes, keep_existing: bool) -> ObjectInfo:
        try:
            info = self.store.put_bytes(path, data)
            segment.stored_at[path] = utc_now()
        except ObjectExists as exc:
            if not keep_existing:
                self._fail(exc)
                raise
            info = exc.existing  # list what is stored, not what we would have written
        except BaseException as exc:
            self._fail(exc)
            raise
        return self._record(segment, info)

    def _emit_table(self, segment: _Segment, path: str, spool, rows: int) -> None:
        self._track(segment, self._uploader.submit(spool.stat().st_size, self._put_table, segment, path, spool, rows))

    def _put_table(self, segment: _Segment, path: str, spool, rows: int) -> ObjectInfo:
        table = path.split("/")[1]
        try:
            info = self.store.put_file(path, spool)
        except BaseException as exc:
            self._fail(exc)
            raise
        finally:
            spool.unlink(missing_ok=True)
        return self._record(segment, info, table=table, rows=rows)

    def _record(self, segment: _Segment, info: ObjectInfo, **extra) -> ObjectInfo:
        with self._written_lock:
            segment.written[info.path] = {**info.entry(), **extra}
        return info

    def _fail(self, exc: BaseException) -> None:
        logger.error("run %s: %s", self.run_id, exc)
        with self._written_lock:
            if self._failure is None:
                self._failure = exc

    def _track(self, segment: _Segment, future: Future) -> None:
        with self._written_lock:
            segment.pending.add(future)
        future.add_done_callback(partial(self._untrack, segment))

    def _untrack(self, segment: _Segment, future: Future) -> None:
        with self._written_lock:
            segment.pending.discard(future)

    def _wait(self, segment: _Segment) -> None:
        with self._written_lock:
            pending = list(segment.pending)
        wait(pending)

    def _archive_stats(self, segment: _Segment) -> dict:
        objects = segment.written.values()
        rows = Counter()
        for entry in objects:
            if "table" in entry:
                rows[entry["table"]] += entry["rows"]
        counts = segment.counts
        return {"verified": counts["verified"], "duplicates": counts["duplicates"],
                "rejected": counts["rejected"], "failed": counts["failed"],
                "not_append_only": counts["not_append_only"], "objects": len(objects),
                "bytes": sum(entry["size"] for entry in objects),
                "rows": {name: rows[name] for name in TABLES}}

    def _release(self) -> None:
        self._wait(self._segment)  # no upload may still be reading a spool file
        self._spool.cleanup()
        if self._owns_uploader:
            self._uploader.close()
