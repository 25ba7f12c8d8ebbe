"""The manifest is the commit.

A run's manifest lists every object it wrote (path, sha256, size; table files also
their table and row count), with run statistics, crawl parameters and the software
version, and is signed the Pith way: ``manifest_sha256 = sha256(canon(manifest
without "signature"))``, Ed25519 over its 32 bytes. It is written last and never
over another; readers trust an object only when a manifest verifying under a pinned
key lists it. Whatever else lies in the archive is a crashed run's leftover: an
orphan, which the audit (``storage.audit``) reports.
"""

import logging
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, TypeVar

from pith.canonical import canon, canon_sha256
from pith.keyring import ARCHIVE, SIGNATURE_MEMBERS, Keyring
from pith.parse import Limits, parse
from pith.reasons import Reason, Rejected
from pith.schema import SIGNATURE_STATUS
from pith.shipped import version
from pith.signing import Signer, utc_now
from storage.archive import layout
from storage.archive.layout import SCHEMA_VERSION
from storage.archive.stores import ObjectInfo, ObjectStore, StorageError

logger = logging.getLogger(__name__)

MANIFEST_TYPE = "pith_archive_manifest"
MANIFEST_VERSION = "1"
SIGNED_MESSAGE = "manifest_sha256_bytes"
T = TypeVar("T")
MANIFEST_LIMITS = Limits(max_bytes=1 << 31)


class ManifestInvalid(Exception):
    """A manifest that must not be trusted: ``reason`` is a short code, ``path`` names
    the field that broke. ``unpinned`` is the well-formed manifest when all that is
    wrong is that no pinned key signs it (``unknown_key``): its claims, unchecked."""

    def __init__(self, reason: str, path: str = "", detail: str = "", unpinned: dict[str, Any] | None = None):
        super().__init__(f"{reason} at {path or '<manifest>'}: {detail}")
        self.reason, self.path, self.detail = reason, path, detail
        self.unpinned = unpinned


@dataclass(frozen=True)
class Superseded:
    """A listed file (``path`` with ``sha256``) a later manifest replaces by the file
    at ``by``, which it lists: a derived file rebuilt (``storage.rebuild``), never
    written over, so the damaged one stays evidence in quarantine."""

    path: str
    sha256: str
    by: str


def build_manifest(
    *,
    run_id: str,
    worker: str,
    started_at: str,
    objects: Iterable[ObjectInfo],
    stats: dict[str, Any],
    params: dict[str, Any],
    supersedes: Iterable[Superseded] = (),
) -> dict[str, Any]:
    """The unsigned manifest body, listing ``objects`` (ObjectInfo) as entries and,
    when given, the listed files a rebuild replaces (``supersedes``)."""
    replaced = [{"path": old.path, "sha256": old.sha256, "by": old.by} for old in supersedes]
    return {
        "manifest_type": MANIFEST_TYPE,
        "manifest_version": MANIFEST_VERSION,
        "run_id": layout.check_run_id(run_id),
        "worker": worker,
        "started_at": started_at,
        "committed_at": utc_now(),
        "software": {"name": "pith-archiver", "version": version()},
        "table_schema_version": SCHEMA_VERSION,
        "crawl": params,
        "stats": stats,
        "objects": [info.entry() for info in sorted(objects, key=lambda info: info.path)],
        **({"supersedes": sorted(replaced, key=lambda old: old["path"])} if replaced else {}),
    }


def sign_manifest(manifest: dict[str, Any], signer: Signer) -> dict[str, Any]:
    body = {k: v for k, v in manifest.items() if k != "signature"}
    digest = canon_sha256(body)
    return {**body, "signature": {**signer.signature(digest, SIGNED_MESSAGE), "manifest_sha256": digest}}


def commit_manifest(store: ObjectStore, manifest: dict[str, Any]) -> ObjectInfo:
    """Write the signed manifest under its run id, after everything it lists is durable.
    Another manifest under that name raises ObjectExists: a commit never overwrites."""
    store.flush()
    info = store.put_bytes(layout.manifest(manifest["run_id"]), canon(manifest) + b"\n")
    store.flush()
    logger.info("committed %s: %d objects", info.path, len(manifest["objects"]))
    return info


def _require(obj: dict[str, Any], key: str, kind: type[T], path: str = "") -> T:
    value = obj.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ManifestInvalid(Reason.SCHEMA_VIOLATION, f"{path}{key}", f"expected {kind.__name__}")
    return value


