"""A whole run through the ArchiveWriter on both backends: raw bytes, quarantine,
tables read back by pyarrow and DuckDB, a manifest that matches what is stored,
dedup against earlier runs, and no manifest when anything failed."""

import copy
import hashlib
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timezone

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from pith.verify import verify_bundle
from storage.archive import layout
from storage.archive.manifest import committed_manifests, verify_manifest
from storage.archive.reader import CommittedArchive
from storage.archive.s3_store import S3Store
from storage.archive.stores import ObjectMissing, StorageError
from storage.writing.table_writer import RollPolicy
from storage.writing.uploads import BoundedUploader
from storage.writing.writer import ArchiveWriter
from tests.plugins.archives import corpus_raws
from tests.plugins.faults import audit_archive
from tests.plugins.s3 import arrow_filesystem, local_copy
from tests.plugins.tables import read_rows

FETCHED = datetime(2026, 11, 22, 5, 30, tzinfo=timezone.utc)
RUN = "20261122T053000Z-w0-0123abcd"


@pytest.fixture(scope="module")
def verified(real_raw, registry_keyring):
    """(url, raw, verdict) of each real bundle."""
    return [
        (f"https://pith.science/pith/{suffix}/bundle.json", raw, verify_bundle(raw, registry_keyring))
        for suffix, raw in sorted(real_raw.items())
    ]


@pytest.fixture(scope="module")
def rejected(real_raw, registry_keyring):
    raw = real_raw["6VARSBRX6E3HDBTBZP3WZOXG6B"].replace(b'"target":"graph"', b'"target":"graf"', 1)
    return "https://pith.science/pith/6VARSBRX6E3HDBTBZP3WZOXG6B/bundle.json", raw, verify_bundle(raw, registry_keyring)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_run_archives_verified_and_rejected_bundles(
    store, verified, rejected, test_signer, test_keyring, tmp_path, registry_keyring
):
    uploader = BoundedUploader(max_bytes_in_flight=20_000, workers=2)  # tighter than two bundles
    writer = ArchiveWriter(store, test_signer, run_id=RUN, uploader=uploader).open()
    stored = [writer.add_verified(raw, verdict, url, FETCHED).result(30) for url, raw, verdict in verified]
    url, bad, verdict = rejected
    quarantined = writer.add_rejected(bad, verdict, url, FETCHED).result(30)
    path = writer.commit(stats={"pages": 4}, params={"seeds": ["https://pith.science/"]})
    uploader.close()

    assert path == layout.manifest(RUN)
    manifest = verify_manifest(store.get_bytes(path), test_keyring)
    # raw objects are the exact bytes, at their content address
    for info, (_, raw, _) in zip(stored, verified):
        assert info.path == layout.raw_bundle(sha(raw)) and store.get_bytes(info.path) == raw
    assert quarantined.path == layout.quarantined(sha(bad)) and store.get_bytes(quarantined.path) == bad
    reason = json.loads(store.get_bytes(layout.quarantine_reason(sha(bad))))
    assert (reason["reason"], reason["path"], reason["raw_sha256"]) == (
        "event_hash_mismatch",
        "events[1].content_sha256",
        sha(bad),
    )
    # every manifest entry matches its object; nothing else lies in the archive
    tables = {}
    for entry in manifest["objects"]:
        assert store.digest(entry["path"]).entry() == {k: entry[k] for k in ("path", "sha256", "size")}
        if "table" in entry:
            metadata = pq.read_metadata(pa.BufferReader(store.get_bytes(entry["path"])))
            assert metadata.num_rows == entry["rows"]
            tables.setdefault(entry["table"], []).append(entry["path"])
    assert audit_archive(store, test_keyring, registry_keyring).paths("orphan") == []
    assert len(tables["records"]) == 2  # one file per year, not one per bundle
    assert manifest["stats"]["pages"] == 4 and manifest["crawl"] == {"seeds": ["https://pith.science/"]}
    assert manifest["stats"]["archive"]["rows"] == {
        "records": 3,
        "events": 6,
        "aliases": 18,
        "verifications": 4,
        "attestations": 3,
        "captures": 0,  # no WARC: this writer was given no exchange
    }
    assert (manifest["stats"]["archive"]["verified"], manifest["stats"]["archive"]["rejected"]) == (3, 1)

    filesystem, base = arrow_filesystem(store)
    records = ds.dataset(f"{base}/tables/records", filesystem=filesystem, partitioning="hive").to_table()
    assert sorted(records.column("pith_number").to_pylist()) == sorted(v.pith_number for _, _, v in verified)
    assert sorted(records.column("year").to_pylist()) == [2018, 2019, 2019]
    assert records.schema.field("submitted_at").type == pa.timestamp("us", tz="UTC")
    assert set(records.column("raw_path").to_pylist()) == {info.path for info in stored}

    folder = local_copy(store, tmp_path / "copy")
    events, verifications, aliases, records = (
        f"read_parquet('{folder}/tables/{name}/**/*.parquet', hive_partitioning=true)"
        for name in ("events", "verifications", "aliases", "records")
    )
    assert duckdb.sql(f"SELECT event_type, count(*) FROM {events} GROUP BY 1 ORDER BY 1").fetchall() == [
        ("graph_snapshot", 3),
        ("record_created", 3),
    ]
    assert duckdb.sql(f"SELECT status, reason, count(*) FROM {verifications} GROUP BY ALL ORDER BY 1").fetchall() == [
        ("rejected", "event_hash_mismatch", 1),
        ("verified", None, 3),
    ]
    assert duckdb.sql(f"SELECT alias_value FROM {aliases} WHERE alias_kind = 'doi' ORDER BY 1").fetchall() == [
        ("10.48550/arxiv.1811.05233",),
        ("10.48550/arxiv.1901.02244",),
        ("10.48550/arxiv.1904.12043",),
    ]
    assert duckdb.sql(
        f"SELECT source_id FROM {records} WHERE primary_category = 'cs.DC' "
        "OR list_contains(cross_categories, 'cs.DC') ORDER BY 1"
    ).fetchall() == [("1901.02244",), ("1904.12043",)]


