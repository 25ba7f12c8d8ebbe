"""The Parquet tables' schemas, versioned and documented column by column (rows are
built by ``storage.archive.rows``, written by ``storage.writing.table_writer``).

Each table is Hive-partitioned by one column, which lives in the directory names
(``tables/records/year=2019/``) and not inside the files, so pyarrow.dataset and
DuckDB both read the folders as they are. Every column carries its meaning in the
Parquet field metadata (``doc``), and every file the schema version in its key-value
metadata: the files describe themselves. docs/ARCHIVE.md lists the same columns.
"""

from dataclasses import dataclass

import pyarrow as pa

from storage.archive.layout import SCHEMA_VERSION, TABLE_NAMES, TABLE_PARTITIONS

META_SCHEMA_VERSION = "pith_archiver.schema_version"
META_TABLE = "pith_archiver.table"
META_PARTITIONING = "pith_archiver.partitioning"

TIMESTAMP = pa.timestamp("us", tz="UTC")
STRINGS = pa.list_(pa.string())


def _col(name: str, kind: pa.DataType, doc: str, nullable: bool = True) -> pa.Field:
    return pa.field(name, kind, nullable, metadata={"doc": doc})


def field_doc(field: pa.Field) -> str:
    """What a column means, as ``_col`` documented it (empty when it was not)."""
    doc: bytes = (field.metadata or {}).get(b"doc", b"")
    return doc.decode("utf-8")


@dataclass(frozen=True)
class TableSpec:
    name: str
    partition: str  # the Hive partition column: in paths, not in files
    partition_doc: str
    columns: tuple[pa.Field, ...]

    @property
    def schema(self) -> pa.Schema:
        return pa.schema(
            self.columns,
            metadata={
                META_SCHEMA_VERSION: SCHEMA_VERSION,
                META_TABLE: self.name,
                META_PARTITIONING: f"hive:{self.partition}",
            },
        )


_RUN = _col(
    "run_id", pa.string(), "the archiver run that wrote the row (its manifest is manifests/<run_id>.json)", False
)
_BUNDLE = _col("bundle_sha256", pa.string(), "the bundle version: bundle_signature.bundle_sha256", False)
_PITH = _col("pith_number", pa.string(), "full Pith number, pith:YYYY:<26-char suffix>", False)

# how a verified version's merge stands (pith.verify.Verdict)
MERGE_COLUMNS = (
    _col(
        "merge_confirmed",
        pa.bool_(),
        "false when some event types were merged by a rule only inferred "
        "(the registry signed the state; see merge_inferred_match); null or "
        "absent in older files: true",
    ),
    _col("merge_inferred_types", STRINGS, "the event types merged by an inferred rule, in first-seen order"),
    _col(
        "merge_inferred_match",
        pa.bool_(),
        "when merge_confirmed is false: true when the inferred rule recomputes exactly the signed state",
    ),
)

RECORDS = TableSpec(
    "records",
    TABLE_PARTITIONS["records"],
    "year of canonical_record.metadata.submitted_at",
    (
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
        _col(
            "accepted_as_current",
            pa.bool_(),
            "true when this version became the record's current version when "
            "archived; false for a fork or rollback kept as evidence "
            "(not_append_only); null or absent in older files: true",
        ),
        *MERGE_COLUMNS,
        _RUN,
    ),
)

EVENTS = TableSpec(
    "events",
    TABLE_PARTITIONS["events"],
    "the event's event_type (record_created, graph_snapshot, ...)",
    (
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
    ),
)

ALIASES = TableSpec(
    "aliases",
    TABLE_PARTITIONS["aliases"],
    "source_aliases[].alias_kind (arxiv, arxiv_version, doi, pith_short_8, ...)",
    (
        _PITH,
        _col("alias_value", pa.string(), "the alias (1904.12043, 10.48550/arxiv.1904.12043, ...)"),
        _col("created_at", TIMESTAMP, "when the registry recorded the alias"),
        _BUNDLE,
        _RUN,
    ),
)

