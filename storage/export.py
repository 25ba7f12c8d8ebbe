"""Offline copies of an archive's committed contents, for people who will never run
the archiver: a BagIt bag (``export_bag``) or a plain Parquet dataset in a folder or
S3 prefix (``export_dataset``), each with a dataset README (schema, counts,
provenance).

Only objects that committed manifests list are exported, so a crashed run's leftovers
never are, and quarantined bytes stay behind (the ``verifications`` table records
every rejection). Every object is streamed, never held whole, and checked against
its manifest entry on the way: a copy carries only bytes the archive committed.
Every committed raw bundle is verified again (registry keys, with their roles, and the
size rule) before the export is published: an archive holding one that does not
verify (say, re-signed with a stolen archiver key) is not exported at all.
"""

import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import bagit

from pith.keyring import Keyring
from pith.verify import verify_bundle
from pith.shipped import version
from . import layout
from .reader import CommittedArchive, check_digest, read_entry
from .manifest import verify_manifest
from .stores import ObjectExists, ObjectInfo, ObjectStore
from .tables import SCHEMA_VERSION, TABLES

logger = logging.getLogger(__name__)

Progress = Callable[[int, int], None]  # on_object(done, total)

README = "README.md"
BAG_CHECKSUMS = ("sha256", "sha512")
BAG_PREFIXES = (
    f"{layout.TABLES}/",
    f"{layout.RAW}/",
    f"{layout.ATTESTATIONS}/",
    f"{layout.LOGS}/",
    f"{layout.CHECKPOINTS}/",
    f"{layout.KEYS}/",
)
FOLDERS = {  # what each exported folder holds, for the README
    layout.TABLES: "Parquet tables, Hive-partitioned (schema below)",
    layout.RAW: "the exact bytes of every verified bundle version, named by their sha256",
    layout.ATTESTATIONS: "signed storage attestations (JSON lines)",
    layout.LOGS: "each archiver key's Merkle log: the 32-byte content hashes of its attestations, per run",
    layout.CHECKPOINTS: "signed checkpoints (size and root hash) of each key's log, named by tree size",
    layout.KEYS: "public key documents of the archiver keys that signed the manifests",
    layout.MANIFESTS: "the signed run manifests: each lists its run's objects with sha256 and size",
}


class ExportError(Exception):
    """An export that cannot be made as asked."""


class BundleRejected(ExportError):
    """A committed raw bundle does not verify: the archive needs an audit, not an export."""


@dataclass(frozen=True)
class ExportSummary:
    destination: str
    objects: int  # files written, the README included
    bytes: int
    bundle_versions: int  # rows of the records table


def export_bag(
    store: ObjectStore,
    keyring: Keyring,
    out: str | Path,
    *,
    organization: str | None = None,
    on_object: Progress | None = None,
) -> ExportSummary:
    """Write a BagIt bag at ``out`` (a new path): data/ holds the committed tables, raw
    bundles, attestations, keys and manifests and README.md, with sha256 and sha512
    manifests. The bag is built next to ``out`` and renamed into place when whole.
    ``on_object(done, total)`` is called as objects are copied."""
    out = Path(out).absolute()
    if out.exists():
        raise ExportError(f"{out} already exists: give a new path for the bag")
    archive = CommittedArchive.read(store, keyring)
    entries = [entry for prefix in BAG_PREFIXES for entry in archive.under(prefix)]
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        for done, entry in enumerate(entries, 1):
            _stream_to_file(store, entry, staging / entry.path)
            if entry.path.startswith(f"{layout.RAW}/"):
                _check_bundle(entry, (staging / entry.path).read_bytes(), keyring)
            if on_object is not None:
                on_object(done, len(entries))
        manifest_bytes = sum(_copy_manifest(archive, layout.manifest(m["run_id"]), staging) for m in archive.manifests)
        readme = dataset_readme(archive, entries, manifest_bytes).encode("utf-8")
        (staging / README).write_bytes(readme)
        bagit.make_bag(str(staging), _bag_info(archive, entries, organization), checksums=list(BAG_CHECKSUMS))
        os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    files = len(entries) + len(archive.manifests) + 1
    logger.info("bagged %d files from %s into %s", files, store.uri, out)
    size = sum(entry.size for entry in entries) + manifest_bytes + len(readme)
    return ExportSummary(str(out), files, size, _rows(entries, "records"))


