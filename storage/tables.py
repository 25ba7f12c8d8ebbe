"""The Parquet tables: schemas (versioned, documented column by column), row builders
from verified bundles and verdicts, and a writer that rolls files at size bounds.

Each table is Hive-partitioned by one column, which lives in the directory names
(``tables/records/year=2019/``) and not inside the files, so pyarrow.dataset and
DuckDB both read the folders as they are. Every column carries its meaning in the
Parquet field metadata (``doc``), and every file the schema version in its key-value
metadata: the files describe themselves. docs/ARCHIVE.md lists the same columns.
"""

import logging
import os
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pith.canonical import canon
from . import layout
from .stores import MiB

logger = logging.getLogger(__name__)

SCHEMA_VERSION = "1"
META_SCHEMA_VERSION = "pith_archiver.schema_version"
META_TABLE = "pith_archiver.table"
META_PARTITIONING = "pith_archiver.partitioning"

TIMESTAMP = pa.timestamp("us", tz="UTC")
STRINGS = pa.list_(pa.string())


def _col(name: str, kind: pa.DataType, doc: str, nullable: bool = True) -> pa.Field:
    return pa.field(name, kind, nullable, metadata={"doc": doc})


@dataclass(frozen=True)
class TableSpec:
    name: str
    partition: str                      # the Hive partition column: in paths, not in files
    partition_doc: str
    columns: tuple[pa.Field, ...]

    @property
    def schema(self) -> pa.Schema:
        return pa.schema(self.columns, metadata={
            META_SCHEMA_VERSION: SCHEMA_VERSION, META_TABLE: self.name,
            META_PARTITIONING: f"hive:{self.partition}"})


_RUN = _col("run_id", pa.string(),
            "the archiver run that wrote the row (its manifest is manifests/<run_id>.json)", False)
_BUNDLE = _col("bundle_sha256", pa.string(), "the bundle version: bundle_signature.bundle_sha256", False)
_PITH = _col("pith_number", pa.string(), "full Pith number, pith:YYYY:<26-char suffix>", False)

# how a verified version's merge stands (pith.verify.Verdict)
MERGE_COLUMNS = (
    _col("merge_confirmed", pa.bool_(), "false when some event types were merged by a rule only inferred "
                                        "(the registry signed the state; see merge_inferred_match); null or "
                                        "absent in older files: true"),
    _col("merge_inferred_types", STRINGS, "the event types merged by an inferred rule, in first-seen order"),
    _col("merge_inferred_match", pa.bool_(), "when merge_confirmed is false: true when the inferred rule "
                                             "recomputes exactly the signed state"),
)

RECORDS = TableSpec("records", "year", "year of canonical_record.metadata.submitted_at", (
    _PITH,
    _col("short_pith_number", pa.string(), "pith:<first 8 chars of the suffix>"),
    _col("source_kind", pa.string(), "canonical_record.source.kind (arxiv)"),
    _col("source_id", pa.string(), "canonical_record.source.id, e.g. 1904.12043"),
    _col("source_version", pa.int64(), "canonical_record.source.version (the arXiv vN)"),
    _col("canonical_sha256", pa.string(), "sha256 of the canonical record (signed by the receipt)", False),
    _BUNDLE,
    _col("state_sha256", pa.string(), "state.state_sha256 of the merged state", False),
    _col("raw_sha256", pa.string(), "sha256 of the exact bytes fetched; the raw object's address", False),
    _col("title", pa.string(), "paper.title of the last graph_snapshot event"),
    _col("authors", STRINGS, "authors_text split on ', ' (see authors_text when a name holds a comma)"),
    _col("authors_text", pa.string(), "paper.authors_text of the last graph_snapshot event, as given"),
    _col("primary_category", pa.string(), "canonical_record.metadata.primary_cat"),
    _col("cross_categories", STRINGS, "canonical_record.metadata.cross_cats_sorted"),
    _col("license", pa.string(), "canonical_record.metadata.license"),
    _col("title_canon_sha256", pa.string(), "canonical_record.metadata.title_canon_sha256 (signed)"),
    _col("abstract_canon_sha256", pa.string(), "canonical_record.metadata.abstract_canon_sha256 (signed)"),
    _col("submitted_at", TIMESTAMP, "canonical_record.metadata.submitted_at"),
    _col("built_at", TIMESTAMP, "when the registry built this bundle version"),
    _col("event_count", pa.int32(), "number of events in the bundle", False),
    _col("fetched_at", TIMESTAMP, "when the archiver fetched the bytes", False),
    _col("source_url", pa.string(), "the URL the bytes were fetched from"),
    _col("raw_path", pa.string(), "archive path of the raw bytes (raw/bundles/<aa>/<raw_sha256>.json)", False),
    _col("accepted_as_current", pa.bool_(), "true when this version became the record's current version when "
                                            "archived; false for a fork or rollback kept as evidence "
                                            "(not_append_only); null or absent in older files: true"),
    *MERGE_COLUMNS,
    _RUN,
))

