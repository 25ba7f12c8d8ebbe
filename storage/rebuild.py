"""Rebuilding a damaged derived file from what it was derived from, for ``audit
--repair-from`` when no peer holds the copy listed: a table file's rows from its run's
raw objects, a WARC file's CDXJ index from the WARC file.

Nothing is believed that does not verify. The rows of a run are those of its signed
attestation feed (each event checked under a pinned archive key): one per verified
version it stored, whose raw object must hash to what the run's manifest lists and
verify again under the pinned registry keys. ``records`` rows also need where and when
the version was fetched and whether it became current: the run's ``verifications``
rows say so, read only when they match their manifest entries. ``captures`` rows and
CDXJ lines are read back from the run's WARC files (``storage.capture.warc_salvage``),
checked against their entries too. The rebuilt file must hold as many rows as the
manifest listed for the damaged one, or it is not used.

A rebuild that gives the listed bytes back is the listed file, restored; any other is
a new file at a new path, which the repair's manifest lists as superseding the listed
one (``storage.archive.manifest.Superseded``). A ``verifications`` file is never
rebuilt: it records every fetch, failed ones too, which left no raw object behind.
"""

import logging
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pith.attestation import read_attestation, split_lines
from pith.keyring import Keyring
from pith.reasons import Reason, Rejected
from pith.verdict import Verdict
from pith.verify import verify_bundle
from storage.archive import layout
from storage.archive.manifest import listed, read_committed, superseded
from storage.archive.reader import check_digest, read_entry, table_batches
from storage.archive.rows import alias_rows, attestation_row, event_rows, record_row
from storage.archive.stores import ObjectInfo, ObjectStore, StorageError, hash_file
from storage.capture.captures import read_batches
from storage.capture.cdxj import sort_index
from storage.capture.warc_salvage import salvage
from storage.writing.table_writer import RollPolicy, TableWriter

logger = logging.getLogger(__name__)

FROM_RAW = "this archive's raw objects"  # a rebuild's source, where a repair names its peer
FETCH_COLUMNS = ["raw_sha256", "raw_path", "url", "fetched_at", "status", "reason"]
BUNDLE_ROWS = {"events": event_rows, "aliases": alias_rows}


class NotRebuilt(Exception):
    """Why a damaged file cannot be rebuilt from this archive's raw objects."""


def rebuildable(entry: ObjectInfo) -> bool:
    """Whether ``entry`` is a derived file: a table file or a WARC file's index."""
    return entry.table is not None or layout.is_warc_index(entry.path)


