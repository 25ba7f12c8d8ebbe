"""WARC/1.1 written during the crawl, checked with real clients: ``warcio check`` on
every file, warcio's reader for the records, DuckDB over the ``captures`` table."""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from warcio.archiveiterator import ArchiveIterator

from pith_archiver import FIXTURES
from storage import layout
from storage.manifest import committed_manifests
from storage.stores import LocalStore
from tests.plugins.crawling import run_cli_crawl
from tests.test_crawl_archive import archiver_keyring

WARCIO = [sys.executable, "-m", "warcio.cli"]


def warc_check(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*WARCIO, "check", "-v", str(path)], capture_output=True, text=True)


def listed_objects(tmp_path, archive: Path) -> dict[str, dict]:
    manifests = committed_manifests(LocalStore(archive), archiver_keyring(tmp_path))
    return {entry["path"]: entry for manifest in manifests for entry in manifest["objects"]}


def records(path: Path) -> list:
    """Every record of a WARC file, with its raw payload read (content as received)."""
    out = []
    with open(path, "rb") as stream:
        for record in ArchiveIterator(stream):
            out.append((record, record.raw_stream.read()))
    return out


def test_crawl_writes_warcs_that_warcio_checks_listed_in_the_manifest(tmp_path, static_site):
    base, suffixes, _ = static_site
    archive = tmp_path / "archive"
    result = run_cli_crawl(tmp_path, "--resolver", base, suffixes[0], "--out", str(archive))
    assert result.returncode == 0, result.stderr[-3000:]
    listed = listed_objects(tmp_path, archive)
    warcs = sorted(path for path in listed if path.startswith("warc/") and path.endswith(".warc.gz"))
    assert warcs, sorted(listed)
    for path in warcs:
        check = warc_check(archive / path)
        assert check.returncode == 0, check.stdout + check.stderr
        assert "digest pass" in check.stdout
        assert layout.warc_index(path) in listed  # its CDXJ index, next to it
        data = (archive / path).read_bytes()
        assert listed[path]["sha256"] == hashlib.sha256(data).hexdigest()

    found = [pair for path in warcs for pair in records(archive / path)]
    kinds = [record.rec_type for record, _ in found]
    assert kinds[0] == "warcinfo"
    info = found[0][1].decode()
    assert "pith-archiver" in info and base in info and "robots" in info
    responses = {r.rec_headers["WARC-Target-URI"]: (r, body) for r, body in found if r.rec_type == "response"}
    requests = {r.rec_headers["WARC-Concurrent-To"]: r for r, _ in found if r.rec_type == "request"}
    for suffix in suffixes:  # every bundle: the bytes as served, its request linked, its verdict
        raw = (FIXTURES / f"{suffix}.bundle.json").read_bytes()
        url = f"{base}/pith/{suffix}/bundle.json"
        record, body = responses[url]
        assert record.http_headers.get_statuscode() == "200"
        assert record.rec_headers["WARC-Payload-Digest"].startswith("sha1:")
        assert body.endswith(raw)  # the HTTP head, then the payload as received
        request = requests[record.rec_headers["WARC-Record-ID"]]
        assert request.http_headers.protocol == "GET"
        verdicts = [
            json.loads(payload)
            for r, payload in found
            if r.rec_type == "metadata" and r.rec_headers["WARC-Target-URI"] == url
        ]
        assert len(verdicts) == 1
        verdict = verdicts[0]
        assert verdict["status"] == "verified" and verdict["bundle_sha256"]
        assert verdict["raw_path"] == layout.raw_bundle(hashlib.sha256(raw).hexdigest())
        assert verdict["key_ids"]
    assert any(url.endswith("/robots.txt") or "/pith/" in url for url in responses)

    con = duckdb.connect()
    rows = con.execute(
        "SELECT url, fetch_status, warc_filename, warc_record_offset, warc_record_length, warc_record_id,"
        " pith_number, bundle_sha256, status FROM read_parquet(?, hive_partitioning=true)"
        " WHERE url LIKE '%bundle.json'",
        [f"{archive}/tables/captures/**/*.parquet"],
    ).fetchall()
    assert len(rows) == len(suffixes)
    for url, status, filename, offset, length, record_id, number, bundle, verdict in rows:
        assert status == 200 and verdict == "verified" and number and bundle
        with open(archive / "warc" / filename, "rb") as stream:  # the row points at the record
            stream.seek(offset)
            record = next(ArchiveIterator(stream))
            assert record.rec_headers["WARC-Record-ID"] == record_id
            assert record.rec_headers["WARC-Target-URI"] == url
        assert length > 0


def test_no_warc_switches_it_off(tmp_path, static_site):
    base, suffixes, _ = static_site
    archive = tmp_path / "archive"
    result = run_cli_crawl(tmp_path, "--resolver", base, suffixes[0], "--out", str(archive), "--no-warc")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stat("archived") == 3
    assert not [path for path in listed_objects(tmp_path, archive) if path.startswith("warc/")]
    assert not (archive / "warc").exists()


@pytest.mark.parametrize("status", [404])
def test_a_missing_bundle_is_kept_as_evidence(tmp_path, static_site, status):
    base, suffixes, root = static_site
    (root / "pith" / suffixes[1] / "bundle.json").unlink()
    archive = tmp_path / "archive"
    result = run_cli_crawl(tmp_path, "--resolver", base, suffixes[0], suffixes[1], "--out", str(archive))
    warcs = sorted((archive / "warc").glob("*.warc.gz"))
    assert warcs, result.stderr[-3000:]
    found = [pair for path in warcs for pair in records(path)]
    statuses = {
        r.rec_headers["WARC-Target-URI"]: r.http_headers.get_statuscode()
        for r, _ in found
        if r.rec_type in ("response", "revisit")
    }
    assert statuses.get(f"{base}/pith/{suffixes[1]}/bundle.json") == str(status), sorted(statuses.items())
    for path in warcs:
        assert warc_check(path).returncode == 0
