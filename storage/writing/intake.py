"""What a run takes in, as the pipeline hands it (a mixin of ``storage.writing.writer.ArchiveWriter``).

Rows are idempotent across runs: a bundle version (``bundle_sha256``) already listed in a
committed ``records`` file, or seen earlier in this run, gets a verifications row marked
``duplicate`` and nothing else. A record's history only grows (``storage.archive.history``):
a version that is not append-only is stored as evidence but not made current. A rejected
bundle's bytes are quarantined once, with a reason sidecar; a fetch that gave no bytes is
a ``failed`` row.
"""

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from datetime import datetime

from pith.canonical import canon, sha256_hex
from pith.reasons import Reason
from pith.shipped import version
from pith.split_view import Equivocation
from pith.verdict import Status, Verdict
from storage.archive import layout
from storage.archive.history import Judgement, judge
from storage.archive.history_loader import HistoryLoader
from storage.archive.rows import verification_row
from storage.archive.stores import ObjectInfo, Put, StorageError
from storage.transparency.attestations import Stored
from storage.writing.open_run import OpenRun
from storage.writing.prepared import Prepared, prepare

logger = logging.getLogger(__name__)

REASON_TYPE = "pith_quarantine_reason"


def quarantine_sidecar(verdict: Verdict, raw_sha256: str, size: int) -> bytes:
    """The sidecar of a quarantined bundle: a function of the bytes and the verifier
    only (the URL and time are in the verifications table), so re-quarantining the same
    bytes writes the same sidecar."""
    return (
        canon(
            {
                "reason_type": REASON_TYPE,
                "raw_sha256": raw_sha256,
                "size": size,
                "status": verdict.status,
                "reason": verdict.reason,
                "path": verdict.path,
                "detail": verdict.detail,
                "pith_number": verdict.pith_number,
                "verifier": {"name": "pith-archiver", "version": version()},
            }
        )
        + b"\n"
    )


def _done(value: ObjectInfo | None) -> "Future[ObjectInfo | None]":
    future: Future[ObjectInfo | None] = Future()
    future.set_result(value)
    return future


