"""An archive (local folder or S3 prefix) as a RecordSource: a mirror serves the
current version of each archived record, as the exact bytes stored.

Only objects listed by committed manifests that verify under the given keyring are
used. The catalog is built from the committed tables, not from the bundles: the
``records`` table picks each record's current version, ``aliases`` names it, the
last ``graph_snapshot`` event gives its citations and ``record_created`` events say
which key signed it, so starting reads a few large table files rather than one
object per record (on S3, one request each). Only one bundle per signing key is
read at startup, for the key documents the mirror publishes.

Each bundle is served only while its bytes still hash to its manifest entry, and only
once they verified again under the trusted keys (checked the first time it is served,
remembered by hash): a version re-signed with an archiver key (a stolen worker key can
sign a manifest, never a registry record) is never served. A version whose
``record_created`` event the tables say a key other than a pinned registry key signed
is left out of the catalog from the start, so no alias leads to it.
"""

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from pith.keyring import REGISTRY, Keyring
from pith.numbers import suffix_of
from pith.parse import parse
from pith.reasons import Rejected
from pith.verify import verify_bundle
from storage.archive import history, layout
from storage.archive.manifest import present_runs
from storage.archive.reader import CommittedArchive, read_entry, table_batches
from storage.archive.stores import ObjectInfo, ObjectStore, StorageError

from .archive_feed import ArchiveFeed, committed_runs
from .catalog import SHORT_ALIAS_PREFIX, Catalog, Entry, cited_suffixes, most_used
from .peer_files import PeerFiles
from .source import RecordSource

logger = logging.getLogger(__name__)

RECORD_COLUMNS = [*history.RECORD_COLUMNS, "raw_path", "raw_sha256", "source_version"]


@dataclass(frozen=True, slots=True)
class ArchivedVersion:
    """An archived version of a record, as the mirror needs it."""

    pith_number: str
    bundle_sha256: str
    raw: ObjectInfo  # its raw bytes, as committed
    source_version: int
    built_at: datetime | None


def iso(moment: datetime | None) -> str:
    """A table timestamp as bundles write theirs: ``2026-05-25T22:01:12Z`` (with
    microseconds when it has them); "" for none."""
    if moment is None:
        return ""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if moment.microsecond else "%Y-%m-%dT%H:%M:%SZ")


class NothingServable(StorageError):
    """Every committed record of the archive is signed by keys not pinned as registry
    keys: a mirror of it would answer nothing but 404."""

    def __init__(self, uri: str, signed_by: Counter):
        super().__init__(f"{uri}: none of its {sum(signed_by.values())} records can be served: {self.why(signed_by)}")

    @staticmethod
    def why(signed_by: Counter) -> str:
        keys = ", ".join(f"{key_id} ({count})" for key_id, count in sorted(signed_by.items(), key=str))
        return (
            f"they are signed by {keys}, not a pinned registry key; pin it with --keyring FILE "
            "(a keyring holding that key, its fingerprint checked out of band)"
        )


