"""The metadata files of a dataset release (``storage.publishing.release``), in the formats the
users' own tools read: ``croissant.json`` (MLCommons Croissant 1.0: what Hugging Face
generates for Parquet datasets, validated and iterated by mlcroissant),
``datapackage.json`` (a Frictionless data package) and ``README.md`` (a dataset card
whose YAML front matter gives the Hugging Face ``datasets`` configs). Each is derived
from the release's own schemas and file list, so the three never disagree; each names the
exact files of the release, never a glob over a folder that could gain one."""

import json
from pathlib import Path

import pyarrow as pa

from pith.shipped import version
from storage.archive.tables import field_doc

CROISSANT_CONTEXT = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
    "samplingRate": "cr:samplingRate",
    "equivalentProperty": "cr:equivalentProperty",
}
PARQUET = "application/x-parquet"
NAME = "pith-open-graph"
DESCRIPTION = (
    "The Pith registry's open graph bundles (signed records that give each arXiv paper a Pith Number), "
    "each record's current version, verified against pinned Ed25519 keys by pith-archiver"
)
LICENSE = "Record metadata as the registry publishes it; each paper's own licence is in records.license"


def _croissant_type(kind: pa.DataType) -> str | None:
    if pa.types.is_integer(kind):
        return "sc:Integer"
    if pa.types.is_boolean(kind):
        return "sc:Boolean"
    if pa.types.is_timestamp(kind):
        return "sc:Date"
    if pa.types.is_string(kind):
        return "sc:Text"
    return None  # lists: in the Parquet files and the data package, not in the Croissant record sets


def _frictionless_type(kind: pa.DataType) -> str:
    if pa.types.is_integer(kind):
        return "integer"
    if pa.types.is_boolean(kind):
        return "boolean"
    if pa.types.is_timestamp(kind):
        return "datetime"
    if pa.types.is_list(kind):
        return "any"  # frictionless reads a Parquet list as an array object its "array" type refuses
    return "string"


def _shards(release: dict, table: str) -> list[dict]:
    return [entry for entry in release["files"] if entry["path"].startswith(f"data/{table}/")]


def croissant(release: dict, schemas: dict[str, pa.Schema]) -> dict:
    distribution, record_sets = [], []
    for table, schema in schemas.items():
        if not _shards(release, table):
            continue
        for entry in _shards(release, table):
            distribution.append(
                {
                    "@type": "cr:FileObject",
                    "@id": entry["path"],
                    "name": entry["path"],
                    "contentUrl": entry["path"],
                    "contentSize": f"{entry['size']} B",
                    "encodingFormat": PARQUET,
                    "sha256": entry["sha256"],
                }
            )
        distribution.append(
            {
                "@type": "cr:FileSet",
                "@id": f"{table}-files",
                "name": f"{table}-files",
                "encodingFormat": PARQUET,
                "includes": [entry["path"] for entry in _shards(release, table)],  # exact paths, no glob
            }
        )
        fields = [
            {
                "@type": "cr:Field",
                "@id": f"{table}/{field.name}",
                "name": field.name,
                "description": field_doc(field),
                "dataType": _croissant_type(field.type),
                "source": {"fileSet": {"@id": f"{table}-files"}, "extract": {"column": field.name}},
            }
            for field in schema
            if _croissant_type(field.type)
        ]
        record_sets.append({"@type": "cr:RecordSet", "@id": table, "name": table, "field": fields})
    return {
        "@context": CROISSANT_CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": "http://mlcommons.org/croissant/1.0",
        "name": NAME,
        "description": f"{DESCRIPTION}. Release {release['release_id']}.",
        "license": LICENSE,
        "url": "https://pith.science",
        "version": "1.0.0",
        "datePublished": release["created_at"],
        "citeAs": CITATION,
        "distribution": distribution,
        "recordSet": record_sets,
    }