def export_dataset(
    store: ObjectStore,
    keyring: Keyring,
    dest: ObjectStore,
    *,
    with_raw: bool = False,
    on_object: Progress | None = None,
) -> ExportSummary:
    """Write the committed tables (and with ``with_raw`` the raw bundles) and README.md
    to ``dest``, a folder or S3 prefix. The README depends only on what is exported, so
    an interrupted export can be run again into the same place; a destination holding
    another export is refused before anything is copied, and so is an archive with a
    raw bundle that does not verify (every one is read first). ``on_object(done,
    total)`` is called as bundles are checked and objects copied."""
    if dest.uri == store.uri:
        raise ExportError(f"{dest.uri} is the archive itself: export to another place")
    archive = CommittedArchive.read(store, keyring)
    prefixes = (f"{layout.TABLES}/", f"{layout.RAW}/") if with_raw else (f"{layout.TABLES}/",)
    entries = [entry for prefix in prefixes for entry in archive.under(prefix)]
    raws = archive.under(f"{layout.RAW}/")
    total = len(raws) + len(entries)
    for done, entry in enumerate(raws, 1):
        _check_bundle(entry, read_entry(store, entry), keyring)
        if on_object is not None:
            on_object(done, total)
    readme = dataset_readme(archive, entries).encode("utf-8")
    try:
        dest.put_bytes(README, readme)
    except ObjectExists:
        raise ExportError(
            f"{dest.uri} holds another export (its {README} differs): give an empty destination"
        ) from None
    with tempfile.TemporaryDirectory(prefix="pith-export-") as spool:
        local = Path(spool) / "object"
        for done, entry in enumerate(entries, len(raws) + 1):
            _stream_to_file(store, entry, local)
            dest.put_file(entry.path, local)
            local.unlink()
            if on_object is not None:
                on_object(done, total)
    dest.flush()
    logger.info("exported %d objects from %s to %s", len(entries), store.uri, dest.uri)
    return ExportSummary(
        dest.uri, len(entries) + 1, sum(e.size for e in entries) + len(readme), _rows(entries, "records")
    )


# --- copying ---------------------------------------------------------------------


def _stream_to_file(store: ObjectStore, entry: ObjectInfo, target: Path) -> None:
    """Copy one committed object to a new local file, checking it against its entry."""
    target.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    with open(target, "xb") as out:
        for chunk in store.read_chunks(entry.path):
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
    check_digest(entry, digest.hexdigest(), size)


def _check_bundle(entry: ObjectInfo, data: bytes, keyring: Keyring) -> None:
    verdict = verify_bundle(data, keyring)
    if not verdict.ok:
        raise BundleRejected(
            f"{entry.path} does not verify ({verdict.reason} at {verdict.path or '<document>'}: "
            f"{verdict.detail}): nothing exported; audit the archive"
        )


def _copy_manifest(archive: CommittedArchive, path: str, staging: Path) -> int:
    """Copy a manifest's exact bytes, verified again as they are copied; their size."""
    data = archive.store.get_bytes(path)
    verify_manifest(data, archive.keyring)
    target = staging / path
    target.parent.mkdir(parents=True, exist_ok=True)
    return target.write_bytes(data)


def _rows(entries: Iterable[ObjectInfo], table: str) -> int:
    return sum(entry.rows or 0 for entry in entries if entry.table == table)


def _bag_info(archive: CommittedArchive, entries: Iterable[ObjectInfo], organization: str | None) -> dict:
    last = archive.manifests[-1]
    return {
        "Source-Organization": organization or "unspecified",
        "External-Description": (
            f"Pith open graph bundles (signed arXiv paper records) verified and archived by pith-archiver: "
            f"{_rows(entries, 'records')} bundle versions from {len(archive.manifests)} committed runs, as "
            f"Parquet tables, exact raw bundles, signed manifests and keys. See data/{README}."
        ),
        "Internal-Sender-Identifier": archive.store.uri,
        "Bagging-Date": datetime.now(timezone.utc).date().isoformat(),
        "Bag-Software-Agent": f"pith-archiver {version()} (bagit.py {bagit.VERSION})",
        "Pith-Last-Run": last["run_id"],
        "Pith-Table-Schema-CurrentVersion": SCHEMA_VERSION,
    }


# --- the dataset README --------------------------------------------------------------


def dataset_readme(archive: CommittedArchive, entries: list[ObjectInfo], manifest_bytes: int | None = None) -> str:
    """What a reader needs without the archiver: contents, counts, provenance, schema.
    A function of the archive's committed state and of what is exported only
    (``entries``, and the manifests when ``manifest_bytes`` says how large they are)."""
    return (
        "\n".join(
            [
                *_intro(archive),
                *_contents(archive, entries, manifest_bytes),
                *_provenance(archive),
                *_schema(),
                *_reading(),
            ]
        )
        + "\n"
    )


def _intro(archive: CommittedArchive) -> list[str]:
    last = archive.manifests[-1]
    return [
        "# Pith open graph bundles: an offline dataset",
        "",
        "Signed records of arXiv papers from the [Pith](https://pith.science) registry, crawled and verified by "
        "pith-archiver (every hash and Ed25519 signature checked against pinned keys, the merged state "
        "recomputed) and exported from its archive.",
        "",
        f"- source archive: `{archive.store.uri}`",
        f"- committed runs: {len(archive.manifests)}, the last `{last['run_id']}` (committed {last['committed_at']})",
        f"- exported by pith-archiver {version()}; table schema version {SCHEMA_VERSION}",
        "",
    ]


