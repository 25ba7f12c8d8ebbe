"""The dataset README of an export (``storage.publishing.export``): what a reader needs without
the archiver (contents, counts, provenance, the tables' schema, how to read them), and
the bag-info of a bag. Both are functions of the archive's committed state and of what
is exported only, so an export run again writes the same README."""

from collections.abc import Iterable
from datetime import datetime, timezone

import bagit

from pith.shipped import version
from storage.archive import layout
from storage.archive.layout import SCHEMA_VERSION
from storage.archive.reader import CommittedArchive
from storage.archive.stores import ObjectInfo
from storage.archive.tables import TABLES, field_doc

README = "README.md"
FOLDERS = {  # what each exported folder holds, for the README
    layout.TABLES: "Parquet tables, Hive-partitioned (schema below)",
    layout.RAW: "the exact bytes of every verified bundle version, named by their sha256",
    layout.ATTESTATIONS: "signed storage attestations (JSON lines)",
    layout.LOGS: "each archiver key's Merkle log of its attestations as C2SP tlog-tiles, with its signed "
    "checkpoints (size and root hash) named by tree size",
    layout.CHECKPOINTS: "signed checkpoints of the logs of archives written before their logs were tiles",
    layout.KEYS: "public key documents of the archiver keys that signed the manifests",
    layout.MANIFESTS: "the signed run manifests: each lists its run's objects with sha256 and size",
}


def rows_of(entries: Iterable[ObjectInfo], table: str) -> int:
    """The rows of ``table`` among the exported ``entries``."""
    return sum(entry.rows or 0 for entry in entries if entry.table == table)


def bag_info(archive: CommittedArchive, entries: Iterable[ObjectInfo], organization: str | None) -> dict:
    last = archive.manifests[-1]
    return {
        "Source-Organization": organization or "unspecified",
        "External-Description": (
            f"Pith open graph bundles (signed arXiv paper records) verified and archived by pith-archiver: "
            f"{rows_of(entries, 'records')} bundle versions from {len(archive.manifests)} committed runs, as "
            f"Parquet tables, exact raw bundles, signed manifests and keys. See data/{README}."
        ),
        "Internal-Sender-Identifier": archive.store.uri,
        "Bagging-Date": datetime.now(timezone.utc).date().isoformat(),
        "Bag-Software-Agent": f"pith-archiver {version()} (bagit.py {bagit.VERSION})",
        "Pith-Last-Run": last["run_id"],
        "Pith-Table-Schema-CurrentVersion": SCHEMA_VERSION,
    }


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
        what = f"the `{table}` table ({rows_of(entries, table)} rows)" if table in TABLES else FOLDERS[folder]
        lines.append(f"| `{folder}/` | {what} | {files} | {size} |")
    if manifest_bytes is not None:
        lines.append(
            f"| `{layout.MANIFESTS}/` | {FOLDERS[layout.MANIFESTS]} | {len(archive.manifests)} | {manifest_bytes} |"
        )
    lines += [
        "",
        f"`{layout.TABLES}/{TABLES['records'].name}` holds one row per bundle version "
        f"({rows_of(entries, 'records')} here); `{layout.RAW}/<aa>/<raw_sha256>.json` is the file a "
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
            meaning = field_doc(field).replace("|", "\\|")
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