def datapackage(release: dict, schemas: dict[str, pa.Schema]) -> dict:
    """Each shard a resource with its schema; sizes and hashes are in release.json and
    croissant.json (frictionless's Parquet reader counts neither, so it would refuse them)."""
    resources = []
    for table, schema in schemas.items():
        for entry in _shards(release, table):
            resources.append(
                {
                    "name": Path(entry["path"]).stem.replace("_", "-"),
                    "path": entry["path"],
                    "format": "parquet",
                    "mediatype": "application/vnd.apache.parquet",
                    "schema": {
                        "fields": [
                            {
                                "name": field.name,
                                "type": _frictionless_type(field.type),
                                "description": field_doc(field),
                            }
                            for field in schema
                        ]
                    },
                }
            )
    return {"name": NAME, "title": "Pith open graph", "description": DESCRIPTION, "resources": resources}


CITATION = (
    "@misc{pith_open_graph, title = {Pith open graph bundles}, howpublished = {https://pith.science}, "
    "note = {archived and verified with pith-archiver}}"
)


def _configs(release: dict, tables: list[str]) -> str:
    """The card's ``datasets`` configs: one per table, naming its exact shards (YAML)."""
    return "".join(
        f"- config_name: {table}\n  data_files:\n"
        + "".join(f"  - {json.dumps(entry['path'])}\n" for entry in _shards(release, table))
        for table in tables
    )


def _columns(release: dict, schemas: dict[str, pa.Schema], tables: list[str]) -> str:
    """The card's column reference: a Markdown table of each table's columns and meanings."""
    return "".join(
        f"\n### {table} ({release['tables'][table]['rows']} rows)\n\n| column | meaning |\n| --- | --- |\n"
        + "".join(f"| `{field.name}` | {field_doc(field) or field.name} |\n" for field in schemas[table])
        for table in tables
    )


def card(release: dict, schemas: dict[str, pa.Schema]) -> str:
    tables = [table for table in schemas if _shards(release, table)]
    configs, columns = _configs(release, tables), _columns(release, schemas, tables)
    since = (
        f" It holds only what changed since release `{release['since']}` (table `changes`)." if release["since"] else ""
    )
    return f"""---
license: other
pretty_name: Pith open graph
configs:
{configs}---

# Pith open graph, release {release['release_id']}

{DESCRIPTION}. One row per record in `records`: its current version (the newest version
accepted as current: a version is only ever replaced by one that keeps every event of
it), with that version's `events`, `aliases` and `citations` (each record's paper's
cited records, from its last graph snapshot).{since}

Made by pith-archiver {version()} from the archive `{release['archive']}`, from
{len(release['runs'])} committed runs; `release.json` lists every file with its size and
sha256 and is signed with the archive's key (`pith-archiver verify release.json`).

## How it was verified

Every bundle was checked before it was archived: each event's hash and Ed25519
signature, the canonical record's hash, the bundle signature, against keys pinned out of
band (never the keys a bundle carries), and the merged state recomputed from the events.
Bundles that failed are not in this release.

## Licence

{LICENSE}.

## How to cite

```bibtex
{CITATION}
```

## Load it

`release.json` lists every file; the configs above and `croissant.json` name exactly
those. A glob over a folder reads whatever else lands there: run
`pith-archiver verify release.json` first (it rejects a file the release does not list).
Each line runs as it stands in Python started inside this folder (`datasets` wants the
folder's absolute path: given `"."` it looks for a dataset name).

```python
import duckdb; duckdb.sql("SELECT count(*) FROM 'data/records/*.parquet'").show()
import pyarrow.dataset as ds; ds.dataset("data/records", format="parquet").to_table()
import os, datasets; datasets.load_dataset(os.getcwd(), "records")
```

## Columns
{columns}"""  # noqa: S608 - a dataset card in Markdown, not a query


def write_cards(release: dict, folder: Path, schemas: dict[str, pa.Schema]) -> None:
    (folder / "croissant.json").write_text(json.dumps(croissant(release, schemas), indent=1), "utf-8")
    (folder / "datapackage.json").write_text(json.dumps(datapackage(release, schemas), indent=1), "utf-8")
    (folder / "README.md").write_text(card(release, schemas), "utf-8")
