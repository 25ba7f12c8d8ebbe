"""Committing a run, in the order that keeps a crash harmless: once its
raw objects are stored, sign their attestations (continuing the key's chain), close
its tables, store the attestation feed, grow the key's transparency log (its tiles),
publish the key document, write the signed manifest, then publish the log's new
checkpoint. Until the manifest exists, all of
it is an orphan no reader trusts."""

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from itertools import islice

from pith.canonical import canon
from pith.keyring import ARCHIVE, KeyringError, key_from_entry
from pith.signing import Signer
from storage.archive import layout
from storage.archive.layout import TABLE_NAMES
from storage.archive.manifest import build_manifest, commit_manifest, sign_manifest
from storage.archive.rows import attestation_row
from storage.archive.stores import ObjectExists, ObjectInfo, ObjectStore, StorageError
from storage.transparency.attestations import AttestationFeed, FeedSpool, chain_head_of
from storage.transparency.key_logs import key_logs
from storage.transparency.tiles import TiledLog, publish
from storage.writing.open_run import OpenRun

logger = logging.getLogger(__name__)

SIGN_BATCH = 256  # attestations signed between two takings of the rows lock


class RunCommitter:
    """Writes the manifests of one signer's runs. Its attestation chain and log start
    where the committed archive left them, once ``resume`` has read that."""

    def __init__(self, store: ObjectStore, signer: Signer, worker: str, log_origin: str | None = None):
        """``log_origin`` names the key's log if it has no checkpoint yet (``pith.checkpoint.log_origin``)."""
        self.store = store
        self.signer = signer
        self.worker = worker
        self.log_origin = log_origin
        self._feed: AttestationFeed | None = None
        self._log: TiledLog | None = None
        self._note: str | None = None  # the checkpoint to publish once the manifest is committed

    def resume(self, manifests: list[dict]) -> str | None:
        """Continue this signer's chain and log from the committed ``manifests`` (none:
        a new chain). Returns the chain's head."""
        head = chain_head_of(self.store, manifests, self.signer)
        self._feed = AttestationFeed(self.signer, self.store.uri, head)
        self._log = TiledLog.resume(
            self.store, self.signer, key_logs(manifests).get(self.signer.key_id), self.log_origin
        )
        return head

    def commit(self, open_run: OpenRun, stats: dict | None, params: dict | None) -> str:
        """Commit ``run``; returns its manifest's path. StorageError, and no
        manifest, if any write of the run failed."""
        try:
            open_run.settle()  # every raw object stored: now it can be attested
            self._attest(open_run)
            open_run.record(self._publish_key())
            objects = open_run.objects()
            manifest = build_manifest(
                run_id=open_run.run_id,
                worker=self.worker,
                started_at=open_run.started_at,
                objects=objects,
                params=params or {},
                stats={**(stats or {}), "archive": open_run.archive_stats(objects)},
            )
            path = commit_manifest(self.store, sign_manifest(manifest, self.signer)).path
            if self._note is not None:
                publish(self.store, self.signer.key_id, self._note)
            return path
        finally:
            self._note = None
            open_run.ledger.discard()

    def _attest(self, open_run: OpenRun) -> None:
        """Sign, table, store and log the attestations ``run`` owes; then close its
        tables and wait for every upload."""
        if self._feed is None or self._log is None:
            raise StorageError(f"run {open_run.run_id} commits before the committer resumed the archive's chain")
        feed = FeedSpool(open_run.spool_dir)
        try:
            signed = self._feed.seal(open_run.ledger.owed(), open_run.run_id)
            with ThreadPoolExecutor(1, thread_name_prefix="pith-tables") as pool:
                # the other tables are written meanwhile (pyarrow and the signing let go of the GIL)
                others = pool.submit(open_run.close_tables, [name for name in TABLE_NAMES if name != "attestations"])
                # signed outside the rows lock, which the crawl's next run needs meanwhile
                while batch := [attestation_row(feed.add(event)) for event in islice(signed, SIGN_BATCH)]:
                    open_run.add_rows("attestations", batch)
            others.result()
            open_run.close_tables(["attestations"])
            feed.close()
            open_run.settle()
            if feed.count:
                open_run.record(self.store.put_file(layout.attestation_feed(open_run.run_id), feed.path))
                written, self._note = self._log.extend(self.store, feed.entries())
                for info in written:
                    open_run.record(info)
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
