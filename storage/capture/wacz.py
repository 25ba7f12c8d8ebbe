"""A WACZ 1.2 package of the archive's WARC files: what web archivists' replay tools
(pywb, ReplayWeb.page) open as one file.

The package holds the WARCs the committed manifests list (all of them, or those of
the runs from ``since`` on) under ``archive/``, stored in the ZIP as they are (no
second compression, so a reader can seek into them), one CDXJ index merged from the
per-WARC indexes under ``indexes/``, a page per verified bundle in
``pages/pages.jsonl`` (each page's raw bundle verified again under the reader's pinned
keys before anything is written, as every export does), ``datapackage.json`` with every file's sha256 and size, and
``datapackage-digest.json`` with the hash of ``datapackage.json``.

Signing: the WACZ signing extension signs with ECDSA P-256 keys (or a domain's TLS
certificate), not with the archive's Ed25519 key. So no ``signedData`` is written;
``datapackage-digest.json`` carries instead ``pith_signature``, the archive key's
Ed25519 signature over the sha256 of ``datapackage.json``'s bytes (signed message
``wacz_datapackage_sha256_bytes``), checked with the archive's pinned key like a
manifest (``storage.capture.wacz_check``, which ``verify X.wacz`` runs).

Each WARC is streamed to a local temporary file and checked against its manifest
entry before it is packed: memory holds one chunk, one CDXJ line per index and the
page list.
"""

import hashlib
import heapq
import json
import logging
import tempfile
import zipfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pith.keyring import Keyring
from pith.signing import Signer, utc_now
from storage.archive import layout
from storage.archive.export_check import check_included
from storage.archive.export_copy import copy_object
from storage.archive.reader import CommittedArchive, table_batches
from storage.archive.stores import ObjectInfo, ObjectStore, hash_file
from storage.capture.wacz_check import PAGES, SIGNED_MESSAGE
from storage.capture.warc import software

logger = logging.getLogger(__name__)

# WACZ 1.2 asks for "profile": "wacz" and dropped "wacz_version"; py-wacz's validator (frictionless)
# cannot resolve that profile and requires "wacz_version": "1.1.1". We write what the validator
# accepts, as py-wacz itself does; every other part follows 1.2 (``home``, no mainPageURL).
PROFILE = "data-package"
WACZ_VERSION = "1.1.1"
INDEX = "indexes/index.cdx"
PAGES_HEADER = {"format": "json-pages-1.0", "id": "pages", "title": "Verified Pith bundles"}


class WaczError(ValueError):
    """A WACZ that cannot be made as asked (a user's error: a run not committed, no WARC)."""


@dataclass
class WaczSummary:
    destination: str
    warcs: int
    pages: int  # a page per capture of a verified bundle
    bundles: int  # of them, those whose record holds the bundle (not a revisit): what `verify` finds inside
    bytes: int


def runs_from(archive: CommittedArchive, since: str | None) -> list[dict]:
    """The committed manifests to package: all, or those of ``since`` and after (run ids sort by time)."""
    if since is None:
        return archive.manifests
    runs = [manifest["run_id"] for manifest in archive.manifests]
    if since not in runs:
        raise WaczError(f"--since {since}: no committed run of that id in {archive.store.uri}")
    return [manifest for manifest in archive.manifests if manifest["run_id"] >= since]


def _listed(manifests: list[dict], keep: Callable[[dict], bool]) -> list[ObjectInfo]:
    seen: dict[str, ObjectInfo] = {}
    for manifest in manifests:
        for entry in manifest["objects"]:
            if keep(entry):
                seen.setdefault(entry["path"], ObjectInfo.from_entry(entry))
    return sorted(seen.values(), key=lambda info: info.path)


def _pages(archive: CommittedArchive, manifests: list[dict]) -> tuple[list[dict], set[str | None], int]:
    """A page per verified bundle capture (what a replay tool lists first), the bundle
    versions they capture (each verified again before the package is made), and how
    many captures hold the bundle itself (a revisit record names an earlier one)."""
    paths = {entry["path"] for manifest in manifests for entry in manifest["objects"]}
    pages, versions, inside = [], set(), 0
    for info in archive.table_files("captures"):
        if info.path not in paths:
            continue
        for batch in table_batches(
            archive.store, info, ["url", "fetch_time", "pith_number", "bundle_sha256", "status", "warc_record_type"]
        ):
            for row in batch.to_pylist():
                if row.get("status") == "verified":
                    inside += row.get("warc_record_type") != "revisit"
                    stamp = row["fetch_time"].strftime("%Y-%m-%dT%H:%M:%SZ")
                    pages.append({"url": row["url"], "ts": stamp, "title": row["pith_number"]})
                    versions.add(row.get("bundle_sha256"))
    pages.sort(key=lambda page: (page["ts"], page["url"]))
    ids = [{"id": hashlib.sha256(f"{p['ts']} {p['url']}".encode()).hexdigest()[:16], **p} for p in pages]
    return ids, versions, inside