def _check_entry(entry: object, index: int) -> None:
    where = f"objects[{index}]."
    if not isinstance(entry, dict):
        raise ManifestInvalid(Reason.SCHEMA_VIOLATION, where[:-1], "expected an object")
    try:
        layout.check_path(_require(entry, "path", str, where))
    except layout.LayoutError as exc:
        raise ManifestInvalid(Reason.SCHEMA_VIOLATION, f"{where}path", str(exc)) from None
    sha = _require(entry, "sha256", str, where)
    if len(sha) != 64 or sha.strip("0123456789abcdef"):
        raise ManifestInvalid(Reason.SCHEMA_VIOLATION, f"{where}sha256", "expected 64 lowercase hex digits")
    if _require(entry, "size", int, where) < 0:
        raise ManifestInvalid(Reason.SCHEMA_VIOLATION, f"{where}size", "negative")
    if "table" in entry or "rows" in entry:  # a table file: both, as ObjectInfo.entry() writes them
        _require(entry, "table", str, where)
        if _require(entry, "rows", int, where) < 0:
            raise ManifestInvalid(Reason.SCHEMA_VIOLATION, f"{where}rows", "negative")


def _check_supersedes(supersedes: object, paths: AbstractSet[str]) -> None:
    """Each file a manifest supersedes: a path, its sha256, and ``by`` a path it lists."""
    if not isinstance(supersedes, list):
        raise ManifestInvalid(Reason.SCHEMA_VIOLATION, "supersedes", "expected a list")
    for index, old in enumerate(supersedes):
        where = f"supersedes[{index}]."
        if not isinstance(old, dict):
            raise ManifestInvalid(Reason.SCHEMA_VIOLATION, where[:-1], "expected an object")
        for name in ("path", "sha256", "by"):
            _require(old, name, str, where)
        if old["by"] not in paths:
            raise ManifestInvalid(Reason.SCHEMA_VIOLATION, f"{where}by", "names a file the manifest does not list")


def verify_manifest(raw: bytes, keyring: Keyring) -> dict[str, Any]:
    """The manifest in ``raw`` if it is well formed and its signature verifies under a
    pinned key; ManifestInvalid otherwise."""
    try:
        document = parse(raw, MANIFEST_LIMITS)
    except Rejected as exc:
        raise ManifestInvalid(exc.reason, exc.path, exc.detail) from None
    manifest = document.data
    if not isinstance(manifest, dict) or manifest.get("manifest_type") != MANIFEST_TYPE:
        raise ManifestInvalid(Reason.SCHEMA_VIOLATION, "manifest_type", f"expected {MANIFEST_TYPE!r}")
    if manifest.get("manifest_version") != MANIFEST_VERSION:
        raise ManifestInvalid(Reason.SCHEMA_VIOLATION, "manifest_version", f"expected {MANIFEST_VERSION!r}")
    layout.check_run_id(_require(manifest, "run_id", str))
    signature = _require(manifest, "signature", dict)
    for key, expected in (("signed_message", SIGNED_MESSAGE), ("signature_status", SIGNATURE_STATUS)):
        if signature.get(key) != expected:
            raise ManifestInvalid(Reason.SCHEMA_VIOLATION, f"signature.{key}", f"expected {expected!r}")
    claimed = _require(signature, "manifest_sha256", str, "signature.")
    body = {k: v for k, v in manifest.items() if k != "signature"}
    if canon_sha256(body, document.exact) != claimed:
        raise ManifestInvalid(Reason.MANIFEST_HASH_MISMATCH, "signature.manifest_sha256", "does not hash the manifest")
    objects = _require(manifest, "objects", list)
    for index, entry in enumerate(objects):
        _check_entry(entry, index)
    _check_supersedes(manifest.get("supersedes", []), {entry["path"] for entry in objects})
    try:
        keyring.check_signature(
            signature,
            bytes.fromhex(claimed),
            "signature",
            Reason.MANIFEST_SIGNATURE_INVALID,
            SIGNATURE_MEMBERS | {"manifest_sha256"},
            role=ARCHIVE,
        )
    except Rejected as exc:
        raise ManifestInvalid(
            exc.reason, exc.path, exc.detail, manifest if exc.reason == Reason.UNKNOWN_KEY else None
        ) from None
    return manifest


