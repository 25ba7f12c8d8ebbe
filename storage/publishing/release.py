"""A dataset release: the committed archive as data users pick it up, as-is.

The archive's tables are append-only history (several versions of a record, rows of
forks kept as evidence, Hive folders any crashed run may have left files in). A
release is what a researcher wants instead: one row per record, its current version
(``storage.archive.history``'s rule, the writer's own), and that version's events, aliases and
citations, from committed manifests only, each version's raw bundle verified again
under the pinned keys before anything is written; in plain Parquet shards under
``data/<table>/`` that globs and ``datasets`` configs pick up, with ``release.json``
(every file's size and sha256, the runs covered, row counts; signed with the archive
key), and the metadata the users' own tools read (``storage.publishing.release_card``:
Croissant, a Frictionless data package, a dataset card).

``since`` makes an incremental release: only the records added or changed since a
previous release of the same archive, plus a ``changes`` table; applying each change
set in order to the first full release gives the next full release.

Shards are written one at a time from committed table files read one at a time, so
memory holds one record batch and the set of current versions, not the tables.
"""

import json
import logging
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pith.canonical import canon, canon_sha256
from pith.graph import cited_numbers
from pith.keyring import Keyring
from pith.reasons import Rejected
from pith.release import RELEASE_TYPE, SIGNED_MESSAGE
from pith.signing import Signer
from storage.archive import layout
from storage.archive.export_check import check_included
from storage.archive.history import RECORD_COLUMNS, History
from storage.archive.reader import CommittedArchive, table_batches
from storage.archive.stores import ObjectStore, StorageError, hash_file
from storage.archive.tables import ALIASES, EVENTS, RECORDS, TableSpec
from storage.publishing.release_check import RELEASE_FILE, verify_release

logger = logging.getLogger(__name__)

RELEASE_VERSION = "1.0"
SHARD_BYTES = 512 << 20  # a shard users can download
# every record's version as of the release (full or incremental): what the next
# incremental release is computed against; outside data/, so no config loads it
VERSIONS_INDEX = "index/versions.parquet"
DROPPED = ("run_id", "raw_path", "source_url")  # the archive's bookkeeping, not the record's

CITATIONS = pa.schema(
    [
        pa.field("pith_number", pa.string(), False, metadata={"doc": "the citing record"}),
        pa.field("cited_pith_number", pa.string(), False, metadata={"doc": "a record its paper cites"}),
        pa.field("bundle_sha256", pa.string(), False, metadata={"doc": "the citing record's version"}),
    ]
)
CHANGES = pa.schema(
    [
        pa.field("pith_number", pa.string(), False, metadata={"doc": "the record"}),
        pa.field("previous_bundle_sha256", pa.string(), True, metadata={"doc": "its version in the previous release"}),
        pa.field("bundle_sha256", pa.string(), False, metadata={"doc": "its version in this release"}),
        pa.field("kind", pa.string(), False, metadata={"doc": "added or changed"}),
    ]
)


class ReleaseError(Exception):
    """A release that cannot be made as asked (a ``since`` that is not a release of this archive)."""


def release_schema(spec: TableSpec, *extra: pa.Field) -> pa.Schema:
    """A table's columns in a release: its partition column back in, bookkeeping out."""
    partition = pa.field(spec.partition, pa.int32() if spec.partition == "year" else pa.string())
    fields = [field for field in spec.columns if field.name not in DROPPED]
    return pa.schema([fields[0], partition, *extra, *fields[1:]])


DOI = pa.field("doi", pa.string(), metadata={"doc": "the record's DOI (its alias of kind doi), if it has one"})
SCHEMAS = {
    "records": release_schema(RECORDS, DOI),
    "events": release_schema(EVENTS),
    "aliases": release_schema(ALIASES),
    "citations": CITATIONS,
    "changes": CHANGES,
}
SPECS = {"records": RECORDS, "events": EVENTS, "aliases": ALIASES}
TABLES = ("records", "events", "aliases", "citations")  # every release's; an incremental one adds "changes"
VERSIONS = pa.schema([CHANGES.field("pith_number"), CHANGES.field("bundle_sha256")])