VERIFICATIONS = TableSpec(
    "verifications",
    TABLE_PARTITIONS["verifications"],
    "UTC date of fetched_at (YYYY-MM-DD)",
    (
        _col("url", pa.string(), "the URL fetched", False),
        _col("pith_number", pa.string(), "the bundle's pith_number when it could be read"),
        _col(
            "status",
            pa.string(),
            "verified, rejected (bytes that failed a check) or failed (no usable "
            "bytes: fetch errors, and state.json disagreeing with its bundle)",
            False,
        ),
        _col(
            "reason",
            pa.string(),
            "reason code from pith.reasons when rejected or failed; not_append_only "
            "when a verified version is a fork or rollback of the record's history; "
            "equivocation when another resolver served a forked copy of it (a split view)",
        ),
        _col("detail_path", pa.string(), "path in the document of what broke, e.g. events[1].content_sha256"),
        _col("detail", pa.string(), "what broke, for people"),
        _col("raw_sha256", pa.string(), "sha256 of the exact bytes fetched (null when none were)"),
        _col("size", pa.int64(), "number of bytes fetched (null when none were)"),
        _col(
            "raw_path",
            pa.string(),
            "where the bytes are archived: raw/... when verified, quarantine/... "
            "when rejected, null when this bundle version was archived before",
        ),
        _col("bundle_sha256", pa.string(), "the bundle version, when verified"),
        _col("duplicate", pa.bool_(), "true when this bundle version was already archived", False),
        _col(
            "other_url",
            pa.string(),
            "equivocation: the URL of the other resolver's copy of the record, whose "
            "events fork from this one's (both copies are archived); null otherwise",
        ),
        _col("other_bundle_sha256", pa.string(), "equivocation: the bundle version of that other copy"),
        _col("fetched_at", TIMESTAMP, "when the bytes were fetched", False),
        *MERGE_COLUMNS,
        _RUN,
    ),
)

ATTESTATIONS = TableSpec(
    "attestations",
    TABLE_PARTITIONS["attestations"],
    "signature.key_id: the archiver key whose chain it is in",
    (
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
    ),
)

CAPTURES = TableSpec(
    "captures",
    TABLE_PARTITIONS["captures"],
    "Common Crawl's subset: warc (2xx and 304) or crawldiagnostics (redirects, errors)",
    (
        _col("url", pa.string(), "the URL fetched (WARC-Target-URI)", False),
        _col("fetch_time", TIMESTAMP, "when the response was received (WARC-Date)", False),
        _col("fetch_status", pa.int32(), "the HTTP status as received", False),
        _col(
            "content_digest", pa.string(), "WARC-Payload-Digest of the body as received (sha1:<base32>); null for a 304"
        ),
        _col("content_mime_type", pa.string(), "the Content-Type header's media type, as sent"),
        _col("warc_filename", pa.string(), "the WARC file's name (warc/<warc_filename> in the archive)", False),
        _col("warc_record_offset", pa.int64(), "byte offset of the (gzipped) record in the file", False),
        _col("warc_record_length", pa.int64(), "byte length of the gzipped record", False),
        _col("warc_record_id", pa.string(), "WARC-Record-ID of the response or revisit record", False),
        _col("warc_record_type", pa.string(), "response, or revisit (a 304, or a payload archived before)", False),
        _col("pith_number", pa.string(), "the bundle's pith_number, when a bundle was judged"),
        _col("bundle_sha256", pa.string(), "the bundle version, when verified"),
        _col("status", pa.string(), "the verdict on a bundle: verified or rejected; null for any other response"),
        _RUN,
    ),
)

TABLES = {spec.name: spec for spec in (RECORDS, EVENTS, ALIASES, VERIFICATIONS, ATTESTATIONS, CAPTURES)}
if tuple(TABLES) != TABLE_NAMES:
    raise ImportError(f"the tables {tuple(TABLES)} are not layout.TABLE_NAMES {TABLE_NAMES}")
