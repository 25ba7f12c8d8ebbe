"""WARC/1.1 written during the crawl, checked with real clients: ``warcio check`` on
every file, warcio's reader for the records, DuckDB over the ``captures`` table."""

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest
from warcio.archiveiterator import ArchiveIterator

from pith.keyring import Keyring
from pith.reasons import Rejected
from pith_archiver import FIXTURES
from pith_testkit.faults import FaultPlan
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.archive.manifest import committed_manifests
from storage.capture.wacz_check import check_wacz_digest
from tests.plugins.cli import isolated_home, run_cli
from tests.plugins.crawling import run_cli_crawl
from tests.test_cdxj import indexed_by_cdxj_indexer
from tests.test_crawl_archive import archiver_keyring

WARCIO = [sys.executable, "-m", "warcio.cli"]

pytestmark = pytest.mark.slow  # every test here crawls, serves or replays in real processes


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


# --- the WACZ export, checked by py-wacz and replayed by pywb --------------------------

PYWB = Path(os.environ.get("PITH_PYWB_BIN", Path(__file__).resolve().parents[1] / ".venv-pywb" / "bin"))


def export_wacz(tmp_path, archive, out, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pith_archiver", "export", str(archive), "--format", "wacz", "--out", str(out), *args]
    env = {**os.environ, **isolated_home(tmp_path)}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def wayback(root: Path, wacz: Path):
    """pywb over a collection made of ``wacz`` (``wb-manager add --unpack-wacz``), on a
    free loopback port; yields its base URL."""
    if not (PYWB / "wayback").exists():
        pytest.fail(f"pywb is not installed in {PYWB}: .ci/run installs it (or set PITH_PYWB_BIN)")
    for args in (["init", "pith"], ["add", "--unpack-wacz", "pith", str(wacz)]):
        done = subprocess.run([str(PYWB / "wb-manager"), *args], cwd=root, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    port = free_port()
    server = subprocess.Popen(
        [str(PYWB / "wayback"), "-b", "127.0.0.1", "-p", str(port)],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{base}/pith/", timeout=2)
                break
            except urllib.error.HTTPError:
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "wayback did not start"
                time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_wacz_export_validates_and_pywb_replays_the_bundles_byte_for_byte(tmp_path, static_site):
    base, suffixes, _ = static_site
    archive = tmp_path / "archive"
    # two interim commits and a final one: several WARC files, each listed by its own run
    result = run_cli_crawl(tmp_path, "--resolver", base, suffixes[0], "--out", str(archive), "--commit-every", "1")
    assert result.returncode == 0, result.stderr[-3000:]
    listed = listed_objects(tmp_path, archive)
    warcs = [path for path in listed if path.endswith(".warc.gz")]
    assert len(warcs) >= 2
    assert sorted(warcs) == sorted(f"warc/{p.name}" for p in (archive / "warc").glob("*.warc.gz"))

    wacz = tmp_path / "out" / "pith.wacz"
    wacz.parent.mkdir()
    done = export_wacz(tmp_path, archive, wacz)
    assert done.returncode == 0, done.stderr
    check = subprocess.run([sys.executable, "-m", "wacz", "validate", "-f", str(wacz)], capture_output=True, text=True)
    assert check.returncode == 0 and "the passed WACZ is valid" in check.stdout, check.stdout + check.stderr

    with zipfile.ZipFile(wacz) as package:
        infos = {info.filename: info for info in package.infolist()}
        stored = [name for name in infos if name.startswith("archive/")]
        assert len(stored) == len(warcs)
        assert all(infos[name].compress_type == zipfile.ZIP_STORED for name in stored)
        datapackage = package.read("datapackage.json")
        digest = json.loads(package.read("datapackage-digest.json"))
        pages = [json.loads(line) for line in package.read("pages/pages.jsonl").splitlines()]
        resources = {r["path"]: r for r in json.loads(datapackage)["resources"]}
        for name in stored + ["indexes/index.cdx", "pages/pages.jsonl"]:
            data = package.read(name)
            assert resources[name]["hash"] == f"sha256:{hashlib.sha256(data).hexdigest()}"
            assert resources[name]["bytes"] == len(data)
    check_wacz_digest(digest, datapackage, archiver_keyring(tmp_path))  # the archive key signed it
    with pytest.raises(Rejected):
        check_wacz_digest(digest, datapackage.replace(b"Pith", b"Pyth"), archiver_keyring(tmp_path))
    assert pages[0]["format"] == "json-pages-1.0"
    assert sorted(page["url"] for page in pages[1:]) == sorted(f"{base}/pith/{s}/bundle.json" for s in suffixes)

    verified = run_cli("verify", wacz)  # this machine's archiver key signed it: trusted with no option
    assert verified.returncode == 0, verified.output
    assert f"VERIFIED    wacz  {wacz}  {len(suffixes)} bundles inside" in verified.stdout
    edited = tmp_path / "edited.wacz"
    with zipfile.ZipFile(wacz) as source, zipfile.ZipFile(edited, "w") as copy:
        for info in source.infolist():
            data = source.read(info)
            copy.writestr(
                info, data.replace(b"Pith bundles", b"Pyth bundles") if info.filename == "datapackage.json" else data
            )
    rejected = run_cli("verify", edited)
    assert rejected.returncode == 1 and "manifest_hash_mismatch" in rejected.stdout, rejected.output

    with wayback(tmp_path, wacz) as replay:
        for page in pages[1:]:
            stamp = page["ts"].replace("-", "").replace(":", "").replace("T", "")[:14]
            with urllib.request.urlopen(f"{replay}/pith/{stamp}id_/{page['url']}", timeout=30) as response:
                body = response.read()
            suffix = page["url"].split("/")[-2]
            assert body == (FIXTURES / f"{suffix}.bundle.json").read_bytes()


def test_wacz_since_a_run_and_usage_errors(tmp_path, static_site):
    base, suffixes, _ = static_site
    archive = tmp_path / "archive"
    for seed in suffixes[:2]:
        result = run_cli_crawl(tmp_path, "--resolver", base, seed, "--out", str(archive), "--no-follow")
        assert result.returncode == 0, result.stderr[-3000:]
    runs = sorted(p.stem for p in (archive / "manifests").glob("*.json"))
    assert len(runs) == 2
    wacz = tmp_path / "later.wacz"
    done = export_wacz(tmp_path, archive, wacz, "--since", runs[1])
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(wacz) as package:
        names = [name for name in package.namelist() if name.startswith("archive/")]
        pages = package.read("pages/pages.jsonl").decode()
    assert len(names) == 1 and runs[1] in names[0]
    assert suffixes[1] in pages and suffixes[0] not in pages

    unknown = export_wacz(tmp_path, archive, tmp_path / "x.wacz", "--since", "20000101T000000Z-w0-00000000")
    assert unknown.returncode == 2 and "no committed run" in unknown.stderr
    assert "Traceback" not in unknown.stderr and len(unknown.stderr.strip().splitlines()) == 1
    again = export_wacz(tmp_path, archive, wacz)
    assert again.returncode == 2 and "exists already" in again.stderr
    badname = export_wacz(tmp_path, archive, tmp_path / "x.zip")
    assert badname.returncode == 2 and ".wacz" in badname.stderr


# --- re-crawls, bad input and the audit -----------------------------------------------


def all_records(archive: Path) -> list:
    return [pair for path in sorted((archive / "warc").glob("*.warc.gz")) for pair in records(path)]


def test_a_recrawl_writes_revisits_for_304s(tmp_path, static_site):
    base, suffixes, _ = static_site
    archive = tmp_path / "archive"
    for _ in range(2):
        result = run_cli_crawl(tmp_path, "--resolver", base, suffixes[0], "--out", str(archive))
        assert result.returncode == 0, result.stderr[-3000:]
    assert result.stat("not_modified") == len(suffixes)
    runs = sorted(p.stem for p in (archive / "manifests").glob("*.json"))
    second = [r for path in (archive / "warc").glob(f"{runs[1]}-*.warc.gz") for r, _ in records(path)]
    revisits = {
        r.rec_headers["WARC-Target-URI"]: r
        for r in second
        if r.rec_type == "revisit" and r.rec_headers["WARC-Target-URI"].endswith("/bundle.json")
    }
    assert sorted(revisits) == sorted(f"{base}/pith/{s}/bundle.json" for s in suffixes)
    for record in revisits.values():
        assert record.rec_headers["WARC-Profile"].endswith("/revisit/server-not-modified")
        assert record.http_headers.get_statuscode() == "304"
    for path in (archive / "warc").glob("*.warc.gz"):
        assert warc_check(path).returncode == 0


def test_bad_input_is_recorded_as_it_happened(tmp_path, mirror, corpus_dir, corpus_catalog):
    truncated, tampered, fine = corpus_catalog.suffixes[:3]
    server = mirror(faults=FaultPlan(truncate_rate=1.0, paths=rf"/{truncated}/bundle\.json$", tamper={tampered}))
    archive = tmp_path / "archive"
    result = run_cli_crawl(
        tmp_path,
        *(truncated, tampered, fine, "--no-follow", "--max-failures", "100%"),
        resolver=server.url,
        out=archive,
        corpus=corpus_dir,
    )
    assert result.returncode in (1, 3), result.stderr[-3000:]
    found = all_records(archive)
    for path in (archive / "warc").glob("*.warc.gz"):
        check = warc_check(path)
        assert check.returncode == 0, check.stdout
    metadata = [(r.rec_headers["WARC-Target-URI"], json.loads(body)) for r, body in found if r.rec_type == "metadata"]
    failures = [fields for url, fields in metadata if truncated in url and fields["record_type"] == "fetch_failure"]
    assert failures and all(fields["error"] for fields in failures)  # each attempt cut short, on record
    verdicts = {url.split("/")[-2]: fields for url, fields in metadata if fields["record_type"] == "bundle_verdict"}
    assert verdicts[tampered]["status"] == "rejected" and verdicts[tampered]["reason"]
    assert verdicts[tampered]["raw_path"].startswith("quarantine/")
    assert verdicts[fine]["status"] == "verified"
    responses = [r for r, _ in found if r.rec_type == "response" and tampered in r.rec_headers["WARC-Target-URI"]]
    assert any(r.rec_headers["WARC-Target-URI"].endswith("/bundle.json") for r in responses)  # the evidence


def test_not_a_bundle_is_kept_with_its_rejection(tmp_path, static_site):
    base, suffixes, root = static_site
    (root / "pith" / suffixes[0] / "bundle.json").write_bytes(b"<html><body>Service moved</body></html>\n")
    archive = tmp_path / "archive"
    run_cli_crawl(tmp_path, "--resolver", base, suffixes[0], "--out", str(archive), "--no-follow")
    found = all_records(archive)
    url = f"{base}/pith/{suffixes[0]}/bundle.json"
    bodies = [body for r, body in found if r.rec_type == "response" and r.rec_headers["WARC-Target-URI"] == url]
    assert bodies and bodies[0].endswith(b"Service moved</body></html>\n")
    verdicts = [json.loads(body) for r, body in found if r.rec_type == "metadata"]
    assert [v["status"] for v in verdicts if v["record_type"] == "bundle_verdict"] == ["rejected"]


def audit(tmp_path, archive: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pith_archiver", "audit", str(archive)]
    env = {**os.environ, **isolated_home(tmp_path)}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


def test_audit_names_a_warc_that_no_longer_matches(tmp_path, static_site):
    base, suffixes, _ = static_site
    archive = tmp_path / "archive"
    result = run_cli_crawl(tmp_path, "--resolver", base, suffixes[0], "--out", str(archive))
    assert result.returncode == 0, result.stderr[-3000:]
    clean = audit(tmp_path, archive)
    assert clean.returncode == 0, clean.stdout + clean.stderr

    warc = sorted((archive / "warc").glob("*.warc.gz"))[0]
    data = bytearray(warc.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped bit pattern inside a gzipped record
    warc.write_bytes(bytes(data))
    found = audit(tmp_path, archive)
    assert found.returncode == 1
    lines = [line for line in found.stdout.splitlines() if f"warc/{warc.name}" in line]
    assert any(line.startswith("hash_mismatch") for line in lines), found.stdout
    assert any(line.startswith("warc_invalid") for line in lines), found.stdout


def test_each_warc_is_listed_by_the_run_holding_its_rows(tmp_path):
    """Files rolled by size and at interim commits: every WARC and its index are listed by
    exactly one manifest, the one whose captures table files point into it."""
    from datetime import datetime, timezone

    import pyarrow.parquet as pq

    from pith.signing import Signer
    from storage.archive.manifest import committed_manifests
    from storage.capture.exchanges import Exchange
    from storage.capture.warc import WarcPolicy
    from storage.writing.writer import ArchiveWriter

    signer = Signer.generate("test-archiver")
    store = LocalStore(tmp_path / "archive")
    writer = ArchiveWriter(store, signer, warc=WarcPolicy(max_bytes=4000), warc_info={"software": "test"}).open()
    now = datetime.now(timezone.utc)
    urls = []
    for index in range(40):
        url = f"http://127.0.0.1:9/pith/R{index:02d}/bundle.json"
        body = json.dumps({"n": index, "pad": "x" * 500}).encode()
        writer.warc.record(
            Exchange(url, "GET", [], b"", 200, "HTTP/1.1", [("Content-Type", "application/json")], body, now)
        )
        writer.warc.verdict(
            url, {"status": "verified", "pith_number": f"pith:2019:R{index:02d}", "bundle_sha256": "ab"}
        )
        urls.append(url)
        if index in (9, 25):
            writer.commit_interim({}, {})
    writer.commit({}, {})

    manifests = committed_manifests(store, Keyring([signer.pinned()]))
    assert len(manifests) == 3
    seen_warcs, seen_urls = [], []
    for manifest in manifests:
        paths = {entry["path"] for entry in manifest["objects"]}
        warcs = {path for path in paths if layout.is_warc(path)}
        assert all(layout.warc_index(path) in paths for path in warcs)
        seen_warcs += warcs
        for path in paths:
            if path.startswith("tables/captures/"):
                for row in pq.read_table(tmp_path / "archive" / path).to_pylist():
                    assert f"warc/{row['warc_filename']}" in warcs  # its rows point into its own files
                    seen_urls.append(row["url"])
    assert len(seen_warcs) == len(set(seen_warcs)) > 3  # rolled by size too, each listed once
    assert sorted(seen_urls) == urls
    for path in seen_warcs:
        assert warc_check(tmp_path / "archive" / path).returncode == 0


def test_warcs_on_s3_and_a_wacz_from_s3_to_s3(tmp_path, static_site, s3_bucket, s3_endpoint, s3_client):
    base, suffixes, _ = static_site
    archive = f"s3://{s3_bucket}/archive"
    result = run_cli_crawl(
        tmp_path, "--resolver", base, suffixes[0], "--out", archive, "--s3-endpoint-url", s3_endpoint
    )
    assert result.returncode == 0, result.stderr[-3000:]
    keys = [item["Key"] for item in s3_client.list_objects_v2(Bucket=s3_bucket, Prefix="archive/warc/")["Contents"]]
    assert any(key.endswith(".warc.gz") for key in keys) and any(key.endswith(".cdxj") for key in keys)

    done = export_wacz(tmp_path, archive, f"s3://{s3_bucket}/exports/pith.wacz", "--s3-endpoint-url", s3_endpoint)
    assert done.returncode == 0, done.stderr
    wacz = tmp_path / "pith.wacz"
    wacz.write_bytes(s3_client.get_object(Bucket=s3_bucket, Key="exports/pith.wacz")["Body"].read())
    check = subprocess.run([sys.executable, "-m", "wacz", "validate", "-f", str(wacz)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    with zipfile.ZipFile(wacz) as package:
        assert len([name for name in package.namelist() if name.startswith("archive/")]) == len(
            [key for key in keys if key.endswith(".warc.gz")]
        )


def test_a_recrawl_without_validators_writes_identical_payload_revisits(tmp_path, static_site):
    base, suffixes, _ = static_site
    archive = tmp_path / "archive"
    for _ in range(2):
        result = run_cli_crawl(
            tmp_path, "--resolver", base, suffixes[0], "--out", str(archive), "-s", "PITH_CONDITIONAL_REQUESTS=False"
        )
        assert result.returncode == 0, result.stderr[-3000:]
    runs = sorted(p.stem for p in (archive / "manifests").glob("*.json"))
    first = {
        r.rec_headers["WARC-Record-ID"]: r for p in archive.glob(f"warc/{runs[0]}-*.warc.gz") for r, _ in records(p)
    }
    second = [r for p in archive.glob(f"warc/{runs[1]}-*.warc.gz") for r, _ in records(p)]
    for suffix in suffixes:
        url = f"{base}/pith/{suffix}/bundle.json"
        [revisit] = [
            r for r in second if r.rec_headers["WARC-Target-URI"] == url and r.rec_type in ("response", "revisit")
        ]
        assert revisit.rec_type == "revisit", revisit.rec_type
        assert revisit.rec_headers["WARC-Profile"].endswith("/revisit/identical-payload-digest")
        original = first[revisit.rec_headers["WARC-Refers-To"]]  # a response of the first run
        assert original.rec_type == "response"
        assert original.rec_headers["WARC-Payload-Digest"] == revisit.rec_headers["WARC-Payload-Digest"]

    wacz = tmp_path / "both.wacz"
    assert export_wacz(tmp_path, archive, wacz).returncode == 0
    with wayback(tmp_path, wacz) as replay:  # the latest capture of each is a revisit: pywb finds its bytes
        for suffix in suffixes:
            url = f"{base}/pith/{suffix}/bundle.json"
            with urllib.request.urlopen(f"{replay}/pith/2100id_/{url}", timeout=30) as response:
                assert response.read() == (FIXTURES / f"{suffix}.bundle.json").read_bytes()


def _cdxj_lines(archive: Path) -> list[dict]:
    lines = []
    for index in sorted((archive / "warc").glob("*.cdxj")):
        for line in index.read_text().splitlines():
            lines.append(json.loads(line.split(" ", 2)[2]))
    return lines


def test_an_archive_crawled_three_times_replays_every_bundle_as_its_latest_bytes(tmp_path, static_site):
    """Re-crawls answered 304 stay in the WARC files as what the server said, refer to
    the record holding the bytes, and stay out of the replay index: pywb replays each
    bundle as the bytes most recently archived for it, after any number of runs."""
    base, suffixes, root = static_site
    archive = tmp_path / "archive"
    changed = root / "pith" / suffixes[1] / "bundle.json"
    latest = {suffix: (FIXTURES / f"{suffix}.bundle.json").read_bytes() for suffix in suffixes}
    for crawl in range(3):
        if crawl == 2:  # the same version served as other bytes: a new capture of that URL
            latest[suffixes[1]] = latest[suffixes[1]] + b"\n"
            changed.write_bytes(latest[suffixes[1]])
        result = run_cli_crawl(tmp_path, "--resolver", base, suffixes[0], "--out", str(archive))
        assert result.returncode == 0, result.stderr[-3000:]
    assert result.stat("not_modified") == len(suffixes) - 1

    runs = sorted(p.stem for p in (archive / "manifests").glob("*.json"))
    by_run = {run: [r for p in archive.glob(f"warc/{run}-*.warc.gz") for r, _ in records(p)] for run in runs}
    first = {r.rec_headers["WARC-Target-URI"]: r for r in by_run[runs[0]] if r.rec_type == "response"}
    for run in runs[1:]:
        for record in by_run[run]:
            if record.rec_type == "revisit" and record.http_headers.get_statuscode() == "304":
                original = first[record.rec_headers["WARC-Target-URI"]]  # the record that holds the bytes
                assert record.rec_headers["WARC-Refers-To"] == original.rec_headers["WARC-Record-ID"]
                assert record.rec_headers["WARC-Refers-To-Target-URI"] == original.rec_headers["WARC-Target-URI"]
                assert record.rec_headers["WARC-Refers-To-Date"] == original.rec_headers["WARC-Date"]

    # the replay index and the captures table say the same: every capture but the 304s
    con = duckdb.connect()
    rows = con.execute(
        "SELECT warc_filename, warc_record_offset, warc_record_type, fetch_status, content_digest"
        " FROM read_parquet(?, hive_partitioning=true)",
        [f"{archive}/tables/captures/**/*.parquet"],
    ).fetchall()
    replayable = {(name, offset): digest for name, offset, kind, status, digest in rows if status != 304}
    assert len(replayable) < len(rows)  # the 304s are captures too
    indexed = {(line["filename"], int(line["offset"])): line.get("digest") for line in _cdxj_lines(archive)}
    assert indexed.keys() == replayable.keys()
    assert all(digest == f"sha1:{indexed[key]}" or digest == indexed[key] for key, digest in replayable.items())
    for warc in (archive / "warc").glob("*.warc.gz"):  # each index, written as its file was: cdxj-indexer's of it
        reference = indexed_by_cdxj_indexer(warc, tmp_path / f"{warc.name}.cdxj")
        assert (archive / layout.warc_index(f"warc/{warc.name}")).read_text(encoding="utf-8") == reference

    wacz = tmp_path / "all.wacz"
    done = export_wacz(tmp_path, archive, wacz)
    assert done.returncode == 0, done.stderr
    with wayback(tmp_path, wacz) as replay:
        for suffix, expected in latest.items():
            url = f"{base}/pith/{suffix}/bundle.json"
            with urllib.request.urlopen(f"{replay}/pith/2100id_/{url}", timeout=30) as response:
                assert response.status == 200
                assert response.read() == expected, suffix