def test_a_bundle_version_is_archived_once(store, verified, test_signer, test_keyring):
    first = ArchiveWriter(store, test_signer).open()
    for url, raw, verdict in verified + verified[:1]:  # one seen twice within the run
        first.add_verified(raw, verdict, url, FETCHED)
    first.commit()
    second = ArchiveWriter(store, test_signer).open()
    again = [second.add_verified(raw, verdict, url, FETCHED).result(30) for url, raw, verdict in verified]
    second_path = second.commit()
    assert again == [None, None, None]

    second_manifest = json.loads(store.get_bytes(second_path))
    assert {e.get("table") for e in second_manifest["objects"]} == {"verifications", None}
    assert not any(e["path"].startswith("raw/") for e in second_manifest["objects"])
    records, verifications = [], []
    for path, entry in CommittedArchive.read(store, test_keyring).objects.items():
        table = pq.read_table(pa.BufferReader(store.get_bytes(path))) if entry.table else None
        if entry.table == "records":
            records += table.column("bundle_sha256").to_pylist()
        elif entry.table == "verifications":
            verifications += table.column("duplicate").to_pylist()
    assert sorted(records) == sorted(v.bundle_sha256 for _, _, v in verified)
    assert sorted(verifications) == [False] * 3 + [True] * 4


def test_a_failed_write_means_no_manifest(store, verified, test_signer):
    squatted = layout.table_part("verifications", "fetch_date=2026-11-22", RUN, 0)
    store.put_bytes(squatted, b"another run's file under this name")
    writer = ArchiveWriter(store, test_signer, run_id=RUN).open()
    url, raw, verdict = verified[0]
    writer.add_verified(raw, verdict, url, FETCHED).result(30)
    with pytest.raises(StorageError, match="already exists"):
        writer.commit()
    with pytest.raises(ObjectMissing):
        store.get_bytes(layout.manifest(RUN))
    with pytest.raises(StorageError):
        writer.add_verified(raw, verdict, url, FETCHED)


def test_an_unreachable_store_fails_the_run(s3_env, refused_port, verified, test_signer):
    store = S3Store("pith-test", endpoint_url=f"http://127.0.0.1:{refused_port}", max_attempts=1)
    with pytest.raises(StorageError, match="connection refused"):
        ArchiveWriter(store, test_signer).open()  # reading committed manifests for dedup fails first
    writer = ArchiveWriter(store, test_signer, dedup=False).open()
    url, raw, verdict = verified[0]
    with pytest.raises(StorageError):
        writer.add_verified(raw, verdict, url, FETCHED).result(30)
    with pytest.raises(StorageError, match="failed"):
        writer.add_verified(raw, verdict, url, FETCHED)
    with pytest.raises(StorageError):
        writer.commit()


