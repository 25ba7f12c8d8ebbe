"""Audit an archive: re-check everything its committed manifests promise.

Every manifest is read and verified once (the log checks of ``storage.log_proofs``
take the key logs those reads give, ``Audit.logs()``); every object of every committed
manifest is read once, as a stream, and hashed as it goes; raw bundles are verified again (under
the one size rule of ``pith.parse``), table files' row counts are read from their
Parquet footers (the last bytes of the stream), attestation feeds are verified event
by event, and each key's chain must run through all its feeds from a null start.
Then one listing of the whole archive finds every file no manifest accounts for,
wherever it lies (``keys/``, ``manifests/``, unknown folders). Memory stays bounded
by one bundle, one feed line, the set of paths listed and a few hashes per feed.

Trust comes from the keyrings given, never from the archive: ``archive_keyring``
verifies manifests and attestations, ``bundle_keyring`` the bundles; each key must
also have the role the check needs (``pith.keyring``). A manifest signed by a key
that is not pinned at all is one manifest_unpinned finding: its objects are neither
checked nor orphans.
"""

import hashlib
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from functools import partial

import pyarrow as pa
import pyarrow.parquet as pq

from pith.attestation import Chain, read_attestation, read_repair, split_lines
from pith.keyring import Keyring
from pith.parse import DEFAULT_MAX_BYTES, PADDING_BYTES, PADDING_RATIO
from pith.reasons import Finding, Rejected
from pith.verify import verify_bundle
from storage.archive import layout
from storage.archive.manifest import Superseded, listed, read_manifests, superseding
from storage.archive.stores import ObjectInfo, ObjectMissing, ObjectStore
from storage.capture.warc_check import record_problems
from storage.transparency.key_logs import KeyLog, LogPart, log_part, logs_of

logger = logging.getLogger(__name__)


TAIL_BYTES = 1 << 20  # kept from the end of a table file: its Parquet footer


@dataclass(frozen=True)
class Discrepancy:
    code: Finding
    path: str  # the archive path it concerns
    detail: str = ""
    key_id: str | None = None  # manifest_unpinned: the key that signs the manifest
    reason: str | None = None  # bundle_rejected: the verdict's reason (unknown_key, ...)

    def line(self) -> str:
        return f"{self.code} {self.path} {self.detail}".rstrip()

    def as_dict(self) -> dict:
        return {name: value for name, value in asdict(self).items() if value is not None}


Check = Callable[[ObjectInfo, Iterable[bytes]], Iterator[Discrepancy]]  # reads an object's stream, says what is wrong


@dataclass
class AuditCounts:
    manifests: int = 0
    objects: int = 0
    bytes: int = 0
    bundles: int = 0
    merge_inferred: int = 0  # verified bundles whose merge rule is only inferred (not discrepancies)
    attestations: int = 0
    discrepancies: Counter = field(default_factory=Counter)

    @property
    def clean(self) -> bool:
        return not self.discrepancies

    def as_dict(self) -> dict:
        return {
            "manifests": self.manifests,
            "objects": self.objects,
            "bytes": self.bytes,
            "bundles": self.bundles,
            "merge_inferred": self.merge_inferred,
            "attestations": self.attestations,
            "discrepancies": dict(sorted(self.discrepancies.items())),
            "clean": self.clean,
            "size_rule": SIZE_RULE,
        }


# the size rule raw bundles were checked with: the one the crawl admits by (pith.parse)
SIZE_RULE = {"max_bytes": DEFAULT_MAX_BYTES, "padding_ratio": PADDING_RATIO, "padding_bytes": PADDING_BYTES}


def parquet_rows(tail: bytes) -> int:
    """The row count in a Parquet file's footer, given the file's last bytes."""
    if len(tail) < 12 or tail[-4:] != b"PAR1":
        raise ValueError("no Parquet footer")
    size = int.from_bytes(tail[-8:-4], "little")
    if size + 8 > len(tail):
        raise ValueError(f"a {size}-byte footer is larger than the {len(tail)} bytes kept")
    return pq.ParquetFile(pa.BufferReader(b"PAR1" + tail[-8 - size :])).metadata.num_rows