EVENTS = TableSpec("events", "event_type", "the event's event_type (record_created, graph_snapshot, ...)", (
    _col("event_id", pa.string(), "sha256:<content_sha256>", False),
    _PITH,
    _BUNDLE,
    _col("event_index", pa.int32(), "position of the event in the bundle's events list", False),
    _col("target", pa.string(), "the event's target (record, graph, ...)"),
    _col("created_at", TIMESTAMP, "the event's created_at"),
    _col("signed_at", TIMESTAMP, "signature.signed_at"),
    _col("signer_id", pa.string(), "signer.signer_id (pith.science for the registry)"),
    _col("signer_type", pa.string(), "signer.signer_type"),
    _col("key_id", pa.string(), "signature.key_id of the pinned key that verified the event"),
    _col("prev_event", pa.string(), "prev_event: the event_id this one chains to, if any"),
    _col("supersedes", STRINGS, "event ids this event supersedes"),
    _col("payload_json", pa.string(), "the payload as canonical JSON text (query with json functions)", False),
    _RUN,
))

ALIASES = TableSpec("aliases", "alias_kind",
                    "source_aliases[].alias_kind (arxiv, arxiv_version, doi, pith_short_8, ...)", (
    _PITH,
    _col("alias_value", pa.string(), "the alias (1904.12043, 10.48550/arxiv.1904.12043, ...)"),
    _col("created_at", TIMESTAMP, "when the registry recorded the alias"),
    _BUNDLE,
    _RUN,
))

VERIFICATIONS = TableSpec("verifications", "fetch_date", "UTC date of fetched_at (YYYY-MM-DD)", (
    _col("url", pa.string(), "the URL fetched", False),
    _col("pith_number", pa.string(), "the bundle's pith_number when it could be read"),
    _col("status", pa.string(), "verified, rejected (bytes that failed a check) or failed (no usable "
                                "bytes: fetch errors, and state.json disagreeing with its bundle)", False),
    _col("reason", pa.string(), "reason code from pith.reasons when rejected or failed; not_append_only "
                                "when a verified version is a fork or rollback of the record's history; "
                                "equivocation when another resolver served a forked copy of it (a split view)"),
    _col("detail_path", pa.string(), "path in the document of what broke, e.g. events[1].content_sha256"),
    _col("detail", pa.string(), "what broke, for people"),
    _col("raw_sha256", pa.string(), "sha256 of the exact bytes fetched (null when none were)"),
    _col("size", pa.int64(), "number of bytes fetched (null when none were)"),
    _col("raw_path", pa.string(), "where the bytes are archived: raw/... when verified, quarantine/... "
                                  "when rejected, null when this bundle version was archived before"),
    _col("bundle_sha256", pa.string(), "the bundle version, when verified"),
    _col("duplicate", pa.bool_(), "true when this bundle version was already archived", False),
    _col("other_url", pa.string(), "equivocation: the URL of the other resolver's copy of the record, whose "
                                   "events fork from this one's (both copies are archived); null otherwise"),
    _col("other_bundle_sha256", pa.string(), "equivocation: the bundle version of that other copy"),
    _col("fetched_at", TIMESTAMP, "when the bytes were fetched", False),
    *MERGE_COLUMNS,
    _RUN,
))