def _merge_indexes(files: list[Path], out: Path) -> None:
    """One sorted CDXJ from the per-WARC sorted ones, streamed."""
    with ExitStack() as stack, open(out, "w", encoding="utf-8") as target:
        readers = [stack.enter_context(open(path, encoding="utf-8")) for path in files]
        for line in heapq.merge(*readers):
            target.write(line if line.endswith("\n") else line + "\n")


def sign_digest(digest: dict, datapackage_sha256: str, signer: Signer) -> dict:
    return {**digest, "pith_signature": signer.signature(datapackage_sha256, SIGNED_MESSAGE)}


def _datapackage(uri: str, manifests: list[dict], resources: list[dict], pages: list[dict], created: str) -> dict:
    """``datapackage.json``: the runs packaged, every resource, the first page as home."""
    runs = [manifest["run_id"] for manifest in manifests]
    datapackage: dict[str, Any] = {
        "profile": PROFILE,
        "wacz_version": WACZ_VERSION,
        "title": f"Pith bundles archived in {uri}",
        "description": f"The WARC files of the crawl runs {runs[0]} to {runs[-1]}, as committed by their "
        "signed manifests.",
        "created": created,
        "modified": created,
        "software": software(),
        "pith_runs": runs,
        "resources": resources,
    }
    if pages:
        datapackage["home"] = {"url": pages[0]["url"], "ts": pages[0]["ts"]}
    return datapackage


def _seal(package: zipfile.ZipFile, datapackage: dict, signer: Signer) -> None:
    """Write the package's description last, once every resource it lists is in:
    ``datapackage.json``, and its digest signed by the archive key."""
    raw = json.dumps(datapackage, indent=2, ensure_ascii=False).encode() + b"\n"
    package.writestr("datapackage.json", raw, compress_type=zipfile.ZIP_DEFLATED)
    sha256 = hashlib.sha256(raw).hexdigest()
    digest = sign_digest({"path": "datapackage.json", "hash": f"sha256:{sha256}"}, sha256, signer)
    package.writestr("datapackage-digest.json", json.dumps(digest, indent=2) + "\n", compress_type=zipfile.ZIP_DEFLATED)


def write_wacz(
    store: ObjectStore,
    keyring: Keyring,
    signer: Signer,
    dest: ObjectStore,
    name: str,
    *,
    since: str | None = None,
) -> WaczSummary:
    """Package the committed WARCs of ``store`` (from run ``since`` on) as ``name`` in
    ``dest``, once the raw bundle of every page verifies again under ``keyring``
    (``storage.archive.export_check``: nothing is written otherwise)."""
    archive = CommittedArchive.read(store, keyring)
    manifests = runs_from(archive, since)
    warcs = _listed(manifests, lambda entry: entry["path"].startswith(f"{layout.WARC}/"))
    indexes = [info for info in warcs if info.path.endswith(".cdxj")]
    warcs = [info for info in warcs if info.path.endswith(".warc.gz")]
    if not warcs:
        raise WaczError(f"{store.uri}: the runs asked for hold no WARC file (crawled with --no-warc?)")
    pages, versions, inside = _pages(archive, manifests)
    check_included(archive, versions)  # before anything is written: a page is a verified bundle
    created = utc_now()
    with tempfile.TemporaryDirectory(prefix="pith-wacz-") as folder:
        work = Path(folder)
        local = work / "package.wacz"
        resources = []
        with zipfile.ZipFile(local, "w", allowZip64=True) as package:

            def add(path: str, file: Path, compress: int) -> None:
                sha256, size = hash_file(file)
                package.write(file, path, compress_type=compress)
                resources.append(
                    {"name": path.rsplit("/", 1)[-1].lower(), "path": path, "hash": f"sha256:{sha256}", "bytes": size}
                )

            for info in warcs:  # one at a time: the temporary folder holds one WARC
                copy = work / "archive" / info.path.rsplit("/", 1)[-1]
                copy_object(store, info, copy)
                add(f"archive/{copy.name}", copy, zipfile.ZIP_STORED)
                copy.unlink()
            for info in indexes:
                copy_object(store, info, work / info.path)
            _merge_indexes([work / info.path for info in indexes], work / "index.cdx")
            add(INDEX, work / "index.cdx", zipfile.ZIP_DEFLATED)
            (work / "pages.jsonl").write_text(
                "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in [PAGES_HEADER, *pages]), "utf-8"
            )
            add(PAGES, work / "pages.jsonl", zipfile.ZIP_DEFLATED)
            _seal(package, _datapackage(store.uri, manifests, resources, pages, created), signer)
        size = local.stat().st_size
        dest.put_file(name, local)
        dest.flush()
    logger.info("wrote %s/%s: %d WARC files, %d pages", dest.uri, name, len(warcs), len(pages))
    return WaczSummary(f"{dest.uri.rstrip('/')}/{name}", len(warcs), len(pages), inside, size)
