"""The one object a crawl pipeline talks to: it stores raw bytes, feeds the tables, and
commits what it wrote with one signed manifest per run. Its parts each own one thing:
``storage.archive.history_loader`` the history new versions are judged against,
``storage.writing.open_run`` what one manifest lists (uploads, table files, owed
attestations), ``storage.writing.commit`` the attestations, transparency log and signed
manifest of a commit, ``storage.writing.spool`` the local folder table files are spooled in.

Nothing is read or written when a writer is made: ``open`` reads the committed
archive (its history, the head of this key's attestation chain, where its log stands)
and makes the spool folder, removing those of killed jobs.

A long crawl commits as it goes: ``commit_interim`` seals what was written so far under a
manifest of its own (a run id of its own) and carries on in a new run, so memory, and
what a crash can lose, stay bounded by the run, not the crawl. The history used for
dedup and the attestation chain run across runs.

What a run takes in (``add_*``: verified versions, rejected bundles, failures) is
``storage.writing.intake``'s. Any failed write fails the run: ``add_*`` raise
StorageError from then on and ``commit`` raises instead of writing a manifest.
"""

import logging
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from pith.keyring import Keyring
from pith.signing import Signer
from storage.archive import layout
from storage.archive.history_loader import HistoryLoader
from storage.archive.manifest import Committed, read_committed
from storage.archive.stores import ObjectStore, StorageError
from storage.capture.warc import WarcPolicy
from storage.capture.warc_process import WarcProcess, recent_payloads, store_warc
from storage.writing.commit import RunCommitter
from storage.writing.intake import ArchiveIntake
from storage.writing.open_run import OpenRun, RunFailure
from storage.writing.spool import Spool
from storage.writing.table_writer import RollPolicy
from storage.writing.uploads import BoundedUploader

logger = logging.getLogger(__name__)