def _contents(archive: CommittedArchive, entries: list[ObjectInfo], manifest_bytes: int | None) -> list[str]:
    folders: dict[str, list[int]] = {}
    for entry in entries:
        counted = folders.setdefault(_folder(entry.path), [0, 0])
        counted[0] += 1
        counted[1] += entry.size
    lines = ["## Contents", "", "| folder | what | files | bytes |", "| --- | --- | ---: | ---: |"]
    for folder, (files, size) in sorted(folders.items()):
        table = folder.partition("/")[2]
        what = f"the `{table}` table ({_rows(entries, table)} rows)" if table in TABLES else FOLDERS[folder]
        lines.append(f"| `{folder}/` | {what} | {files} | {size} |")
    if manifest_bytes is not None:
        lines.append(
            f"| `{layout.MANIFESTS}/` | {FOLDERS[layout.MANIFESTS]} | {len(archive.manifests)} | {manifest_bytes} |"
        )
    lines += [
        "",
        f"`{layout.TABLES}/{TABLES['records'].name}` holds one row per bundle version "
        f"({_rows(entries, 'records')} here); `{layout.RAW}/<aa>/<raw_sha256>.json` is the file a "
        "row's `raw_path` names, when raw bundles are included.",
        "Only objects listed by committed manifests are here, so the folders may be read whole. Not "
        f"included: `{layout.QUARANTINE}/` (the bytes of rejected bundles; the `verifications` table "
        "records every rejection and its reason).",
        "",
    ]
    return lines


def _folder(path: str) -> str:
    """The README's folder of an exported path: ``tables/<table>``, or its top folder."""
    if path.startswith(f"{layout.TABLES}/"):
        return "/".join(path.split("/")[:2])
    return next(folder for folder in FOLDERS if path.startswith(f"{folder}/"))


def _provenance(archive: CommittedArchive) -> list[str]:
    lines = [
        "## Provenance",
        "",
        "| run | worker | started | committed | software | signed by | verified | rejected |",
        "| --- | --- | --- | --- | --- | --- | ---: | ---: |",
    ]
    for manifest in archive.manifests:
        stats = (manifest.get("stats") or {}).get("archive") or {}
        software = manifest.get("software") or {}
        lines.append(
            f"| `{manifest['run_id']}` | {manifest.get('worker', '')} | {manifest.get('started_at', '')} "
            f"| {manifest.get('committed_at', '')} | {software.get('name', '')} {software.get('version', '')} "
            f"| `{manifest['signature']['key_id']}` | {stats.get('verified', '')} "
            f"| {stats.get('rejected', '')} |"
        )
    signers = sorted({(m["signature"]["key_id"], m["signature"]["public_key_fingerprint"]) for m in archive.manifests})
    lines += [
        "",
        "Manifests were signed by: " + ", ".join(f"`{key}` (fingerprint {fp})" for key, fp in signers) + ".",
        "Each manifest is canonical JSON signed with Ed25519 over the SHA-256 of the manifest without its "
        "signature. They were trusted for this export because they verify under the archiver keys the "
        "exporter trusted; every raw bundle was verified when archived and again for this export, "
        "under the registry keys the exporter trusted (`pith-archiver audit` re-checks a whole archive "
        "against keys pinned elsewhere).",
        "",
    ]
    return lines


def _schema() -> list[str]:
    lines = [
        f"## Schema (version {SCHEMA_VERSION})",
        "",
        "Each Parquet file also carries its column meanings (field metadata `doc`) and the schema version.",
        "",
    ]
    for spec in TABLES.values():
        lines += [
            f"### `{spec.name}`",
            "",
            f"Partitioned by `{spec.partition}` (a directory level, `{spec.partition}=<value>`): {spec.partition_doc}.",
            "",
            "| column | type | meaning |",
            "| --- | --- | --- |",
        ]
        for field in spec.columns:
            kind = f"{field.type}{'' if field.nullable else ', not null'}"
            meaning = field.metadata[b"doc"].decode("utf-8").replace("|", "\\|")
            lines.append(f"| `{field.name}` | {kind} | {meaning} |")
        lines.append("")
    return lines


def _reading() -> list[str]:
    return [
        "## Reading",
        "",
        "```sql",
        "-- DuckDB, from this folder",
        "SELECT year, count(*) FROM read_parquet('tables/records/**/*.parquet', hive_partitioning = true)",
        "GROUP BY year ORDER BY year;",
        "```",
        "",
        "```python",
        "import pyarrow.dataset as ds",
        'records = ds.dataset("tables/records", partitioning="hive").to_table()',
        "```",
    ]