class _Hashed:
    """An object's chunks, hashed and counted as a check reads them."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = chunks
        self.digest = hashlib.sha256()
        self.size = 0

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            self.digest.update(chunk)
            self.size += len(chunk)
            yield chunk


class Audit:
    """One pass over an archive: iterate ``run()`` for the discrepancies as they are
    found; ``counts`` holds the totals."""

    def __init__(
        self,
        store: ObjectStore,
        bundle_keyring: Keyring,
        archive_keyring: Keyring,
        on_object: Callable[[AuditCounts], None] | None = None,
    ) -> None:
        """``on_object(counts)``, if given, is called after each object is checked."""
        self.store = store
        self.bundle_keyring = bundle_keyring
        self.archive_keyring = archive_keyring
        self.counts = AuditCounts()
        self._on_object = on_object
        self._chain = Chain()
        self._checked: set[tuple[str, str]] = set()
        self._accounted: set[str] = set()  # manifests and what they list, trusted or not
        self._log_parts: list[LogPart] = []  # what each trusted manifest adds to its key's log
        self.damaged: list[tuple[ObjectInfo, Finding]] = []  # objects missing or not as listed: what a repair fetches
        self.repairs: list[dict] = []  # the repair events of the archive's repair feeds, checked
        self.superseded: dict[str, Superseded] = {}  # listed files a repair rebuilt: not checked again

    def run(self) -> Iterator[Discrepancy]:
        unpinned_by: dict[tuple[str, str], list[tuple[str, int]]] = {}  # (key_id, fingerprint): (manifest, objects)
        self.superseded = superseding(self.store, self.archive_keyring)
        for read in read_manifests(self.store, self.archive_keyring):
            self._accounted.add(read.path)
            unpinned = getattr(read.error, "unpinned", None)
            if read.manifest is not None:
                self.counts.manifests += 1
                part = log_part(read.manifest)
                if part is not None:
                    self._log_parts.append(part)
                    # the one object no manifest lists: checked by storage.log_proofs instead
                    self._accounted.add(layout.published_checkpoint(part.key_id))
                objects = listed(read.manifest)
                self._accounted.update(entry.path for entry in objects)
                yield from self._manifest(read.manifest, objects)
            elif unpinned is not None:
                self._accounted.update(entry["path"] for entry in unpinned["objects"])
                signature = unpinned["signature"]
                self._accounted.add(layout.published_checkpoint(signature["key_id"]))
                unpinned_by.setdefault((signature["key_id"], signature.get("public_key_fingerprint")), []).append(
                    (read.path, len(unpinned["objects"]))
                )
            else:
                yield self._found(Finding.MANIFEST_INVALID, read.path, getattr(read.error, "reason", str(read.error)))
        for (key_id, fingerprint), manifests in unpinned_by.items():
            more = f" and {len(manifests) - 1} more manifests" if len(manifests) > 1 else ""
            yield self._found(
                Finding.MANIFEST_UNPINNED,
                manifests[0][0],
                f"signed{more} by {key_id} (fingerprint {fingerprint}), which is not pinned: "
                f"{sum(n for _, n in manifests)} objects not checked",
                key_id=key_id,
            )
        for stretch, why in self._chain.breaks(rooted=True):
            yield self._found(Finding.CHAIN_BROKEN, stretch.source, f"{stretch.where}.prev_event: {why}")
        for stored in self.store.list():
            old = self.superseded.get(stored.path)
            if old is not None:  # back where a rebuilt file replaced it: a folder's readers would read both
                yield self._found(Finding.ORPHAN, stored.path, f"{stored.size} bytes, superseded by {old.by}")
            elif stored.path not in self._accounted:
                yield self._found(Finding.ORPHAN, stored.path, f"{stored.size} bytes")

    def logs(self) -> dict[str, KeyLog]:
        """Each key's committed log, as the manifests ``run()`` verified give it."""
        return logs_of(self._log_parts)

    def _found(
        self, code: Finding, path: str, detail: str = "", key_id: str | None = None, reason: str | None = None
    ) -> Discrepancy:
        self.counts.discrepancies[code] += 1
        return Discrepancy(code, path, detail, key_id, reason)

    def _manifest(self, manifest: dict, objects: list[ObjectInfo]) -> Iterator[Discrepancy]:
        by_path = {entry.path: entry for entry in objects}
        attested_before = self.counts.attestations
        rows: Counter[str] = Counter()
        for entry in objects:
            if entry.table is not None:
                rows[entry.table] += entry.rows or 0
            old = self.superseded.get(entry.path)
            if old is not None and old.sha256 == entry.sha256:  # its damaged copy is in quarantine, evidence
                continue
            if entry.table is not None:
                check = self._table
            elif entry.path.startswith(f"{layout.RAW}/"):
                check = self._bundle
            elif layout.is_warc(entry.path):
                check = self._warc
            elif layout.is_attestation_feed(entry.path):
                check = partial(self._feed, run_id=manifest["run_id"], by_path=by_path)
            elif layout.is_repair_feed(entry.path):
                check = self._repair_feed
            else:
                check = self._hash_only
            yield from self._object(entry, check)
        path = layout.manifest(manifest["run_id"])
        archive = manifest.get("stats", {}).get("archive", {})
        for table, total in sorted(archive.get("rows", {}).items()):
            if total != rows[table]:
                yield self._found(
                    Finding.ROWS_MISMATCH, path, f"{table}: the stats say {total}, its files hold {rows[table]}"
                )
        attested = self.counts.attestations - attested_before
        if archive.get("verified", attested) != attested:
            yield self._found(
                Finding.ATTESTATION_INVALID,
                path,
                f"the run archived {archive['verified']} versions and attested {attested}",
            )

    def _object(self, entry: ObjectInfo, check: Check) -> Iterator[Discrepancy]:
        """Read the object once, hashed as ``check(entry, stream)`` reads it (yielding
        what it finds); then compare the hash and size with the entry."""
        path = entry.path
        if (path, entry.sha256) in self._checked:  # listed again by a later run (keys/, quarantine/)
            return
        self._checked.add((path, entry.sha256))
        stream = _Hashed(self.store.read_chunks(path))
        try:
            findings = list(check(entry, stream))
        except ObjectMissing:
            self.damaged.append((entry, Finding.MISSING))
            yield self._found(Finding.MISSING, path)
            return
        self.counts.objects += 1
        self.counts.bytes += stream.size
        if self._on_object is not None:
            self._on_object(self.counts)
        if stream.size != entry.size:
            self.damaged.append((entry, Finding.SIZE_MISMATCH))
            yield self._found(Finding.SIZE_MISMATCH, path, f"{stream.size} bytes, listed as {entry.size}")
        elif stream.digest.hexdigest() != entry.sha256:
            self.damaged.append((entry, Finding.HASH_MISMATCH))
            yield self._found(
                Finding.HASH_MISMATCH, path, f"sha256 {stream.digest.hexdigest()}, listed as {entry.sha256}"
            )
        yield from findings

    # --- checks by kind: each reads the whole stream --------------------------------
    @staticmethod
    def _hash_only(entry: ObjectInfo, stream: Iterable[bytes]) -> Iterator[Discrepancy]:
        for _ in stream:
            pass
        yield from ()

    def _bundle(self, entry: ObjectInfo, stream: Iterable[bytes]) -> Iterator[Discrepancy]:
        data = bytearray()
        for chunk in stream:
            if len(data) <= DEFAULT_MAX_BYTES:  # past it the verdict is too_large anyway
                data += chunk
        self.counts.bundles += 1
        verdict = verify_bundle(bytes(data), self.bundle_keyring)
        if verdict.ok and not verdict.merge_confirmed:
            self.counts.merge_inferred += 1
        if not verdict.ok:
            yield self._found(
                Finding.BUNDLE_REJECTED,
                entry.path,
                f"{verdict.reason} at {verdict.path or '<document>'}: {verdict.detail}",
                reason=verdict.reason,
            )

    def _warc(self, entry: ObjectInfo, stream: Iterable[bytes]) -> Iterator[Discrepancy]:
        for problem in record_problems(stream):
            yield self._found(Finding.WARC_INVALID, entry.path, problem)

    def _table(self, entry: ObjectInfo, stream: Iterable[bytes]) -> Iterator[Discrepancy]:
        tail = b""
        for chunk in stream:
            tail = (tail + chunk)[-TAIL_BYTES:]
        try:
            rows = parquet_rows(tail)
        except (ValueError, OSError, pa.ArrowException) as exc:
            yield self._found(Finding.ROWS_MISMATCH, entry.path, f"unreadable footer: {exc}")
            return
        if rows != entry.rows:
            yield self._found(Finding.ROWS_MISMATCH, entry.path, f"{rows} rows, listed as {entry.rows}")

    def _feed(
        self, entry: ObjectInfo, stream: Iterable[bytes], *, run_id: str, by_path: dict[str, ObjectInfo]
    ) -> Iterator[Discrepancy]:
        self._chain.feed(entry.path)
        for index, line in enumerate(split_lines(stream)):
            where = f"lines[{index}]"
            try:
                event = read_attestation(line, self.archive_keyring, where)
            except Rejected as exc:
                self._chain.lose_track()
                yield self._found(Finding.ATTESTATION_INVALID, entry.path, str(exc))
                continue
            self.counts.attestations += 1
            mismatch = _unlisted(event["payload"], run_id, by_path)
            if mismatch:
                yield self._found(
                    Finding.ATTESTATION_INVALID, entry.path, f"attestation_mismatch at {where}.payload: {mismatch}"
                )
            try:
                self._chain.follow(event, where)
            except Rejected as exc:
                yield self._found(Finding.CHAIN_BROKEN, entry.path, f"{exc.path}: {exc.detail}")

    def _repair_feed(self, entry: ObjectInfo, stream: Iterable[bytes]) -> Iterator[Discrepancy]:
        """Each line a repair event signed by a pinned archive key: the archive's repair history."""
        for index, line in enumerate(split_lines(stream)):
            try:
                self.repairs.append(read_repair(line, self.archive_keyring, f"lines[{index}]"))
            except Rejected as exc:
                yield self._found(Finding.ATTESTATION_INVALID, entry.path, str(exc))


def _unlisted(payload: dict, run_id: str, by_path: dict[str, ObjectInfo]) -> str:
    """Why an attestation does not match what its run's manifest lists ('' if it does)."""
    if payload["run_id"] != run_id:
        return f"names run {payload['run_id']}"
    entry = by_path.get(payload["raw_path"])
    if entry is None:
        return f"{payload['raw_path']} is not listed"
    if (entry.sha256, entry.size) != (payload["raw_sha256"], payload["size"]):
        return f"{payload['raw_path']} is listed with another sha256 or size"
    return ""