ATTESTATIONS = TableSpec("attestations", "key_id", "signature.key_id: the archiver key whose chain it is in", (
    _col("event_id", pa.string(), "sha256:<content_sha256> of the attestation event", False),
    _PITH,
    _BUNDLE,
    _col("canonical_sha256", pa.string(), "sha256 of the stored version's canonical record", False),
    _col("raw_path", pa.string(), "archive path of the stored bytes", False),
    _col("raw_sha256", pa.string(), "sha256 of the stored bytes", False),
    _col("size", pa.int64(), "number of stored bytes", False),
    _col("storage_uri", pa.string(), "where the bytes are stored: the archive URI and raw_path", False),
    _col("stored_at", TIMESTAMP, "when the store acknowledged the write", False),
    _col("signed_at", TIMESTAMP, "signature.signed_at of the attestation"),
    _col("prev_event", pa.string(), "event_id of the key's previous attestation; null for its first"),
    _RUN,
))

TABLES = {spec.name: spec for spec in (RECORDS, EVENTS, ALIASES, VERIFICATIONS, ATTESTATIONS)}


# --- row builders --------------------------------------------------------------

def _text(value) -> str | None:
    """Strings as they are; other JSON values as canonical JSON text, never dropped."""
    if value is None or isinstance(value, str):
        return value
    return canon(value).decode("utf-8")


