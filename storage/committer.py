"""Committing a segment of a run, in the order that keeps a crash harmless: once its
raw objects are stored, sign their attestations (continuing the key's chain), close
its tables, store the attestation feed, grow the key's transparency log, publish the
key document, and write the signed manifest last. Until the manifest exists, all of
it is an orphan no reader trusts."""

import json
import logging
from itertools import islice

from pith.canonical import canon
from pith.keyring import ARCHIVE, KeyringError, key_from_entry
from pith.merkle import Frontier
from pith.signing import Signer
from . import layout
from .attestations import AttestationFeed, FeedSpool, chain_head_of
from .manifest import build_manifest, commit_manifest, sign_manifest
from .segment import Segment
from .stores import ObjectExists, ObjectInfo, ObjectStore
from .rows import attestation_row
from .tlog import LogAppender, key_logs, read_log

logger = logging.getLogger(__name__)

SIGN_BATCH = 256  # attestations signed between two takings of the rows lock


class Committer:
    """Writes the manifests of one signer's runs. Its attestation chain and log start
    where the committed archive left them, once ``resume`` has read that."""

    def __init__(self, store: ObjectStore, signer: Signer, worker: str):
        self.store = store
        self.signer = signer
        self.worker = worker
        self._feed: AttestationFeed | None = None
        self._log: LogAppender | None = None

    def resume(self, manifests: list[dict]) -> str | None:
        """Continue this signer's chain and log from the committed ``manifests`` (none:
        a new chain). Returns the chain's head."""
        head = chain_head_of(self.store, manifests, self.signer)
        self._feed = AttestationFeed(self.signer, self.store.uri, head)
        self._log = LogAppender(
            self.signer, self.store.uri, read_log(self.store, key_logs(manifests).get(self.signer.key_id), Frontier())
        )
        return head

    def commit(self, segment: Segment, stats: dict | None, params: dict | None) -> str:
        """Commit ``segment``; returns its manifest's path. StorageError, and no
        manifest, if any write of the run failed."""
        try:
            segment.settle()  # every raw object stored: now it can be attested
            self._attest(segment)
            segment.record(self._publish_key())
            objects = segment.objects()
            manifest = build_manifest(
                run_id=segment.run_id,
                worker=self.worker,
                started_at=segment.started_at,
                objects=objects,
                params=params or {},
                stats={**(stats or {}), "archive": segment.archive_stats(objects)},
            )
            return commit_manifest(self.store, sign_manifest(manifest, self.signer)).path
        finally:
            segment.ledger.discard()

    def _attest(self, segment: Segment) -> None:
        """Sign, table, store and log the attestations ``segment`` owes; then close its
        tables and wait for every upload."""
        feed = FeedSpool(segment.spool_dir)
        try:
            signed = self._feed.seal(segment.ledger.owed(), segment.run_id)
            # signed outside the rows lock, which the crawl's next segment needs meanwhile
            while batch := [attestation_row(feed.add(event)) for event in islice(signed, SIGN_BATCH)]:
                segment.add_rows("attestations", batch)
            segment.close_tables()
            feed.close()
            segment.settle()
            if feed.leaves:
                segment.record(self.store.put_file(layout.attestation_feed(segment.run_id), feed.path))
                for info in self._log.extend(self.store, segment.run_id, bytes(feed.leaves)):
                    segment.record(info)
        finally:
            feed.discard()

    def _publish_key(self) -> ObjectInfo:
        """Store this signer's key document, or keep the one an earlier run stored for
        the same key (written before key documents named their role)."""
        try:
            return self.store.put_bytes(
                layout.key_document(self.signer.key_id), canon(self.signer.archive_key_document()) + b"\n"
            )
        except ObjectExists as exc:
            try:
                stored = key_from_entry(json.loads(self.store.get_bytes(exc.existing.path)), ARCHIVE)
            except (ValueError, KeyringError):  # JSONDecodeError is a ValueError
                raise exc from None
            if stored != self.signer.pinned():
                raise
            return exc.existing