class ArchiveSource(RecordSource):
    """The committed contents of an archive, served. ``keyring`` pins the archiver keys
    whose manifests are trusted (see storage.archive.reader.reading_keyring)."""

    def __init__(self, store: ObjectStore, keyring: Keyring):
        started = time.monotonic()
        self.store = store
        self.keyring = keyring
        self.remote = not store.uri.startswith("file:")
        self._verified: set[str] = set()  # raw sha256 of the bundles verified since startup
        self._unreadable: frozenset[str] | None = None  # the manifests a renewal failed to read
        archive = CommittedArchive.read(store, keyring)
        self.versions = served_versions(archive)
        signed_by = _signed_by(archive, pa.array(sorted(v.bundle_sha256 for v in self.versions.values())))
        withheld = Counter(
            signed_by.get(version.bundle_sha256)
            for version in self.versions.values()
            if not _registry_signed(keyring, signed_by.get(version.bundle_sha256))
        )
        if withheld and sum(withheld.values()) == len(self.versions):
            raise NothingServable(store.uri, withheld)
        if withheld:
            logger.warning(
                "withholding %d of %d records: %s",
                sum(withheld.values()),
                len(self.versions),
                NothingServable.why(withheld),
            )
        self.versions = {
            number: version
            for number, version in self.versions.items()
            if _registry_signed(keyring, signed_by.get(version.bundle_sha256))
        }
        by_bundle = {v.bundle_sha256: v for v in self.versions.values()}
        wanted = pa.array(sorted(by_bundle), pa.string())
        aliases, cites = _aliases(archive, wanted), _cites(archive, wanted)
        signers: Counter[str] = Counter()
        first: dict[str, str] = {}  # versions each key signed; one version per key, for its key document
        for version in sorted(by_bundle):
            signers[signed_by[version]] += 1
            first.setdefault(signed_by[version], version)
        samples = [first[key_id] for key_id in sorted(first)]
        entries = {
            suffix_of(v.pith_number): Entry(
                v.pith_number,
                iso(v.built_at),
                v.source_version,
                tuple(aliases.get(v.bundle_sha256, ())),
                cites.get(v.bundle_sha256, ()),
            )
            for v in self.versions.values()
        }
        self.served = {suffix_of(v.pith_number): v for v in self.versions.values()}
        self.catalog = Catalog(entries, self._key_documents(by_bundle[b] for b in samples), most_used(signers))
        self.present = manifests_present(archive)
        self._feed = ArchiveFeed(store, committed_runs(archive), self.catalog.suffixes, self.served)
        self._peer_files = PeerFiles(store, archive.objects.values())
        logger.info(
            "serving %d records of %s (%d committed runs) after %.1f s",
            len(self.catalog),
            store.uri,
            len(archive.manifests),
            time.monotonic() - started,
        )

    def sync_feed(self) -> ArchiveFeed:
        return self._feed

    def peer_files(self) -> PeerFiles:
        return self._peer_files

    def renewed(self) -> "ArchiveSource | None":
        """The archive read anew when its manifests changed since this read (a run
        committed, or one removed); None while they are the same, or when the new read
        fails (logged: the runs read before go on being served, and the same manifests
        are not read again until they change once more)."""
        present = frozenset[str]()
        try:
            present = present_runs(self.store)
            if present in (self.present, self._unreadable):
                return None
            return ArchiveSource(self.store, self.keyring)
        except StorageError as exc:
            self._unreadable = present
            logger.warning("%s: the new runs could not be read (%s); serving the runs read before", self.store.uri, exc)
            return None

    def _key_documents(self, versions: Iterable[ArchivedVersion]) -> list[dict]:
        """The public key documents the sampled bundles carry, as a catalog lists them."""

        def parsed() -> Iterator[tuple[str, dict]]:
            for version in versions:
                suffix = suffix_of(version.pith_number)
                raw = self.bundle_bytes(suffix)  # None has been logged
                try:
                    document = parse(raw) if raw is not None else None
                except Rejected as exc:
                    logger.warning("%s: unreadable (%s); its keys are not published", version.raw.path, exc)
                    continue
                if document is not None and isinstance(document.data, dict):  # verified when archived
                    yield suffix, document.data

        return Catalog.from_bundles(parsed()).public_keys

    def bundle_bytes(self, suffix: str) -> bytes | None:
        version = self.served.get(suffix)
        if version is None:
            return None
        entry = version.raw
        try:
            data = read_entry(self.store, entry)
        except StorageError as exc:
            logger.error("not serving %s: %s", suffix, exc)
            return None
        if entry.sha256 not in self._verified:
            verdict = verify_bundle(data, self.keyring)
            if not verdict.ok:
                logger.error(
                    "not serving %s: %s does not verify (%s at %s: %s)",
                    suffix,
                    entry.path,
                    verdict.reason,
                    verdict.path or "<document>",
                    verdict.detail,
                )
                return None
            self._verified.add(entry.sha256)
        return data


# --- the index, from the committed tables ----------------------------------------------


