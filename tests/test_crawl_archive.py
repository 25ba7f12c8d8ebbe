"""The whole job on both backends: crawl plain static files, verify, archive, commit;
then read the archive back the way its users will (pyarrow, DuckDB, the manifest)."""

import hashlib

import duckdb
import pytest

from pith.keyring import Keyring
from pith.signing import Signer
from pith_archiver import FIXTURES
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.archive.manifest import committed_manifests
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.s3 import local_copy
from tests.plugins.tables import read_rows

pytestmark = pytest.mark.slow  # every test here crawls, serves or waits for over a second


def out_args(store) -> list[str]:
    if isinstance(store, LocalStore):
        return ["--out", str(store.root)]
    return ["--out", f"s3://{store.bucket}/{store.prefix}", "--s3-endpoint-url", store.endpoint_url]


def archiver_keyring(tmp_path) -> Keyring:
    """The key the crawl created on first use (XDG_CONFIG_HOME points into tmp_path)."""
    return Keyring([Signer.load(tmp_path / "config" / "pith-archiver" / "signing-key.json").pinned()])


def test_crawl_archives_exact_bytes_tables_and_a_signed_manifest(tmp_path, static_site, store):
    base, suffixes, _ = static_site
    result = run_cli_crawl(tmp_path, "--resolver", base, suffixes[0], *out_args(store))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stat("archived") == 3

    manifests = list(committed_manifests(store, archiver_keyring(tmp_path)))
    assert len(manifests) == 1
    listed = {entry["path"]: entry for entry in manifests[0]["objects"]}
    for suffix in suffixes:  # raw objects are the exact bytes, addressed by their sha256
        raw = (FIXTURES / f"{suffix}.bundle.json").read_bytes()
        path = layout.raw_bundle(hashlib.sha256(raw).hexdigest())
        assert store.get_bytes(path) == raw
        assert listed[path]["sha256"] == hashlib.sha256(raw).hexdigest()
        assert listed[path]["size"] == len(raw)
    for path, entry in listed.items():  # every listed object is there, as listed
        data = store.get_bytes(path)
        assert (hashlib.sha256(data).hexdigest(), len(data)) == (entry["sha256"], entry["size"])

    records = read_rows(store, "records")
    assert sorted(r["pith_number"] for r in records) == sorted(
        f"pith:{'2018' if s.startswith('6VA') else '2019'}:{s}" for s in suffixes
    )
    assert {r["status"] for r in read_rows(store, "verifications")} == {"verified"}
    assert len(read_rows(store, "events")) == 6

    folder = local_copy(store, tmp_path / "copy")
    con = duckdb.connect()
    count, titles = con.execute(
        "SELECT count(*), count(title) FROM read_parquet(?, hive_partitioning=true)",
        [f"{folder}/tables/records/**/*.parquet"],
    ).fetchone()
    assert (count, titles) == (3, 3)


def test_a_tampered_bundle_is_quarantined_and_counted(tmp_path, static_site, store):
    base, suffixes, root = static_site
    bundle = root / "pith" / suffixes[1] / "bundle.json"
    tampered = bundle.read_bytes().replace(b'"primary_cat":"cs.', b'"primary_cat":"cs.X', 1)
    bundle.write_bytes(tampered)
    result = run_cli_crawl(tmp_path, "--resolver", base, suffixes[0], *out_args(store))
    assert result.returncode == 1, result.stderr[-3000:]  # a rejection is an event a scheduler sees
    assert "rejections: canonical_hash_mismatch 1" in result.stdout
    assert (result.stat("verified"), result.stat("rejected")) == (2, 1)
    assert result.stat("rejected/canonical_hash_mismatch") == 1

    digest = hashlib.sha256(tampered).hexdigest()
    assert store.get_bytes(layout.quarantined(digest)) == tampered
    assert b"canonical_hash_mismatch" in store.get_bytes(layout.quarantine_reason(digest))
    rows = read_rows(store, "verifications")
    rejected = [row for row in rows if row["status"] == "rejected"]
    assert [(r["reason"], r["detail_path"], r["raw_sha256"]) for r in rejected] == [
        ("canonical_hash_mismatch", "canonical_sha256", digest)
    ]
    assert len(read_rows(store, "records")) == 2


def test_recrawl_archives_nothing_twice(tmp_path, static_site):
    base, suffixes, _ = static_site
    out = ["--out", str(tmp_path / "archive"), "--resolver", base, suffixes[0]]
    assert run_cli_crawl(tmp_path, *out).stat("archived") == 3
    conditional = run_cli_crawl(tmp_path, *out)
    assert conditional.stat("conditional_requests") == 3
    assert conditional.stat("not_modified") == 3
    refetched = run_cli_crawl(tmp_path, *out, "-s", "PITH_CONDITIONAL_REQUESTS=false")
    assert (refetched.stat("verified"), refetched.stat("archived")) == (3, 0)
    assert refetched.stat("already_archived") == 3
    store = LocalStore(tmp_path / "archive")
    assert len(read_rows(store, "records")) == 3
    duplicates = [row for row in read_rows(store, "verifications") if row["duplicate"]]
    assert len(duplicates) == 3


@pytest.mark.parametrize("failure", ["missing", "oversize"])
def test_a_bundle_that_cannot_be_fetched_gets_a_failed_row(tmp_path, static_site, failure):
    base, suffixes, root = static_site
    bundle = root / "pith" / suffixes[1] / "bundle.json"
    if failure == "missing":
        bundle.unlink()
    else:
        bundle.write_bytes(b" " * 2_000_000 + bundle.read_bytes())
    result = run_cli_crawl(
        tmp_path,
        "--resolver",
        base,
        "--out",
        str(tmp_path / "archive"),
        suffixes[0],
        "-s",
        "DOWNLOAD_MAXSIZE=1000000",
        "--max-failures",
        "50%",
    )
    assert result.returncode == 3, result.stderr[-3000:]
    reason = "fetch_failed" if failure == "missing" else "too_large"
    assert result.stat(f"bundle_failures/{reason}") == 1
    rows = read_rows(LocalStore(tmp_path / "archive"), "verifications")
    failed = [row for row in rows if row["status"] == "failed"]
    assert [(row["reason"], row["url"].endswith(f"{suffixes[1]}/bundle.json")) for row in failed] == [(reason, True)]
