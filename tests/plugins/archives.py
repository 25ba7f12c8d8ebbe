"""Archives written straight through the real ArchiveWriter from corpus bundles (no
crawl: seconds faster), and new versions of corpus bundles, for the tests that read
archives back (serving, export)."""

import copy
import json
from datetime import datetime, timezone
from pathlib import Path

from pith.events import new_event
from pith.keyring import Keyring
from pith.signing import Signer
from pith.verify import verify_bundle
from pith_testkit.corpus import corpus_signer
from pith_testkit.mint import seal, sign_bundle
from storage.archive.stores import ObjectStore
from storage.serving.record import compact_json
from storage.serving.source import BUNDLES_DIR
from storage.writing.table_writer import RollPolicy
from storage.writing.writer import ArchiveWriter
from tests.plugins.mirror import SMALL_CORPUS_SEED

FETCHED_AT = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)


def corpus_raws(corpus_dir: Path) -> dict[str, bytes]:
    """Every bundle of the corpus, exact bytes by suffix, in suffix order."""
    return {p.name.split(".")[0]: p.read_bytes() for p in sorted((corpus_dir / BUNDLES_DIR).glob("*.bundle.json"))}


def write_run(
    store: ObjectStore,
    signer: Signer,
    keyring: Keyring,
    raws,
    *,
    rejected=(),
    worker: str = "w0",
    fetched_at: datetime = FETCHED_AT,
    commit: bool = True,
    log_origin: str | None = None,
    policy: RollPolicy = RollPolicy(),
) -> str | None:
    """Archive ``raws`` (each must verify under ``keyring``) and quarantine ``rejected``
    in one run; commit it (returns the manifest path) or abort it (leaves orphans).
    ``log_origin``: the name of the signer's log, if it has none yet; ``policy``: how its
    table files are rolled."""
    writer = ArchiveWriter(store, signer, worker=worker, log_origin=log_origin, policy=policy).open()
    for raw in [*raws, *rejected]:
        verdict = verify_bundle(raw, keyring)
        add = writer.add_verified if verdict.ok else writer.add_rejected
        assert verdict.ok == (raw not in rejected), verdict
        add(raw, verdict, f"http://127.0.0.1/{len(raw)}", fetched_at).result()
    if commit:
        return writer.commit(stats={}, params={"test": True})
    writer.abort()
    return None


def rebuilt(raw: bytes, built_at: str) -> bytes:
    """A new version of a corpus bundle: the same record rebuilt at ``built_at`` and
    signed again by the corpus key, so it verifies with a new bundle_sha256."""
    bundle = json.loads(raw)
    bundle["built_at"] = built_at
    return compact_json(sign_bundle(bundle, corpus_signer(SMALL_CORPUS_SEED), built_at))


def forked(raw: bytes, built_at: str) -> bytes:
    """A version of a corpus bundle built at ``built_at`` without its graph snapshot:
    it verifies, but is not append-only (it lacks events of the original)."""
    bundle = json.loads(raw)
    bundle["events"] = bundle["events"][:1]
    bundle["built_at"] = built_at
    return compact_json(seal(bundle, corpus_signer(SMALL_CORPUS_SEED), built_at))


def extended(raw: bytes, built_at: str, replace_last: bool = False) -> bytes:
    """The append-only successor of a corpus bundle: every event kept, one new graph
    snapshot appended, rebuilt at ``built_at`` and signed by the corpus key. With
    ``replace_last``, the new snapshot takes the place of the last event instead: a
    fork of the original (the same record, another history), validly signed."""
    signer = corpus_signer(SMALL_CORPUS_SEED)
    bundle = json.loads(raw)
    snapshot = copy.deepcopy(bundle["events"][-1]["payload"])
    snapshot["graph_snapshot"]["claims"]["count"] += 1
    if replace_last:
        del bundle["events"][-1]
    bundle["events"].append(
        new_event(signer, "graph_snapshot", bundle["pith_number"], "graph", snapshot, built_at, built_at)
    )
    bundle["built_at"] = built_at
    return compact_json(seal(bundle, signer, built_at))


def tampered(raw: bytes) -> bytes:
    """The bundle with its signed primary category changed: rejected on verification."""
    return raw.replace(b'"primary_cat":"', b'"primary_cat":"X', 1)