def test_the_roll_policy_reaches_the_files(store, verified, test_signer):
    writer = ArchiveWriter(store, test_signer, policy=RollPolicy(max_rows=2, row_group_rows=2)).open()
    for url, raw, verdict in verified:
        writer.add_verified(raw, verdict, url, FETCHED)
    manifest = json.loads(store.get_bytes(writer.commit()))
    rows = sorted(
        e["rows"] for e in manifest["objects"] if e["path"].startswith("tables/events/event_type=record_created/")
    )
    assert rows == [1, 2]


def test_abort_writes_no_manifest(store, verified, test_signer, test_keyring, registry_keyring):
    writer = ArchiveWriter(store, test_signer, run_id=RUN).open()
    url, raw, verdict = verified[0]
    writer.add_verified(raw, verdict, url, FETCHED).result(30)
    writer.abort()
    assert [s.path for s in store.list("manifests/")] == []
    assert audit_archive(store, test_keyring, registry_keyring).paths("orphan") == [layout.raw_bundle(sha(raw))]
    with pytest.raises(StorageError, match="aborted"):
        writer.commit()


# --- interim commits: a long run commits as it goes ------------------------------------


def run_of(manifest_path: str) -> str:
    return manifest_path.rsplit("/", 1)[1].removesuffix(".json")


def records_by_manifest(store, keyring) -> dict[str, list[str]]:
    """run id -> the bundle versions its records files list."""
    found = {}
    for manifest in committed_manifests(store, keyring):
        found[manifest["run_id"]] = [
            row["bundle_sha256"] for row in read_rows(store, "records", columns=["bundle_sha256"], manifest=manifest)
        ]
    return found


def test_interim_commits_commit_as_the_run_goes_and_chain_the_attestations(
    store, verified, test_signer, test_keyring, registry_keyring
):
    writer = ArchiveWriter(store, test_signer, run_id=RUN).open()
    (url1, raw1, v1), (url2, raw2, v2), (url3, raw3, v3) = verified
    writer.add_verified(raw1, v1, url1, FETCHED)
    assert writer.pending_bundles() == 1
    first = writer.commit_interim(stats={"n": 1})
    assert first == layout.manifest(RUN) and writer.pending_bundles() == 0
    # committed already: readable, attested, and what a later run dedups against
    assert records_by_manifest(store, test_keyring) == {RUN: [v1.bundle_sha256]}
    writer.add_verified(raw2, v2, url2, FETCHED)
    assert writer.add_verified(raw1, v1, url1, FETCHED).result(30) is None  # in the first run: a duplicate
    second = writer.commit_interim()
    writer.add_verified(raw3, v3, url3, FETCHED)
    last = writer.commit()

    manifests = {m["run_id"]: m for m in committed_manifests(store, test_keyring)}
    assert len({first, second, last}) == 3 and len(manifests) == 3
    by_run = records_by_manifest(store, test_keyring)
    assert sorted(v for versions in by_run.values() for v in versions) == sorted(
        v.bundle_sha256 for _, _, v in verified
    )  # each version listed once
    assert [manifests[run_of(p)]["stats"]["archive"]["verified"] for p in (first, second, last)] == [1, 1, 1]
    assert manifests[run_of(second)]["stats"]["archive"]["duplicates"] == 1
    assert writer.counts()["verified"] == 3
    # one chain over the three runs, in order
    feeds = [json.loads(store.get_bytes(layout.attestation_feed(run_of(p)))) for p in (first, second, last)]
    assert [f["prev_event"] for f in feeds] == [None, feeds[0]["event_id"], feeds[1]["event_id"]]
    assert [f["payload"]["run_id"] for f in feeds] == [run_of(p) for p in (first, second, last)]
    assert audit_archive(store, test_keyring, registry_keyring).paths("orphan") == []


@pytest.mark.slow
def test_adds_during_an_interim_commit_go_to_the_next_run(store, corpus_dir, corpus_keyring, test_signer, test_keyring):
    """Interim commits run in a thread while the crawl keeps adding: nothing falls between."""
    versions = [
        (f"http://127.0.0.1/{suffix}", raw, verify_bundle(raw, corpus_keyring))
        for suffix, raw in corpus_raws(corpus_dir).items()
    ]
    writer = ArchiveWriter(store, test_signer, policy=RollPolicy(row_group_rows=3, read_bytes=4096)).open()
    with ThreadPoolExecutor(2) as pool:
        interim_commits = []
        for i, (url, raw, verdict) in enumerate(versions):
            writer.add_verified(raw, verdict, url, FETCHED)
            if i % 7 == 6:
                interim_commits.append(pool.submit(writer.commit_interim))
        paths = [c.result(60) for c in interim_commits]
    paths.append(writer.commit())
    assert len(set(paths)) == len(paths)
    listed = [v for versions in records_by_manifest(store, test_keyring).values() for v in versions]
    assert sorted(listed) == sorted({v.bundle_sha256 for _, _, v in versions})