@dataclass
class Previous:
    """What a release needs of the one before it: its id and each record's version."""

    release_id: str
    archive: str
    runs: list[str]
    versions: dict[str, str]  # pith_number -> bundle_sha256


class ShardWriter:
    """One table's rows into ``data/<table>/<table>-NNNNN.parquet`` files of at most
    ``shard_bytes``, in a local folder."""

    def __init__(self, folder: Path, table: str, shard_bytes: int):
        self.folder, self.table, self.shard_bytes = folder / "data" / table, table, shard_bytes
        self.schema = SCHEMAS[table]
        self.files: list[Path] = []
        self.rows = 0
        self._writer: pq.ParquetWriter | None = None

    def write(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        writer = self._writer
        if writer is None or self._path.stat().st_size >= self.shard_bytes:
            writer = self._roll()
        writer.write_batch(batch)
        self.rows += batch.num_rows

    def _roll(self) -> pq.ParquetWriter:
        if self._writer is not None:
            self._writer.close()
        self.folder.mkdir(parents=True, exist_ok=True)
        self._path = self.folder / f"{self.table}-{len(self.files):05d}.parquet"
        self.files.append(self._path)
        self._writer = pq.ParquetWriter(self._path, self.schema, compression="zstd")
        return self._writer

    def close(self) -> list[Path]:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if not self.files:  # an empty table is still a table: one shard with its schema
            self.folder.mkdir(parents=True, exist_ok=True)
            self._path = self.folder / f"{self.table}-00000.parquet"
            pq.write_table(self.schema.empty_table(), self._path, compression="zstd")
            self.files.append(self._path)
        return self.files


def current_versions(archive: CommittedArchive) -> dict[str, str]:
    """Each record's current version: the writer's rule over the committed records rows."""
    rows = (
        batch
        for entry in archive.table_files("records")
        for batch in table_batches(archive.store, entry, list(RECORD_COLUMNS))
    )
    return dict(History.from_tables(rows, ()).current_bundles())


def _table_rows(archive: CommittedArchive, table: str, wanted: pa.Array) -> Iterator[pa.RecordBatch]:
    """The committed rows of ``table`` whose version is ``wanted``, in release columns."""
    schema = SCHEMAS[table]
    spec = SPECS[table]
    for entry in archive.table_files(table):
        _, value = layout.partition_of(entry.path)
        for batch in table_batches(archive.store, entry, [f.name for f in schema if f.name != spec.partition]):
            batch = batch.filter(pc.is_in(batch.column("bundle_sha256"), value_set=wanted))
            if batch.num_rows:
                kind = schema.field(spec.partition).type
                typed = int(value) if value is not None and pa.types.is_integer(kind) else value
                partition = pa.array([typed] * batch.num_rows, kind)
                columns = {name: batch.column(name) for name in batch.schema.names}
                columns[spec.partition] = partition
                yield pa.RecordBatch.from_arrays(
                    [columns.get(f.name, pa.nulls(batch.num_rows, f.type)) for f in schema], schema=schema
                )


def _dois(archive: CommittedArchive, wanted: pa.Array) -> dict[str, str]:
    """The DOI alias of each wanted version (the aliases files of kind doi only)."""
    dois: dict[str, str] = {}
    for entry in archive.table_files("aliases"):
        if layout.partition_of(entry.path)[1] == "doi":
            for batch in table_batches(archive.store, entry, ["bundle_sha256", "alias_value"]):
                batch = batch.filter(pc.is_in(batch.column("bundle_sha256"), value_set=wanted))
                dois.update(zip(*(batch.column(name).to_pylist() for name in ("bundle_sha256", "alias_value"))))
    return dois


def _citations(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Citation edges from graph_snapshot event rows (the last one of each version wins)."""
    latest: dict[str, tuple[int, str, str]] = {}
    for number, bundle, index, payload in zip(
        *(batch.column(name).to_pylist() for name in ("pith_number", "bundle_sha256", "event_index", "payload_json"))
    ):
        if bundle not in latest or latest[bundle][0] < index:
            latest[bundle] = (index, number, payload)
    rows: dict[str, list[str]] = {"pith_number": [], "cited_pith_number": [], "bundle_sha256": []}
    for bundle, (_, number, payload) in latest.items():
        snapshot = json.loads(payload).get("graph_snapshot") if payload else None
        for cited in cited_numbers(snapshot):
            rows["pith_number"].append(number)
            rows["cited_pith_number"].append(cited)
            rows["bundle_sha256"].append(bundle)
    return pa.RecordBatch.from_pydict(rows, schema=CITATIONS)


def _file_entry(path: str, local: Path) -> dict:
    sha256, size = hash_file(local)
    return {"path": path, "size": size, "sha256": sha256}


def sign_release(document: dict, signer: Signer) -> dict:
    body = {k: v for k, v in document.items() if k != "signature"}
    digest = canon_sha256(body)
    return {**body, "signature": {**signer.signature(digest, SIGNED_MESSAGE), "release_sha256": digest}}


def read_previous(location: ObjectStore, archive: CommittedArchive, keyring: Keyring) -> Previous:
    """A previous release (its folder or prefix) of ``archive``, once it verifies whole
    under ``keyring`` (``storage.publishing.release_check``: a change set is built on its index);
    ReleaseError when it is no release, does not verify, or is one of another archive."""
    try:
        document = verify_release(location, keyring)
    except StorageError as exc:
        raise ReleaseError(f"--since {location.uri}: not a release ({RELEASE_FILE}: {exc})") from None
    except Rejected as exc:
        raise ReleaseError(f"--since {location.uri}: not a release that verifies ({exc})") from None
    committed = {manifest["run_id"] for manifest in archive.manifests}
    runs: list[str] = document["runs"] if isinstance(document.get("runs"), list) else [str(document.get("runs"))]
    foreign = [run for run in runs if run not in committed]
    if foreign:
        raise ReleaseError(
            f"--since {location.uri}: a release of another archive (its run {foreign[0]} is not committed here)"
        )
    if VERSIONS_INDEX not in {entry.get("path") for entry in document["files"]}:
        raise ReleaseError(f"--since {location.uri}: not a release ({RELEASE_FILE} lists no {VERSIONS_INDEX})")
    try:
        index = pq.read_table(pa.BufferReader(location.get_bytes(VERSIONS_INDEX)))
        versions = dict(zip(*(index.column(name).to_pylist() for name in ("pith_number", "bundle_sha256"))))
    except (StorageError, pa.ArrowException, KeyError) as exc:
        raise ReleaseError(f"--since {location.uri}: not a release ({VERSIONS_INDEX}: {exc})") from None
    return Previous(document["release_id"], document.get("archive", ""), runs, versions)


def write_release(
    store: ObjectStore,
    keyring: Keyring,
    signer: Signer,
    dest: ObjectStore,
    *,
    previous: Previous | None = None,
    shard_bytes: int = SHARD_BYTES,
    describe: Callable[[dict, Path], None] | None = None,
) -> dict:
    """Write a release of the committed archive in ``store`` to ``dest`` (only what
    changed since ``previous``, with a ``changes`` table, when given); returns its
    release.json. The raw bundle of every version it holds is verified again first
    (``storage.archive.export_check``: one that does not verify stops it before anything
    is written). ``describe(release, folder)`` writes the metadata files beside it
    (``storage.publishing.release_card.write_cards``) before everything is uploaded."""
    archive = CommittedArchive.read(store, keyring)
    current = current_versions(archive)
    index = pa.table({"pith_number": list(current), "bundle_sha256": list(current.values())}, schema=VERSIONS)
    changes = _changes_since(previous, current)
    if previous is not None:
        current = dict(zip(changes["pith_number"], changes["bundle_sha256"]))
    check_included(archive, current.values())  # before anything is written
    wanted = pa.array(sorted(set(current.values())), pa.string())
    created = datetime.now(timezone.utc)
    release_id = f"{created.strftime('%Y%m%dT%H%M%SZ')}-{canon_sha256(sorted(current.items()))[:8]}"
    with tempfile.TemporaryDirectory(prefix="pith-release-") as spool:
        folder = Path(spool)
        writers = _write_tables(archive, wanted, folder, shard_bytes)
        if previous is not None:
            writers["changes"] = ShardWriter(folder, "changes", shard_bytes)
            writers["changes"].write(pa.RecordBatch.from_pydict(changes, schema=CHANGES))
        files = {name: writer.close() for name, writer in writers.items()}
        (folder / VERSIONS_INDEX).parent.mkdir(parents=True)
        pq.write_table(index, folder / VERSIONS_INDEX, compression="zstd")
        release: dict[str, Any] = {  # JSON
            "release_type": RELEASE_TYPE,
            "release_version": RELEASE_VERSION,
            "release_id": release_id,
            "created_at": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "archive": store.uri,
            "since": previous.release_id if previous is not None else None,
            "runs": [manifest["run_id"] for manifest in archive.manifests],
            "tables": {name: {"rows": writer.rows, "files": len(files[name])} for name, writer in writers.items()},
            "files": [
                _file_entry(path.relative_to(folder).as_posix(), path) for name in writers for path in files[name]
            ],
        }
        if describe is not None:
            describe(release, folder)
        release = _sign_and_upload(release, folder, signer, dest)
    logger.info("release %s: %s", release_id, {name: t["rows"] for name, t in release["tables"].items()})
    return release


def _changes_since(previous: Previous | None, current: dict[str, str]) -> dict[str, list]:
    """The ``changes`` table's columns: each record added or changed since ``previous``
    (none without one), with its version there and here."""
    changes: dict[str, list] = {"pith_number": [], "previous_bundle_sha256": [], "bundle_sha256": [], "kind": []}
    if previous is None:
        return changes
    for number, bundle in current.items():
        before = previous.versions.get(number)
        if before != bundle:
            changes["pith_number"].append(number)
            changes["previous_bundle_sha256"].append(before)
            changes["bundle_sha256"].append(bundle)
            changes["kind"].append("added" if before is None else "changed")
    return changes


def _write_tables(
    archive: CommittedArchive, wanted: pa.Array, folder: Path, shard_bytes: int
) -> dict[str, ShardWriter]:
    """Every release's tables, the ``wanted`` versions' rows, into shards in ``folder``:
    one records row per version, with its DOI; the citations from its last graph
    snapshot."""
    writers = {name: ShardWriter(folder, name, shard_bytes) for name in TABLES}
    emitted: set[str] = set()
    dois = _dois(archive, wanted)
    for batch in _table_rows(archive, "records", wanted):
        bundles = batch.column("bundle_sha256").to_pylist()
        fresh = [bundle not in emitted for bundle in bundles]
        emitted.update(bundles)
        batch = batch.set_column(
            batch.schema.get_field_index("doi"), DOI, pa.array(map(dois.get, bundles), pa.string())
        )
        writers["records"].write(batch.filter(pa.array(fresh)))
    for table in ("events", "aliases"):
        for batch in _table_rows(archive, table, wanted):
            writers[table].write(batch)
            if table == "events":
                snapshots = batch.filter(pc.equal(batch.column("event_type"), "graph_snapshot"))
                writers["citations"].write(_citations(snapshots))
    return writers


def _sign_and_upload(release: dict, folder: Path, signer: Signer, dest: ObjectStore) -> dict:
    """List the versions index and the metadata files beside release.json, sign it, and
    upload every file it lists, then release.json; returns it signed."""
    for extra in [folder / VERSIONS_INDEX, *sorted(p for p in folder.iterdir() if p.is_file())]:
        path = extra.relative_to(folder).as_posix()
        release["files"].append(_file_entry(path, extra))
    release = sign_release(release, signer)
    for entry in release["files"]:
        dest.put_file(entry["path"], folder / entry["path"])
    dest.put_bytes(RELEASE_FILE, canon(release) + b"\n")
    dest.flush()
    return release
