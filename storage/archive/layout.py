"""Every path convention of the archive, in one place.

Paths are relative to the archive root (a folder, or ``s3://bucket/prefix``), always
with ``/`` separators. Readers, the audit and the mirror derive paths from here, so
the layout is changed (and versioned) in one module only.
"""

import re
import secrets
from datetime import datetime, timezone
from typing import NewType
from urllib.parse import quote, unquote

RAW = "raw/bundles"
QUARANTINE = "quarantine"
TABLES = "tables"
MANIFESTS = "manifests"
KEYS = "keys"
ATTESTATIONS = "attestations"
CHECKPOINTS = "checkpoints"
LOGS = "log"
WARC = "warc"

# the Parquet tables (``storage.archive.tables`` has their schemas), named here so that
# code writing rows need not import pyarrow
TABLE_PARTITIONS = {  # each table's Hive partition column (in its paths, not in its files)
    "records": "year",
    "events": "event_type",
    "aliases": "alias_kind",
    "verifications": "fetch_date",
    "attestations": "key_id",
    "captures": "subset",
}
TABLE_NAMES = tuple(TABLE_PARTITIONS)
SCHEMA_VERSION = "1"  # of the tables' columns, in each file and in each manifest

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"  # what pyarrow and DuckDB read back as null
TEMP_PREFIX = ".tmp-"  # partial writes; never a final object name
REPAIR_WORKER = "repair"  # the worker of a repair run's id: the only runs whose manifests supersede files
WRITER_LEASE = "writer-lease.json"  # held by the one writer of an S3 prefix that ignores create-only puts

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_RUN_ID = re.compile(r"^\d{8}T\d{6}Z-[A-Za-z0-9_.]+-[0-9a-f]{8}$")
RunId = NewType("RunId", str)  # a run's name, ``20261122T053000Z-<worker>-<8 hex>``; never an OpenRun
_WORKER = re.compile(r"^[A-Za-z0-9_.]{1,64}$")


class LayoutError(ValueError):
    """A path or name that does not fit the archive layout."""


def check_path(path: str) -> str:
    """Refuse paths that could escape the root or alias another object."""
    parts = path.split("/")
    if not path or path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in parts):
        raise LayoutError(f"not a relative archive path: {path!r}")
    return path


def _sha(digest: str) -> str:
    if not _SHA256.match(digest):
        raise LayoutError(f"not a lowercase sha256 hex digest: {digest!r}")
    return digest


def raw_bundle(raw_sha256: str) -> str:
    """Content address of a verified bundle's exact bytes."""
    return f"{RAW}/{raw_sha256[:2]}/{_sha(raw_sha256)}.json"


def quarantined(raw_sha256: str) -> str:
    return f"{QUARANTINE}/{raw_sha256[:2]}/{_sha(raw_sha256)}.json"


def quarantine_reason(raw_sha256: str) -> str:
    return f"{QUARANTINE}/{raw_sha256[:2]}/{_sha(raw_sha256)}.reason.json"


def partition_dir(column: str, value: object) -> str:
    """One Hive directory level; values are percent-encoded as pyarrow's default
    ``segment_encoding="uri"`` expects, null becomes the Hive default partition."""
    text = HIVE_NULL if value is None or value == "" else quote(str(value), safe="")
    return f"{column}={text}"


def partition_of(path: str) -> tuple[str, str | None]:
    """``(column, value)`` of a table file's partition directory: partition_dir undone."""
    parts = path.split("/")
    column, sep, text = parts[2].partition("=") if len(parts) == 4 and parts[0] == TABLES else ("", "", "")
    if not sep:
        raise LayoutError(f"not a table file path: {path!r}")
    return column, None if text == HIVE_NULL else unquote(text)


def table_part(table: str, partition: str, run_id: str, seq: int) -> str:
    return f"{TABLES}/{table}/{partition}/part-{check_run_id(run_id)}-{seq:05d}.parquet"


def warc(name: str) -> str:
    """A crawl's WARC file: ``warc/<run id>-<seq>.warc.gz``."""
    if not name.endswith(".warc.gz") or not _RUN_ID.match(name[:-14]):
        raise LayoutError(f"not a WARC file name (<run id>-<seq>.warc.gz): {name!r}")
    return f"{WARC}/{name}"


def is_warc(path: str) -> bool:
    return path.startswith(f"{WARC}/") and path.endswith(".warc.gz")


