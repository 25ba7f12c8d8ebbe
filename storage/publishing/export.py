"""Offline copies of an archive's committed contents, for people who will never run
the archiver: a BagIt bag (``export_bag``) or a plain Parquet dataset in a folder or
S3 prefix (``export_dataset``), each with a dataset README (schema, counts,
provenance).

Only objects that committed manifests list are exported, so a crashed run's leftovers
never are, and quarantined bytes stay behind (the ``verifications`` table records
every rejection). One concern a module: copying each object checked against its
entry (``storage.archive.export_copy``), verifying every raw bundle again before
anything is written (``storage.archive.export_check``, which every export format
calls), the README and bag-info (``export_card``); this module only decides what goes
where.
"""

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import bagit

from pith.keyring import Keyring
from storage.archive import layout
from storage.archive.export_check import Progress, check_included
from storage.archive.export_copy import copy_manifest, copy_object
from storage.archive.reader import CommittedArchive
from storage.archive.stores import ObjectExists, ObjectStore
from storage.publishing.export_card import README, bag_info, dataset_readme, rows_of

logger = logging.getLogger(__name__)

BAG_CHECKSUMS = ("sha256", "sha512")
BAG_PREFIXES = (
    f"{layout.TABLES}/",
    f"{layout.RAW}/",
    f"{layout.ATTESTATIONS}/",
    f"{layout.LOGS}/",
    f"{layout.CHECKPOINTS}/",
    f"{layout.KEYS}/",
)


class ExportError(Exception):
    """An export that cannot be made as asked."""


def _checked_first(archive: CommittedArchive, copies: int, on_object: Progress | None) -> int:
    """Every committed raw bundle verified again (``check_included``) before ``copies``
    objects are copied; ``on_object`` counts both. How many were checked."""
    step = None if on_object is None else lambda done, checks: on_object(done, checks + copies)
    return check_included(archive, on_checked=step)


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
    bundles, attestations, keys and run manifests and README.md, with sha256 and sha512
    bag manifests (BagIt's checksum lists). Every raw bundle is verified again first
    (one that does not verify stops the export); the bag is built next to ``out`` and
    renamed into place when whole.
    ``on_object(done, total)`` is called as bundles are checked and objects copied."""
    out = Path(out).absolute()
    if out.exists():
        raise ExportError(f"{out} already exists: give a new path for the bag")
    archive = CommittedArchive.read(store, keyring)
    entries = [entry for prefix in BAG_PREFIXES for entry in archive.under(prefix)]
    checked = _checked_first(archive, len(entries), on_object)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        for done, entry in enumerate(entries, checked + 1):
            copy_object(store, entry, staging / entry.path)
            if on_object is not None:
                on_object(done, checked + len(entries))
        manifest_bytes = sum(copy_manifest(archive, layout.manifest(m["run_id"]), staging) for m in archive.manifests)
        readme = dataset_readme(archive, entries, manifest_bytes).encode("utf-8")
        (staging / README).write_bytes(readme)
        bagit.make_bag(str(staging), bag_info(archive, entries, organization), checksums=list(BAG_CHECKSUMS))
        os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    files = len(entries) + len(archive.manifests) + 1
    logger.info("bagged %d files from %s into %s", files, store.uri, out)
    size = sum(entry.size for entry in entries) + manifest_bytes + len(readme)
    return ExportSummary(str(out), files, size, rows_of(entries, "records"))


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
    checked = _checked_first(archive, len(entries), on_object)
    readme = dataset_readme(archive, entries).encode("utf-8")
    try:
        dest.put_bytes(README, readme)
    except ObjectExists:
        raise ExportError(
            f"{dest.uri} holds another export (its {README} differs): give an empty destination"
        ) from None
    with tempfile.TemporaryDirectory(prefix="pith-export-") as spool:
        local = Path(spool) / "object"
        for done, entry in enumerate(entries, checked + 1):
            copy_object(store, entry, local)
            dest.put_file(entry.path, local)
            local.unlink()
            if on_object is not None:
                on_object(done, checked + len(entries))
    dest.flush()
    logger.info("exported %d objects from %s to %s", len(entries), store.uri, dest.uri)
    return ExportSummary(
        dest.uri, len(entries) + 1, sum(e.size for e in entries) + len(readme), rows_of(entries, "records")
    )