def test_a_failed_interim_commit_fails_the_writer(store, verified, test_signer):
    writer = ArchiveWriter(store, test_signer, run_id=RUN).open()
    url, raw, verdict = verified[0]
    writer.add_verified(raw, verdict, url, FETCHED).result(30)
    store.put_bytes(layout.manifest(RUN), b"squatted")  # the interim commit's manifest name is taken
    with pytest.raises(StorageError):
        writer.commit_interim()
    with pytest.raises(StorageError, match="failed"):  # its versions are in the history: nothing may follow
        writer.add_verified(*verified[1][1:3], verified[1][0], FETCHED)
    with pytest.raises(StorageError):
        writer.commit()


def test_refresh_learns_what_another_writer_committed_since(store, verified, test_signer, test_keyring):
    (url1, raw1, v1), (url2, raw2, v2), _ = verified
    ours = ArchiveWriter(store, test_signer).open()
    theirs = ArchiveWriter(store, test_signer, worker="w1").open()  # started before the other's interim commit
    ours.add_verified(raw1, v1, url1, FETCHED)
    ours.commit_interim()
    assert theirs.refresh() == 1
    assert theirs.refresh() == 0  # read once
    assert theirs.add_verified(raw1, v1, url1, FETCHED).result(30) is None  # now a duplicate
    assert theirs.add_verified(raw2, v2, url2, FETCHED).result(30) is not None
    theirs.commit()
    ours.commit()
    listed = [v for versions in records_by_manifest(store, test_keyring).values() for v in versions]
    assert sorted(listed) == sorted([v1.bundle_sha256, v2.bundle_sha256])


def test_spool_folders_of_dead_processes_are_swept(tmp_path, store, test_signer):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = tmp_path / f"pith-spool-{dead.stdout.strip()}-abc123"
    left.mkdir()
    (left / "records-x.parquet").write_bytes(b"half a file")
    alive = tmp_path / f"pith-spool-{os.getppid()}-def456"  # a live process's
    alive.mkdir()
    unnamed = tmp_path / "pith-spool-notapid"
    unnamed.mkdir()
    writer = ArchiveWriter(store, test_signer, spool_dir=tmp_path)
    assert left.exists() and not any(store.list())  # making a writer touches nothing
    writer.open()
    assert not left.exists() and alive.exists() and unnamed.exists()
    writer.abort()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, unnamed.name])  # its own is gone too


def test_a_bundle_whose_rows_cannot_be_spooled_changes_nothing(store, verified, test_signer, test_keyring):
    """A value no table can hold (a lone surrogate, which JSON text may carry) refuses
    the whole version at once: none of its rows, no raw object, no history entry; the
    rest of the run commits, and the same version written honestly is not a duplicate."""
    (url, raw, verdict), *others = verified
    bundle = copy.deepcopy(verdict.bundle)
    bundle["source_aliases"][-1]["alias_value"] = "a lone \ud800 surrogate"
    writer = ArchiveWriter(store, test_signer).open()
    with pytest.raises(TypeError):
        writer.add_verified(raw, replace(verdict, bundle=bundle), url, FETCHED)
    for other_url, other_raw, other_verdict in others:
        writer.add_verified(other_raw, other_verdict, other_url, FETCHED)
    assert writer.add_verified(raw, verdict, url, FETCHED).result(30) is not None  # not taken for a duplicate
    writer.commit()
    tables = {"records": [], "verifications": [], "aliases": []}
    for path, entry in CommittedArchive.read(store, test_keyring).objects.items():
        if entry.table in tables:
            tables[entry.table] += pq.read_table(pa.BufferReader(store.get_bytes(path))).to_pylist()
    assert sorted(row["bundle_sha256"] for row in tables["records"]) == sorted(v.bundle_sha256 for _, _, v in verified)
    assert len(tables["verifications"]) == len(verified)  # one each: the refused attempt left no row
    assert not any("\ud800" in (row["alias_value"] or "") for row in tables["aliases"])