def present_runs(store: ObjectStore) -> frozenset[str]:
    """The run ids of every manifest the archive holds, trusted or not (nothing is read)."""
    return frozenset(
        filter(None, (layout.manifest_run_id(stored.path) for stored in store.list(f"{layout.MANIFESTS}/")))
    )


def superseded(manifests: Iterable[dict[str, Any]]) -> dict[str, Superseded]:
    """The listed paths the given (verified) manifests replace, by path."""
    return {
        old["path"]: Superseded(old["path"], old["sha256"], old["by"])
        for manifest in manifests
        for old in manifest.get("supersedes", [])
    }


def superseding(store: ObjectStore, keyring: Keyring) -> dict[str, Superseded]:
    """What the repair runs' manifests (the only ones that supersede) replace: the
    audit's look ahead, which reads no other manifest."""
    runs = frozenset(run for run in present_runs(store) if layout.run_worker(run) != layout.REPAIR_WORKER)
    return superseded(read.manifest for read in read_manifests(store, keyring, runs) if read.manifest is not None)


@dataclass
class ManifestRead:
    """One file under manifests/: the verified manifest, or why it is not trusted."""

    path: str
    manifest: dict[str, Any] | None = None
    error: ManifestInvalid | StorageError | None = None


def read_manifests(
    store: ObjectStore, keyring: Keyring, skip: AbstractSet[str] = frozenset()
) -> Iterator[ManifestRead]:
    """Every manifest in the archive, in run id (time) order, verified or not; but
    those of the run ids in ``skip``, not even read."""
    skipped = {layout.manifest(run_id) for run_id in skip}
    for stored in sorted(store.list(f"{layout.MANIFESTS}/"), key=lambda s: s.path):
        if not layout.is_manifest(stored.path) or stored.path in skipped:
            continue
        try:
            manifest = verify_manifest(store.get_bytes(stored.path), keyring)
            if layout.manifest(manifest["run_id"]) != stored.path:
                raise ManifestInvalid("manifest_misnamed", "run_id", f"names {manifest['run_id']}")
        except (ManifestInvalid, StorageError) as exc:
            logger.info("%s: not trusted: %s", stored.path, exc)  # each caller reports it its own way
            yield ManifestRead(stored.path, error=exc)
        else:
            yield ManifestRead(stored.path, manifest)


@dataclass
class Committed:
    """The manifests of an archive, each read and verified once: those readers may
    trust (in run id order) and the reads that failed."""

    manifests: list[dict[str, Any]]
    untrusted: list[ManifestRead]


def read_committed(store: ObjectStore, keyring: Keyring, skip: AbstractSet[str] = frozenset()) -> Committed:
    """Every manifest read (``skip`` as in read_manifests), split into the trusted and the rest."""
    manifests, untrusted = [], []
    for read in read_manifests(store, keyring, skip):
        if read.manifest is not None:
            manifests.append(read.manifest)
        else:
            untrusted.append(read)
    return Committed(manifests, untrusted)


def committed_manifests(
    store: ObjectStore, keyring: Keyring, skip: AbstractSet[str] = frozenset()
) -> list[dict[str, Any]]:
    """The manifests readers may trust (the others are logged); ``skip`` as in read_manifests."""
    return read_committed(store, keyring, skip).manifests


def listed(manifest: dict[str, Any]) -> list[ObjectInfo]:
    """The objects a verified manifest lists, typed."""
    return [ObjectInfo.from_entry(entry) for entry in manifest["objects"]]


def union(manifests: Iterable[dict[str, Any]]) -> dict[str, ObjectInfo]:
    """Path to object over all given manifests (the first listing of a path wins;
    a path listed with different content is logged), but for the files a manifest
    supersedes: readers read the rebuilt file instead."""
    manifests = list(manifests)
    objects: dict[str, ObjectInfo] = {}
    for manifest in manifests:
        for info in listed(manifest):
            known = objects.setdefault(info.path, info)
            if known.sha256 != info.sha256:
                logger.error(
                    "%s is listed with sha256 %s by %s and %s before",
                    info.path,
                    info.sha256,
                    manifest["run_id"],
                    known.sha256,
                )
    for old in superseded(manifests).values():
        if old.by in objects and objects.get(old.path, old).sha256 == old.sha256:
            objects.pop(old.path, None)
    return objects