def _integer(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and -2**63 <= value < 2**63 else None


def _texts(value) -> list[str] | None:
    return [_text(v) for v in value] if isinstance(value, list) else None


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def timestamp(value) -> datetime | None:
    """An ISO 8601 UTC time from a bundle, or None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.astimezone(timezone.utc) if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("fetch times must be timezone-aware")
    return moment.astimezone(timezone.utc)


def _paper(bundle: dict) -> dict:
    """The paper block of the last graph_snapshot: the registry's latest metadata."""
    for event in reversed(bundle["events"]):
        if event.get("event_type") == "graph_snapshot":
            return _dict(_dict(_dict(event.get("payload")).get("graph_snapshot")).get("paper"))
    return {}


def record_row(verdict, *, raw_sha256: str, url: str | None, fetched_at: datetime, run_id: str,
               accepted_as_current: bool = True) -> dict:
    """The ``records`` row of a verified bundle version."""
    bundle = verdict.bundle
    record = bundle["canonical_record"]
    metadata, source = record["metadata"], _dict(record.get("source"))
    paper = _paper(bundle)
    authors_text = _text(paper.get("authors_text"))
    return {
        "year": int(metadata["submitted_at"][:4]),
        "pith_number": verdict.pith_number, "short_pith_number": _text(bundle.get("short_pith_number")),
        "source_kind": _text(source.get("kind")), "source_id": _text(source.get("id")),
        "source_version": _integer(source.get("version")),
        "canonical_sha256": verdict.canonical_sha256, "bundle_sha256": verdict.bundle_sha256,
        "state_sha256": verdict.state_sha256, "raw_sha256": raw_sha256,
        "title": _text(paper.get("title")),
        "authors": authors_text.split(", ") if authors_text else [],
        "authors_text": authors_text,
        "primary_category": _text(metadata.get("primary_cat")),
        "cross_categories": _texts(metadata.get("cross_cats_sorted")),
        "license": _text(metadata.get("license")),
        "title_canon_sha256": _text(metadata.get("title_canon_sha256")),
        "abstract_canon_sha256": _text(metadata.get("abstract_canon_sha256")),
        "submitted_at": timestamp(metadata["submitted_at"]), "built_at": timestamp(bundle.get("built_at")),
        "event_count": len(bundle["events"]), "fetched_at": _utc(fetched_at), "source_url": url,
        "raw_path": layout.raw_bundle(raw_sha256), "accepted_as_current": accepted_as_current, "run_id": run_id,
        **merge_facts(verdict),
    }


def merge_facts(verdict) -> dict:
    """The merge columns of a verified version (all null for anything else)."""
    if not verdict.ok:
        return {}
    return {"merge_confirmed": verdict.merge_confirmed,
            "merge_inferred_types": list(verdict.inferred_types) or None,
            "merge_inferred_match": verdict.merge_inferred_match}


def event_rows(verdict, *, run_id: str) -> list[dict]:
    """One ``events`` row per event of a verified bundle version."""
    rows = []
    for index, event in enumerate(verdict.bundle["events"]):
        signer, signature = _dict(event.get("signer")), _dict(event.get("signature"))
        rows.append({
            "event_type": event["event_type"], "event_id": event["event_id"],
            "pith_number": verdict.pith_number, "bundle_sha256": verdict.bundle_sha256,
            "event_index": index, "target": _text(event.get("target")),
            "created_at": timestamp(event.get("created_at")), "signed_at": timestamp(signature.get("signed_at")),
            "signer_id": _text(signer.get("signer_id")), "signer_type": _text(signer.get("signer_type")),
            "key_id": _text(signature.get("key_id")), "prev_event": _text(event.get("prev_event")),
            "supersedes": _texts(event.get("supersedes")),
            "payload_json": canon(event["payload"], verdict.exact).decode("utf-8"), "run_id": run_id,
        })
    return rows


def alias_rows(verdict, *, run_id: str) -> list[dict]:
    """One ``aliases`` row per source alias of a verified bundle version."""
    return [{"alias_kind": _text(alias.get("alias_kind")), "pith_number": verdict.pith_number,
             "alias_value": _text(alias.get("alias_value")), "created_at": timestamp(alias.get("created_at")),
             "bundle_sha256": verdict.bundle_sha256, "run_id": run_id}
            for alias in verdict.bundle["source_aliases"]]


def attestation_row(event: dict) -> dict:
    """The ``attestations`` row of one storage attestation this archive signed."""
    payload = event["payload"]
    return {"key_id": event["signature"]["key_id"], "event_id": event["event_id"],
            "pith_number": event["subject_pith_number"], "bundle_sha256": payload["bundle_sha256"],
            "canonical_sha256": payload["canonical_sha256"], "raw_path": payload["raw_path"],
            "raw_sha256": payload["raw_sha256"], "size": payload["size"], "storage_uri": payload["storage_uri"],
            "stored_at": timestamp(payload["stored_at"]), "signed_at": timestamp(event["signature"]["signed_at"]),
            "prev_event": event["prev_event"], "run_id": payload["run_id"]}


def verification_row(verdict, *, url: str, raw_sha256: str | None, size: int | None, raw_path: str | None,
                     fetched_at: datetime, run_id: str, duplicate: bool = False, equivocation=None) -> dict:
    """The ``verifications`` row of any fetch: verified, rejected or failed;
    ``equivocation`` (a pith.split_view.Equivocation) names the copy it forks from."""
    fetched = _utc(fetched_at)
    return {"fetch_date": fetched.date().isoformat(), "url": url, "pith_number": verdict.pith_number,
            "status": verdict.status, "reason": verdict.reason or None, "detail_path": verdict.path or None,
            "detail": verdict.detail or None, "raw_sha256": raw_sha256, "size": size, "raw_path": raw_path,
            "bundle_sha256": verdict.bundle_sha256, "duplicate": duplicate,
            "other_url": equivocation and equivocation.other_url,
            "other_bundle_sha256": equivocation and equivocation.other_bundle_sha256,
            "fetched_at": fetched, "run_id": run_id, **merge_facts(verdict)}


# --- the rolling writer --------------------------------------------------------

@dataclass(frozen=True)
class RollPolicy:
    """When a partition's buffered rows become a row group, and when its file is done.
    A file is finished after the row group that reaches ``max_rows`` or ``max_bytes``
    (compressed, on disk), and when the run ends: never one file per bundle."""
    max_rows: int = 50_000
    max_bytes: int = 64 * MiB
    row_group_rows: int = 10_000
    row_group_bytes: int = 8 * MiB   # in memory, estimated from the buffered values
    buffer_bytes: int = 16 * MiB     # all partitions of all tables sharing a RowBudget


class RowBudget:
    """The buffered rows of every partition of a run's tables, held to one limit. A
    crawl touches dozens of partitions (a year of submission each, an event type, a
    fetch date) and most never fill a row group: without a shared limit each buffers
    up to ``row_group_bytes`` until the run ends, and memory grows with the crawl.
    Over the limit, the largest buffer is written out as a (smaller) row group."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self._writers: list["TableWriter"] = []

    def join(self, writer: "TableWriter") -> None:
        self._writers.append(writer)

    def leave(self, writer: "TableWriter") -> None:
        """A closed writer holds no rows (a run's checkpoints close theirs as they go)."""
        if writer in self._writers:
            self._writers.remove(writer)

    def charge(self, size: int) -> None:
        self.used += size
        while self.used > self.limit:
            writer, part = max(((w, part) for w in self._writers for part in w._parts.values()),
                               key=lambda pair: pair[1].buffer_bytes)
            if not part.buffer:
                break
            writer._write_group(part)


_OBJECT_BYTES = 56  # a small Python object and the dict slot that holds it


def _approx_size(row: dict) -> int:
    """What a buffered row costs in memory, roughly: its text plus a Python object per value."""
    size = 0
    for value in row.values():
        if isinstance(value, str):
            size += _OBJECT_BYTES + len(value)
        elif isinstance(value, list):
            size += _OBJECT_BYTES + sum(_OBJECT_BYTES + len(v) for v in value if isinstance(v, str))
        else:
            size += _OBJECT_BYTES
    return size


@dataclass
class _Part:
    """One partition's open spool file and its not yet written rows."""
    spool: Path
    handle: object
    writer: pq.ParquetWriter
    rows_in_file: int = 0
    buffer: list = field(default_factory=list)
    buffer_bytes: int = 0


class TableWriter:
    """Rows of one table to Parquet files: one open spool file per partition, at most
    one row group of rows in memory per partition. A finished file is handed to
    ``emit(path, spool_file, rows)``, which stores it and then owns (deletes) it."""

    def __init__(self, spec: TableSpec, run_id: str, emit, policy: RollPolicy = RollPolicy(),
                 spool_dir=None, budget: RowBudget | None = None):
        """``budget`` is shared with the run's other tables (default: this one's own)."""
        self.spec = spec
        self.run_id = layout.check_run_id(run_id)
        self.policy = policy
        self._budget = budget or RowBudget(policy.buffer_bytes)
        self._budget.join(self)
        self._schema = spec.schema
        self._emit = emit
        self._spool_dir = Path(spool_dir or tempfile.gettempdir())
        self._parts: dict[str, _Part] = {}
        self._seq = 0

    def add(self, row: dict) -> None:
        row = dict(row)
        partition = layout.partition_dir(self.spec.partition, row.pop(self.spec.partition))
        part = self._parts.get(partition) or self._open(partition)
        size = _approx_size(row)
        part.buffer.append(row)
        part.buffer_bytes += size
        wanted = min(self.policy.row_group_rows, self.policy.max_rows - part.rows_in_file)
        if len(part.buffer) >= wanted or part.buffer_bytes >= self.policy.row_group_bytes:
            self._write_group(part)
            if part.rows_in_file >= self.policy.max_rows or part.handle.tell() >= self.policy.max_bytes:
                self._finish(partition)
        self._budget.charge(size)

    def close(self) -> None:
        """Write what is buffered and hand over every open file."""
        for partition in list(self._parts):
            self._finish(partition)
        self._budget.leave(self)

    def discard(self) -> None:
        """Drop open files unstored (an aborted run)."""
        for part in self._parts.values():
            self._budget.used -= part.buffer_bytes
            part.writer.close()
            part.handle.close()
            part.spool.unlink(missing_ok=True)
        self._parts.clear()
        self._budget.leave(self)

    def _open(self, partition: str) -> _Part:
        fd, name = tempfile.mkstemp(prefix=f"{self.spec.name}-", suffix=".parquet", dir=self._spool_dir)
        handle = os.fdopen(fd, "wb")
        writer = pq.ParquetWriter(handle, self._schema, compression="zstd")
        part = self._parts[partition] = _Part(Path(name), handle, writer)
        return part

    def _write_group(self, part: _Part) -> None:
        if part.buffer:
            part.writer.write_table(pa.Table.from_pylist(part.buffer, schema=self._schema),
                                    row_group_size=len(part.buffer))
            part.rows_in_file += len(part.buffer)
            self._budget.used -= part.buffer_bytes
            part.buffer, part.buffer_bytes = [], 0

    def _finish(self, partition: str) -> None:
        part = self._parts.pop(partition)
        self._write_group(part)
        part.writer.close()
        part.handle.close()
        path = layout.table_part(self.spec.name, partition, self.run_id, self._seq)
        self._seq += 1
        logger.debug("%s: %d rows, %d bytes", path, part.rows_in_file, part.spool.stat().st_size)
        self._emit(path, part.spool, part.rows_in_file)
