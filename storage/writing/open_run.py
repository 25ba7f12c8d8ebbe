"""A run of a run: what one manifest lists. Its raw objects and table files are
stored while the run goes on; the run tracks the uploads under way, and its
ledger (``storage.writing.ledger``) notes each object they stored and the bundle versions
owed an attestation when it commits.

Every upload of a run reports a failure to the run's one ``RunFailure``: from then
on nothing of the run may commit.
"""

import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import Future, wait
from dataclasses import replace
from pathlib import Path
from typing import Any

from pith.reasons import Reason
from pith.signing import utc_now
from storage.archive.layout import TABLE_NAMES, RunId
from storage.archive.stores import ObjectExists, ObjectInfo, ObjectStore, Put, StorageError
from storage.transparency.attestations import Stored
from storage.writing.ledger import Ledger
from storage.writing.table_writer import RollPolicy, TableWriter
from storage.writing.uploads import BoundedUploader

logger = logging.getLogger(__name__)

UPLOAD_BATCH = 16  # objects an upload job of ``submit_all`` stores


class RunFailure:
    """The first failure of a run's writes, kept so that every later step refuses."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.error: BaseException | None = None
        self._lock = threading.Lock()

    def record(self, exc: BaseException) -> None:
        logger.error("run %s: %s", self.run_id, exc)
        with self._lock:
            if self.error is None:
                self.error = exc

    def check(self) -> None:
        """StorageError if any write of the run failed."""
        if self.error is not None:
            raise StorageError(f"run {self.run_id} failed: {self.error}") from self.error


class OpenRun:
    """One manifest's worth of a run. ``tables`` and ``counts`` change under
    ``rows_lock``, the writer's lock over its runs' rows; what the uploads report
    changes under the run's own lock."""

    def __init__(
        self,
        run_id: RunId,
        store: ObjectStore,
        uploader: BoundedUploader,
        failure: RunFailure,
        *,
        policy: RollPolicy,
        spool_dir: str,
        rows_lock: threading.Lock,
    ):
        self.run_id = run_id
        self.started_at = utc_now()
        self.store = store
        self.spool_dir = spool_dir
        self.tables = {name: TableWriter(name, run_id, self._emit_table, policy, spool_dir) for name in TABLE_NAMES}
        self.counts: Counter[str] = Counter()
        self.ledger = Ledger(spool_dir)
        self._uploader = uploader
        self._failure = failure
        self._rows_lock = rows_lock
        self._lock = threading.Lock()
        self._pending: set[Future] = set()

    def submit(
        self,
        path: str,
        data: bytes,
        keep_existing: bool = False,
        owed: Stored | None = None,
        stored: "Put | StorageError | None" = None,
    ) -> Future:
        """Store ``data`` under ``path``; the future gives its ObjectInfo. With
        ``keep_existing`` another object already there is listed instead of failing;
        ``owed``: the bundle version it stores, owed an attestation once stored;
        ``stored``: what the process that verified it stored already (``adopt``)."""
        if stored is not None:
            if owed is None:
                raise ValueError(f"{path}: only a bundle version's bytes are stored where it is verified")
            return self.adopt(path, stored, owed)
        if len(data) <= self.store.inline_write_max:
            return self._put_now(path, data, keep_existing, owed)
        future = self._uploader.submit(len(data), self._put_bytes, path, data, keep_existing, owed)
        self._track(future)
        return future

    def _put_now(self, path: str, data: bytes, keep_existing: bool, owed: Stored | None) -> Future:
        """``submit`` in the caller's thread: the future is done on return, with the
        ObjectInfo or the failure (recorded for the run, as an upload's would be)."""
        future: Future[ObjectInfo] = Future()
        try:
            future.set_result(self._put_bytes(path, data, keep_existing, owed))
        except Exception as exc:
            future.set_exception(exc)
        return future

    def adopt(self, path: str, stored: "Put | StorageError", owed: Stored, attested: bool = True) -> Future:
        """An object another process stored as ``submit`` would have (a verifier writing
        into the archive's folder): listed and owed an attestation alike (unless not
        ``attested``: bytes of a version archived before), its failure recorded for the
        run alike; a future done on return, as ``submit``'s."""
        future: Future[ObjectInfo] = Future()
        if isinstance(stored, Put) and (stored.info.path, stored.info.sha256, stored.info.size) != (
            path,
            owed.raw_sha256,
            owed.size,
        ):
            info = stored.info
            stored = StorageError(
                f"{self.store.uri}: {path} was stored as {info.path} ({info.sha256}, {info.size} bytes)"
            )
        if isinstance(stored, StorageError):
            self._failure.record(stored)
            future.set_exception(stored)
            return future
        self.store.adopt(path)
        future.set_result(self.ledger.record(stored.info, *((owed, utc_now()) if attested else ())))
        return future

    def submit_all(self, objects: list[tuple[str, bytes, Stored]]) -> None:
        """Store each of ``objects`` (path, data, the version owed an attestation),
        UPLOAD_BATCH to an upload job: a thread's wake-up and a future for several."""
        for start in range(0, len(objects), UPLOAD_BATCH):
            batch = objects[start : start + UPLOAD_BATCH]
            self._track(self._uploader.submit(sum(len(data) for _, data, _ in batch), self._put_all, batch))

    def submit_job(self, fn: Callable[..., Iterable[ObjectInfo]], *args: Any) -> Future:
        """Run ``fn(*args)`` on the uploader and list every ObjectInfo it returns: a job
        that streams its own spool files (a WARC), so it holds no bytes in flight."""
        future = self._uploader.submit(0, self._run_job, fn, args)
        self._track(future)
        return future

    def record(self, info: ObjectInfo) -> ObjectInfo:
        """List a stored object in the run's manifest."""
        return self.ledger.record(info)

    def wait(self) -> None:
        """Wait for every upload under way (none may still read a spool file)."""
        with self._lock:
            pending = list(self._pending)
        wait(pending)

    def settle(self) -> None:
        """Wait for every upload under way; StorageError if any write of the run failed."""
        self.wait()
        self._failure.check()

    def add_rows(self, table: str, rows: list[dict]) -> None:
        with self._rows_lock:
            for row in rows:
                self.tables[table].add(row)

    def close_tables(self, names: Iterable[str] | None = None) -> None:
        """Write the spooled rows of the tables ``names`` (all: None) as Parquet files
        and hand them over: the tables take no more rows once the adds' lock is let go,
        and are written outside it (the crawl goes on adding to the next run meanwhile)."""
        writers = [self.tables[name] for name in names] if names is not None else list(self.tables.values())
        with self._rows_lock:
            for writer in writers:
                writer.seal()
        for writer in writers:
            writer.close()

    def discard(self) -> None:
        """Drop the table files not yet handed over, and the ledger (an aborted run)."""
        with self._rows_lock:
            for writer in self.tables.values():
                writer.discard()
        self.ledger.discard()

    def objects(self) -> list[ObjectInfo]:
        return self.ledger.objects()

    def archive_stats(self, objects: list[ObjectInfo]) -> dict:
        """The manifest's ``stats.archive``: what the run archived and stored
        (``objects``, as ``objects()`` gives them)."""
        rows: Counter[str] = Counter()
        for info in objects:
            if info.table is not None:
                rows[info.table] += info.rows or 0
        counts = self.counts
        return {
            "verified": counts["verified"],
            "duplicates": counts["duplicates"],
            "rejected": counts["rejected"],
            "failed": counts["failed"],
            Reason.NOT_APPEND_ONLY: counts[Reason.NOT_APPEND_ONLY],
            "objects": len(objects),
            "bytes": sum(info.size for info in objects),
            "rows": {name: rows[name] for name in TABLE_NAMES},
        }

    # --- upload jobs -------------------------------------------------------------
    def _put_bytes(self, path: str, data: bytes, keep_existing: bool, owed: Stored | None) -> ObjectInfo:
        try:
            info = self.store.put_bytes(path, data)
        except ObjectExists as exc:
            if not keep_existing:
                self._failure.record(exc)
                raise
            return self.record(exc.existing)  # list what is stored, not what we would have written
        except BaseException as exc:
            self._failure.record(exc)
            raise
        return self.ledger.record(info, owed, utc_now() if owed else None)

    def _put_all(self, objects: list[tuple[str, bytes, Stored]]) -> None:
        for path, data, owed in objects:
            self._put_bytes(path, data, False, owed)

    def _run_job(self, fn: Callable[..., Iterable[ObjectInfo]], args: tuple) -> list[ObjectInfo]:
        try:
            return [self.record(info) for info in fn(*args)]
        except BaseException as exc:
            self._failure.record(exc)
            raise

    def _emit_table(self, path: str, spool: Path, rows: int) -> None:
        self._track(self._uploader.submit(spool.stat().st_size, self._put_table, path, spool, rows))

    def _put_table(self, path: str, spool: Path, rows: int) -> ObjectInfo:
        try:
            info = self.store.put_file(path, spool)
        except BaseException as exc:
            self._failure.record(exc)
            raise
        finally:
            spool.unlink(missing_ok=True)
        return self.record(replace(info, table=path.split("/")[1], rows=rows))

    def _track(self, future: Future) -> None:
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._untrack)

    def _untrack(self, future: Future) -> None:
        with self._lock:
            self._pending.discard(future)