def manifests_present(archive: CommittedArchive) -> frozenset[str]:
    """The run ids of the manifests a read found, trusted or not (as ``present_runs`` lists them)."""
    untrusted = (layout.manifest_run_id(read.path) for read in archive.untrusted)
    return frozenset(run_id for run_id in (*(m["run_id"] for m in archive.manifests), *untrusted) if run_id)


def served_versions(archive: CommittedArchive) -> dict[str, ArchivedVersion]:
    """Each record's current version (storage.archive.history's rule, the one the archive
    writer applies) among the versions whose raw bytes a committed manifest lists."""
    versions: dict[str, ArchivedVersion] = {}

    def committed_rows() -> Iterator[pa.RecordBatch]:
        for entry in archive.table_files("records"):
            for batch in table_batches(archive.store, entry, RECORD_COLUMNS):
                keep = []
                for row in batch.to_pylist():
                    raw = archive.objects.get(row["raw_path"])
                    keep.append(raw is not None and raw.sha256 == row["raw_sha256"])
                    if raw is not None and keep[-1]:
                        versions[row["bundle_sha256"]] = ArchivedVersion(
                            row["pith_number"], row["bundle_sha256"], raw, row["source_version"] or 0, row["built_at"]
                        )
                    else:
                        logger.warning("%s: %s is not committed; not served", row["pith_number"], row["raw_path"])
                yield batch.filter(pa.array(keep, pa.bool_()))

    current = history.History.from_tables(committed_rows(), ())
    numbers = {version.pith_number for version in versions.values()}
    return {
        number: versions[version.bundle.hex()] for number in numbers if (version := current.current(number)) is not None
    }


def _rows(
    archive: CommittedArchive,
    table: str,
    partitions: Callable[[str | None], bool],
    columns: list[str],
    wanted: pa.Array,
) -> Iterator[dict]:
    """Rows of ``table`` whose partition value ``partitions`` accepts and whose
    bundle_sha256 is ``wanted`` (a served version)."""
    for entry in archive.table_files(table):
        if partitions(layout.partition_of(entry.path)[1]):
            for batch in table_batches(archive.store, entry, columns):
                yield from batch.filter(pc.is_in(batch.column("bundle_sha256"), value_set=wanted)).to_pylist()


def _aliases(archive: CommittedArchive, wanted: pa.Array) -> dict[str, list[str]]:
    """Alias values by bundle version; pith_short_* prefixes are searched, not listed."""
    aliases: dict[str, list[str]] = {}
    searched = lambda kind: kind is not None and not kind.startswith(SHORT_ALIAS_PREFIX)  # noqa: E731
    for row in _rows(archive, "aliases", searched, ["bundle_sha256", "alias_value"], wanted):
        if row["alias_value"] is not None:
            aliases.setdefault(row["bundle_sha256"], []).append(row["alias_value"])
    return aliases


def _cites(archive: CommittedArchive, wanted: pa.Array) -> dict[str, tuple[str, ...]]:
    """The suffixes each version's last graph snapshot cites, by bundle version."""
    cites: dict[str, tuple[str, ...]] = {}
    latest: dict[str, int] = {}
    columns = ["bundle_sha256", "event_index", "payload_json"]
    for row in _rows(archive, "events", lambda kind: kind == "graph_snapshot", columns, wanted):
        version = row["bundle_sha256"]
        if latest.get(version, -1) < row["event_index"]:
            latest[version] = row["event_index"]
            payload = orjson.loads(row["payload_json"])
            cites[version] = cited_suffixes(payload.get("graph_snapshot") if isinstance(payload, dict) else None)
    return cites


def _signed_by(archive: CommittedArchive, wanted: pa.Array) -> dict[str, str]:
    """The key that signed each version's record_created event, by bundle version."""
    rows = _rows(archive, "events", lambda kind: kind == "record_created", ["bundle_sha256", "key_id"], wanted)
    return {row["bundle_sha256"]: row["key_id"] for row in rows}


def _registry_signed(keyring: Keyring, key_id: str | None) -> bool:
    """Whether the tables say a pinned registry key signed this version."""
    key = keyring.get(key_id)
    return key is not None and key.role == REGISTRY