class ArchiveWriter(ArchiveIntake):
    """One run of one worker writing into an archive: ``ArchiveWriter(...).open()``."""

    def __init__(
        self,
        store: ObjectStore,
        signer: Signer,
        *,
        worker: str = "w0",
        run_id: str | None = None,
        keyring: Keyring | None = None,
        uploader: BoundedUploader | None = None,
        policy: RollPolicy = RollPolicy(),
        spool_dir: str | Path | None = None,
        dedup: bool = True,
        warc: WarcPolicy | None = None,
        warc_info: dict | None = None,
        log_origin: str | None = None,
    ) -> None:
        """``keyring`` pins the archiver keys whose manifests are trusted for dedup and
        history (default: this signer's key). ``dedup=False`` starts as if the archive
        were empty (no dedup, no history, a new attestation chain): for a fresh archive
        only. ``uploader`` may be shared between writers. ``run_id`` names the first
        run; interim commits start the next ones with new run ids."""
        self.store = store
        self.signer = signer
        self.worker = worker
        self.policy = policy
        self.first_run = layout.check_run_id(run_id) if run_id else layout.new_run_id(worker)  # names the crawl
        self._dedup = dedup
        self._history = HistoryLoader(store, keyring or Keyring([signer.pinned()]))
        self._committer = RunCommitter(store, signer, worker, log_origin)
        self._uploader = uploader or BoundedUploader(workers=store.upload_threads)
        self._owns_uploader = uploader is None
        self._spool = Spool(spool_dir)
        self._failure = RunFailure(self.first_run)
        self._quarantined: set[str] = set()
        self._lock = threading.Lock()  # the history, the tables, counters, the current run
        self._commit_lock = threading.Lock()  # runs commit one at a time, in order
        self._counts: Counter[str] = Counter()
        self._committed_new = 0  # versions archived new that a committed manifest lists
        # after ``open``: the run ids of the manifests trusted for history and dedup, and
        # of every manifest the archive holds (trusted or not): what caches outside the
        # archive are checked against
        self.committed_runs: frozenset[str] = frozenset()
        self.present_runs: frozenset[str] = frozenset()
        self._open_run: OpenRun | None = None
        self._open = False
        self._warc_policy, self._warc_info = warc, warc_info or {}
        self.warc: WarcProcess[OpenRun] | None = None  # with ``warc``, after ``open``: the crawl's WARC files

    def open(self) -> "ArchiveWriter":
        """Read what the run must know of the committed archive, make the spool
        folder and start the first run. Returns the writer."""
        committed = read_committed(self.store, self._history.keyring) if self._dedup else Committed([], [])
        manifests = committed.manifests
        self.committed_runs = frozenset(manifest["run_id"] for manifest in manifests)
        self.present_runs = self.committed_runs | {
            run_id for read in committed.untrusted if (run_id := layout.manifest_run_id(read.path))
        }
        self._history.open(manifests)
        head = self._committer.resume(manifests)
        self._spool.open()
        self._open_run = self._new_run(self.first_run)
        if self._warc_policy is not None:
            self.warc = WarcProcess(
                self.first_run, self._spool.path, self._emit_warc, self._warc_info, self._warc_policy
            )
            self.warc.seed(recent_payloads(self.store, manifests))
        self._open = True
        logger.info("run %s writing to %s (attestations chained to %s)", self.first_run, self.store.uri, head)
        return self

    @property
    def current_run(self) -> layout.RunId:
        """The run id of the run adds go into now. Read after an add, it names that
        add's run or a later one (an interim commit may switch between the two)."""
        with self._lock:
            return self._run().run_id

    def counts(self) -> dict[str, int]:
        """What the run did so far, over all its runs: verified, duplicates,
        rejected, failed, not_append_only."""
        with self._lock:
            return dict(self._counts)

    def pending_bundles(self) -> int:
        """Bundle versions (stored, duplicate or quarantined) the next commit would list."""
        with self._lock:
            counts = self._run().counts
            return counts["verified"] + counts["duplicates"] + counts["rejected"]

    def uncommitted(self) -> int:
        """Versions archived new that no manifest lists yet (the open run's, and an interim
        commit's under way): what is lost if the crawl stops now. Read without the lock, so
        a signal handler may ask."""
        return self._counts["verified"] - self._committed_new

    def commit_interim(self, stats: dict | None = None, params: dict | None = None) -> str:
        """Commit everything added so far under a manifest of its own and go on in a
        new run (a new run id). ``add_*`` may go on from other threads meanwhile:
        what they add belongs to the next run. Returns the manifest's path; a
        failure fails the whole writer, as in ``commit``."""
        self._check_usable()
        with self._commit_lock:
            with self._lock:
                open_run, self._open_run = self._run(), self._new_run()
            if self.warc is not None:  # its records are this run's: it commits the file
                self.warc.roll(open_run)
            logger.info(
                "run %s writing to %s (interim commit of %s)", self._open_run.run_id, self.store.uri, open_run.run_id
            )
            try:
                path = self._committer.commit(open_run, stats, params)
            except BaseException as exc:  # its versions are in the history: nothing may commit after
                self._failure.record(exc)
                raise
            self._committed_new += open_run.counts["verified"]
            return path

    def commit(self, stats: dict | None = None, params: dict | None = None) -> str:
        """Finish the tables, wait for every upload, then write the signed manifest.
        Returns its path; raises StorageError (and writes no manifest) if anything failed."""
        self._check_usable()
        self._open = False
        self._history.close()  # no add may follow: its memory is not the commit's too
        try:
            with self._commit_lock:
                if self.warc is not None:
                    self.warc.close(self._run())
                path = self._committer.commit(self._run(), stats, params)
                self._committed_new += self._run().counts["verified"]
                return path
        finally:
            self._release()

    def abort(self) -> None:
        """Stop without a manifest; what was uploaded stays behind as orphans (the audit lists them)."""
        if self._open:
            self._open = False
            with self._commit_lock:  # an interim commit under way still writes into the spool
                if self.warc is not None:
                    self.warc.discard()
                self._run().discard()
                self._release()

    def refresh(self) -> int:
        """Read the manifests other writers committed since this one opened (or last
        refreshed) into the history used for dedup: before redoing a dead worker's
        tasks, whose interim commits may already hold some of them. Returns how many."""
        return self._history.refresh(self._lock)

    def held_versions(self) -> Iterator[tuple[str, bytes, int, int]]:
        """The current version of every record the archive holds (``History.current_dates``),
        for the crawl to ask only what may have changed; the history is held until read."""
        with self._lock:
            yield from self._history.history.current_dates()

    # --- internals -------------------------------------------------------------
    def _new_run(self, run_id: layout.RunId | None = None) -> OpenRun:
        run_id = run_id or layout.new_run_id(self.worker)
        self._history.known_runs.add(run_id)
        return OpenRun(
            run_id,
            self.store,
            self._uploader,
            self._failure,
            policy=self.policy,
            spool_dir=self._spool.path,
            rows_lock=self._lock,
        )

    def _emit_warc(
        self, open_run: OpenRun, path: str, spool: Path, captures: Path, index: Path, failure: str | None
    ) -> None:
        """A finished WARC file: the file with its index, and its capture rows, in ``run``."""

        def add_rows(rows: list[dict]) -> None:
            open_run.add_rows("captures", [{**row, "run_id": open_run.run_id} for row in rows])

        open_run.submit_job(store_warc, self.store, path, spool, captures, index, failure, add_rows)

    def _run(self) -> OpenRun:
        """The run adds go into (``open`` started it)."""
        if self._open_run is None:
            raise StorageError(f"run {self.first_run} is not open")
        return self._open_run

    def _check_usable(self) -> None:
        self._failure.check()
        if not self._open:
            state = "not open" if self._open_run is None else "already committed or aborted"
            raise StorageError(f"run {self.first_run} is {state}")

    def _release(self) -> None:
        self._run().wait()  # no upload may still be reading a spool file
        if self.warc is not None:  # stopped, whatever stopped the run
            self.warc.discard()
        self._spool.cleanup()
        if self._owns_uploader:
            self._uploader.close()