class Rebuilder:
    """Rebuilds of one repair run (``run_id``, which names the new files) in ``work``,
    a local folder; ``keyring``: the pinned keys, registry and archive."""

    def __init__(self, store: ObjectStore, keyring: Keyring, run_id: str, work: Path) -> None:
        self.store = store
        self.keyring = keyring
        self.run_id = run_id
        self.work = work
        self._manifests: list[dict[str, Any]] | None = None
        self._made = 0

    def rebuild(self, entry: ObjectInfo) -> tuple[Path, ObjectInfo]:
        """The rebuilt file of ``entry`` (locally) and where it goes: the listed path when
        it gave the listed bytes back (then ``ObjectInfo`` is ``entry``), else a new one;
        NotRebuilt says why there is none."""
        manifest = self._source(entry.path, entry.sha256)
        try:
            if entry.table is None:
                return self._index(entry, manifest), entry
            return self._table(entry, manifest)
        except StorageError as exc:  # a file it is rebuilt from is missing or not as listed
            raise NotRebuilt(str(exc)) from None

    # --- what was listed -------------------------------------------------------------
    def _committed(self) -> list[dict[str, Any]]:
        if self._manifests is None:
            self._manifests = read_committed(self.store, self.keyring).manifests
        return self._manifests

    def _source(self, path: str, sha256: str) -> dict[str, Any]:
        """The manifest of the run that derived the file listed at ``path``: for a file a
        repair rebuilt, that of the file it superseded."""
        manifests = self._committed()
        for old in superseded(manifests).values():
            if old.by == path:
                return self._source(old.path, old.sha256)
        for manifest in manifests:
            if any(info.path == path and info.sha256 == sha256 for info in listed(manifest)):
                return manifest
        raise NotRebuilt("no committed manifest lists it")

    # --- table files -----------------------------------------------------------------
    def _table(self, entry: ObjectInfo, manifest: dict[str, Any]) -> tuple[Path, ObjectInfo]:
        table = entry.table or ""
        column, _ = layout.partition_of(entry.path)
        partition = entry.path.split("/")[2]
        made: list[tuple[Path, int]] = []
        writer = TableWriter(
            table,
            self.run_id,
            lambda _, local, rows: made.append((local, rows)),
            RollPolicy(max_rows=1 << 62, max_bytes=1 << 62),  # one file, however many rows
            self.work,
        )
        try:
            for row in self._rows(table, manifest):
                if layout.partition_dir(column, row.get(column)) == partition:
                    writer.add(row)
            writer.close()
        except Exception:  # NotRebuilt too: the rows spooled so far go
            writer.discard()
            raise
        rows = sum(count for _, count in made)
        if rows != entry.rows:
            for local, _ in made:
                local.unlink()
            raise NotRebuilt(f"the run's raw objects give {rows} rows of {partition}, the file listed {entry.rows}")
        ((local, _),) = made
        sha256, size = hash_file(local)
        if (sha256, size) == (entry.sha256, entry.size):
            return local, entry
        self._made += 1
        path = layout.table_part(table, partition, self.run_id, self._made)
        return local, ObjectInfo(path, sha256, size, table, rows)

    def _rows(self, table: str, manifest: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Every row of ``table`` the run of ``manifest`` wrote, from what it derived them from."""
        run_id = manifest["run_id"]
        objects = {info.path: info for info in listed(manifest)}
        if table == "captures":
            yield from self._captures(objects, run_id)
            return
        if table == "verifications":
            raise NotRebuilt("a verifications file records every fetch, failed ones too, which left no raw object")
        fetches = self._fetches(manifest) if table == "records" else {}
        for event in self._feed(objects, run_id):
            if table == "attestations":
                yield attestation_row(event)
                continue
            payload = event["payload"]
            verdict = self._verified(objects, payload["raw_path"], payload["raw_sha256"])
            if table in BUNDLE_ROWS:
                yield from BUNDLE_ROWS[table](verdict, run_id=run_id)
                continue
            fetch = fetches.get(payload["raw_sha256"])
            if fetch is None:
                raise NotRebuilt(f"the run's verifications rows do not say where {payload['raw_path']} was fetched")
            url, fetched_at, current = fetch
            if current is None:  # a split view's row says so, not whether the version became current
                raise NotRebuilt(f"the run's verifications rows do not say whether {payload['raw_path']} was current")
            yield record_row(
                verdict,
                raw_sha256=payload["raw_sha256"],
                url=url,
                fetched_at=fetched_at,
                run_id=run_id,
                accepted_as_current=current,
            )

    def _feed(self, objects: dict[str, ObjectInfo], run_id: str) -> Iterator[dict[str, Any]]:
        """The run's storage attestations, each verified under a pinned archive key."""
        feed = objects.get(layout.attestation_feed(run_id))
        if feed is None:
            return
        for index, line in enumerate(split_lines([read_entry(self.store, feed)])):
            try:
                yield read_attestation(line, self.keyring, f"{feed.path}: lines[{index}]")
            except Rejected as exc:
                raise NotRebuilt(f"the run's attestation feed does not verify: {exc}") from None

    def _verified(self, objects: dict[str, ObjectInfo], raw_path: str, raw_sha256: str) -> Verdict:
        """The verdict on a raw object the run lists, which must verify again."""
        info = objects.get(raw_path)
        if info is None or info.sha256 != raw_sha256:
            raise NotRebuilt(f"{raw_path}, which the run attested, is not listed as it attested")
        verdict = verify_bundle(read_entry(self.store, info), self.keyring)
        if not verdict.ok:
            raise NotRebuilt(f"{raw_path} does not verify: {verdict.reason} at {verdict.path}")
        return verdict

    def _fetches(self, manifest: dict[str, Any]) -> dict[str, tuple[str, Any, bool | None]]:
        """raw_sha256: (url, fetched_at, whether it became current) of each version the
        run stored, from its ``verifications`` rows."""
        fetches = {}
        for info in listed(manifest):
            if info.table != "verifications":
                continue
            for batch in table_batches(self.store, info, FETCH_COLUMNS):
                for row in batch.to_pylist():
                    if row["status"] != "verified" or row["raw_path"] is None:
                        continue
                    current = {None: True, Reason.NOT_APPEND_ONLY: False}.get(row["reason"])
                    fetches[row["raw_sha256"]] = (row["url"], row["fetched_at"], current)
        return fetches

    # --- WARC files ------------------------------------------------------------------
    def _captures(self, objects: dict[str, ObjectInfo], run_id: str) -> Iterator[dict[str, Any]]:
        for path in sorted(path for path in objects if layout.is_warc(path)):
            salvaged = self._salvage(objects[path])
            if salvaged is None:
                continue
            captures, index = salvaged
            try:
                for batch in read_batches(captures):
                    yield from ({**row, "run_id": run_id} for row in batch)
            finally:
                captures.unlink(missing_ok=True)
                index.unlink(missing_ok=True)

    def _index(self, entry: ObjectInfo, manifest: dict[str, Any]) -> Path:
        """The CDXJ index of the WARC file beside it, which must be the listed one."""
        indexed = (info for info in listed(manifest) if layout.is_warc(info.path))
        warc = next((info for info in indexed if layout.warc_index(info.path) == entry.path), None)
        if warc is None:
            raise NotRebuilt("its run lists no WARC file it indexes")
        salvaged = self._salvage(warc)
        if salvaged is None:
            raise NotRebuilt(f"{warc.path} holds no record of an exchange")
        captures, lines = salvaged
        captures.unlink()
        local = self.work / f"rebuilt-{self._made}.cdxj"
        self._made += 1
        try:
            sort_index(lines, local)
        finally:
            lines.unlink()
        sha256, size = hash_file(local)
        if (sha256, size) != (entry.sha256, entry.size):
            local.unlink()
            raise NotRebuilt(f"the index read back from {warc.path} is not the one listed (sha256 {sha256})")
        return local

    def _salvage(self, warc: ObjectInfo) -> tuple[Path, Path] | None:
        """The ``captures`` rows and CDXJ lines of a WARC file the run lists, read back
        from a local copy checked against its entry."""
        folder = Path(tempfile.mkdtemp(prefix="warc-", dir=self.work))
        copy = folder / warc.path.rsplit("/", 1)[-1]
        try:
            with open(copy, "wb") as handle:
                for chunk in self.store.read_chunks(warc.path):
                    handle.write(chunk)
            check_digest(warc, *hash_file(copy))
            salvaged = salvage(copy, str(self.work))
        finally:
            shutil.rmtree(folder)
        return None if salvaged is None else salvaged[:2]