class ArchiveIntake:
    """A mixin of the archive writer: what it needs of it is declared here."""

    _lock: threading.Lock  # the history, the tables, counters, the current run
    _history: HistoryLoader
    _quarantined: set[str]  # the raw digests this writer's runs quarantined
    _counts: Counter[str]  # over all the writer's runs
    _run: Callable[[], OpenRun]
    _check_usable: Callable[[], None]

    def add_verified(
        self,
        raw: bytes,
        verdict: Verdict,
        url: str,
        fetched_at: datetime,
        equivocation: Equivocation | None = None,
        on_objection: Callable[[str], None] | None = None,
        forks_are_split_views: bool = False,
        raw_sha256: str | None = None,
    ) -> "Future[ObjectInfo | None]":
        """Archive a verified bundle version (``add_prepared``); ``raw_sha256``: the
        bytes' digest, when the caller has it already."""
        if not verdict.ok:
            raise ValueError("add_verified takes verified verdicts; use add_rejected")
        prepared = prepare(verdict, raw_sha256 or sha256_hex(raw), len(raw))
        return self.add_prepared(raw, prepared, url, fetched_at, equivocation, on_objection, forks_are_split_views)

    def add_prepared(
        self,
        raw: bytes,
        prepared: Prepared,
        url: str,
        fetched_at: datetime,
        equivocation: Equivocation | None = None,
        on_objection: Callable[[str], None] | None = None,
        forks_are_split_views: bool = False,
        stored: Put | StorageError | None = None,
    ) -> "Future[ObjectInfo | None]":
        """Archive a verified bundle version, ``prepared`` (and ``stored``: its bytes put into
        ``ObjectStore.folder``, or why not) where it was verified. The future gives the raw object's
        ObjectInfo once stored, or None when the version was archived before. A version that is not
        append-only is stored but not made current (reason ``not_append_only``), and ``on_objection``
        is told at once how it relates to the current version: "stale" (older) or "forked" (each
        lacks events of the other); a pith.split_view.Equivocation flags it ``equivocation``, and so
        does a fork when ``forks_are_split_views`` (a mirror's copy, in a crawl spread over several
        sources: it shows another history than the one the archive holds)."""
        self._check_usable()
        with self._lock:
            open_run = self._run()
            judged, upload = self._admit(open_run, raw, prepared, url, fetched_at, equivocation, forks_are_split_views)
            future = _done(None) if upload is None else open_run.submit(*upload[:2], owed=upload[2], stored=stored)
            if upload is None and isinstance(stored, Put) and stored.made:  # a version held, in other bytes:
                path = layout.raw_bundle(prepared.raw_sha256)  # listed, never an orphan; owed no attestation
                open_run.adopt(path, stored, prepared.stored(path), attested=False)
        if judged.relation is not None and on_objection is not None:
            on_objection(judged.relation)
        return future

    def add_prepared_all(self, versions: Iterable[tuple[bytes, Prepared, str]], fetched_at: datetime) -> None:
        """Archive verified versions, ``(raw, prepared, url)`` each, as ``add_prepared``
        does (no split views) in one hold of the lock, their raw objects stored a few
        to an upload job: a handoff between threads for several, not for each."""
        self._check_usable()
        with self._lock:
            open_run = self._run()
            uploads = [self._admit(open_run, raw, prepared, url, fetched_at)[1] for raw, prepared, url in versions]
            open_run.submit_all([upload for upload in uploads if upload is not None])

    def _admit(
        self,
        open_run: OpenRun,
        raw: bytes,
        prepared: Prepared,
        url: str,
        fetched_at: datetime,
        equivocation: Equivocation | None = None,
        forks_are_split_views: bool = False,
    ) -> tuple[Judgement, tuple[str, bytes, Stored] | None]:
        """Judge a version against its record's history, and add it to the history and
        the run's tables (under the lock: the history's answer stands until the version is
        in both). Returns the judgement, and what to store unless it is a duplicate."""
        number, bundle, events, built_at = prepared.version
        history = self._history.history
        duplicate, current = history.look_up(number, bundle)
        judged = judge(current, bundle, events, built_at, fetched_at, url, equivocation, forks_are_split_views)
        raw_path = None if duplicate else layout.raw_bundle(prepared.raw_sha256)
        for table, line in prepared.lines(open_run.run_id, judged, url, fetched_at, raw_path):  # all encoded first
            open_run.tables[table].append(line)
        objection = judged.objection
        if objection is not None:
            self._count(open_run, Reason.NOT_APPEND_ONLY)
            logger.warning(
                "%s: version %s is not append-only (%s): kept as evidence, not current", number, bundle, objection
            )
        if raw_path is None:
            self._count(open_run, "duplicates")
            return judged, None
        history.add(number, bundle, events, built_at, fetched_at, current=objection is None)
        self._count(open_run, "verified")
        return judged, (raw_path, raw, prepared.stored(raw_path))

    def add_rejected(
        self, raw: bytes, verdict: Verdict, url: str, fetched_at: datetime, raw_sha256: str | None = None
    ) -> "Future[ObjectInfo | None]":
        """Quarantine a rejected bundle's bytes with a reason sidecar. The future gives
        the quarantined object's ObjectInfo, or None when this run already holds it."""
        if verdict.ok:
            raise ValueError("add_rejected takes rejected verdicts; use add_verified")
        self._check_usable()
        raw_sha256 = raw_sha256 or sha256_hex(raw)
        with self._lock:
            open_run = self._run()
            first = raw_sha256 not in self._quarantined
            self._quarantined.add(raw_sha256)
            open_run.tables["verifications"].add(
                verification_row(
                    verdict,
                    url=url,
                    raw_sha256=raw_sha256,
                    size=len(raw),
                    raw_path=layout.quarantined(raw_sha256),
                    fetched_at=fetched_at,
                    run_id=open_run.run_id,
                )
            )
            self._count(open_run, "rejected")
            if not first:
                return _done(None)
            open_run.submit(
                layout.quarantine_reason(raw_sha256),
                quarantine_sidecar(verdict, raw_sha256, len(raw)),
                keep_existing=True,
            )
            return open_run.submit(layout.quarantined(raw_sha256), raw)

    def add_failure(
        self, url: str, reason: str, detail: str, fetched_at: datetime, pith_number: str | None = None, path: str = ""
    ) -> None:
        """Record a fetch that gave no archivable bytes (a fetch error, an oversize
        body, a state.json that disagrees with its bundle): a ``verifications`` row
        with status ``failed``, so every failure is on record."""
        self._check_usable()
        verdict = Verdict(Status.FAILED, reason, path, detail, pith_number=pith_number)
        with self._lock:
            open_run = self._run()
            open_run.tables["verifications"].add(
                verification_row(
                    verdict,
                    url=url,
                    raw_sha256=None,
                    size=None,
                    raw_path=None,
                    fetched_at=fetched_at,
                    run_id=open_run.run_id,
                )
            )
            self._count(open_run, "failed")

    def add_object(self, path: str, data: bytes) -> "Future[ObjectInfo]":
        """Store an object the run lists beside its bundles (how far a sync from a
        peer's log got); one already there with these bytes is listed again."""
        self._check_usable()
        with self._lock:
            return self._run().submit(path, data, keep_existing=True)

    def _count(self, open_run: OpenRun, what: str) -> None:
        self._counts[what] += 1
        open_run.counts[what] += 1