def warc_index(warc_path: str) -> str:
    """The CDXJ index stored next to a WARC file."""
    return warc_path[: -len(".warc.gz")] + ".cdxj"


def is_warc_index(path: str) -> bool:
    return path.startswith(f"{WARC}/") and path.endswith(".cdxj")


def manifest(run_id: str) -> str:
    return f"{MANIFESTS}/{check_run_id(run_id)}.json"


def is_manifest(path: str) -> bool:
    return manifest_run_id(path) is not None


def manifest_run_id(path: str) -> RunId | None:
    """The run id a manifest path names, or None for any other path."""
    name = path[len(MANIFESTS) + 1 :] if path.startswith(f"{MANIFESTS}/") else ""
    return RunId(name[:-5]) if name.endswith(".json") and _RUN_ID.match(name[:-5]) else None


def damaged_copy(run_id: str, path: str) -> str:
    """Where a repair run moved the damaged copy of ``path`` before writing it again."""
    return f"{QUARANTINE}/damaged/{check_run_id(run_id)}/{check_path(path)}"


def repair_feed(run_id: str) -> str:
    """A repair run's signed repair events, one JSON event per line, beside the
    attestation feeds (and never one of them: no key's log holds a repair)."""
    return f"{ATTESTATIONS}/{check_run_id(run_id)}.repairs.jsonl"


def is_repair_feed(path: str) -> bool:
    name = path[len(ATTESTATIONS) + 1 :] if path.startswith(f"{ATTESTATIONS}/") else ""
    return name.endswith(".repairs.jsonl") and bool(_RUN_ID.match(name[: -len(".repairs.jsonl")]))


def key_document(key_id: str) -> str:
    return f"{KEYS}/{quote(key_id, safe='')}.json"


def attestation_feed(run_id: str) -> str:
    """A run's storage attestations, one JSON event per line."""
    return f"{ATTESTATIONS}/{check_run_id(run_id)}.jsonl"


def is_attestation_feed(path: str) -> bool:
    name = path[len(ATTESTATIONS) + 1 :] if path.startswith(f"{ATTESTATIONS}/") else ""
    return name.endswith(".jsonl") and bool(_RUN_ID.match(name[:-6]))


def log_root(key_id: str) -> str:
    """Where a key's log lies as C2SP tlog-tiles: a tlog client reads ``checkpoint`` and
    ``tile/...`` under it (docs/TRANSPARENCY.md)."""
    return f"{LOGS}/{quote(key_id, safe='')}"


def published_checkpoint(key_id: str) -> str:
    """The newest checkpoint of a key's log, cosignatures included: the one object of
    the archive that is rewritten, and that no manifest lists."""
    return f"{log_root(key_id)}/checkpoint"


def checkpoint_at(key_id: str, size: int) -> str:
    """The signed checkpoint of a key's log at ``size`` leaves, as its commit wrote it."""
    return f"{log_root(key_id)}/{CHECKPOINTS}/{size}"


def log_tile(key_id: str, tile: str) -> str:
    """A tile or entry bundle (``pith.tiles``) of a key's log."""
    return f"{log_root(key_id)}/{tile}"


def checkpoint_of(path: str) -> tuple[str, int] | None:
    """``(key_id, size)`` of a checkpoint path, or None for any other path."""
    parts = path.split("/")
    if len(parts) != 4 or parts[0] != LOGS or parts[2] != CHECKPOINTS or not parts[3].isdigit():
        return None
    return unquote(parts[1]), int(parts[3])


def is_log_tile(key_id: str, path: str) -> bool:
    return path.startswith(f"{log_root(key_id)}/tile/")


def new_run_id(worker: str = "w0", now: datetime | None = None) -> RunId:
    """``20261122T053000Z-<worker>-<8 hex>``: sorts by start time, unique per worker."""
    if not _WORKER.match(worker):
        raise LayoutError(f"worker names are 1-64 of [A-Za-z0-9_.]: {worker!r}")
    stamp = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return RunId(f"{stamp}-{worker}-{secrets.token_hex(4)}")


def run_worker(run_id: str) -> str:
    """The worker a run id names (``new_run_id``'s middle part)."""
    return check_run_id(run_id).split("-", 1)[1].rsplit("-", 1)[0]


def check_run_id(run_id: str) -> RunId:
    if not _RUN_ID.match(run_id):
        raise LayoutError(f"not a run id (YYYYMMDDTHHMMSSZ-worker-8hex): {run_id!r}")
    return RunId(run_id)
