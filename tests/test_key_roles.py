"""Issue 13 items 1, 4, 5 and issue 12 item 4, through the real command line in a
subprocess: a bundle forged with a stolen archiver key is rejected by verify and
audit and never served or exported; one size rule for the crawl, verify and audit;
an audit with no blind spots; an audit of your own archive with no options; one-line
errors and the exit status contract."""

import json
import os
import pty
import subprocess
import sys
from datetime import datetime, timezone

import pytest

from pith.keyring import REGISTRY, Keyring
from pith.parse import DEFAULT_MAX_BYTES, padded_bound
from pith.signing import Signer
from pith.verify import verify_bundle
from pith_archiver import FIXTURES
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.serving.record import compact_json
from storage.writing.writer import ArchiveWriter
from tests.plugins.cli import run_cli
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.mirror import serve_process
from tests.plugins.tables import read_rows
from tests.tamper import wholly_resigned
from tests.test_archive_mirror import fetch

pytestmark = pytest.mark.slow  # every test here crawls, serves or waits for over a second

REAL = "RLLQL6357CWNZYHNBMCYD3UK5B"  # arXiv 1904.12043


def on_a_terminal(tmp_path, *args) -> str:
    """What ``pith-archiver ARGS`` writes to stderr when stderr is a terminal."""
    leader, follower = pty.openpty()
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"), "COLUMNS": "120"}
    process = subprocess.Popen(
        [sys.executable, "-m", "pith_archiver", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=follower,
        cwd=tmp_path,
        env=env,
    )
    os.close(follower)
    written = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the process closed its end
            break
        if not chunk:
            break
        written += chunk
    process.communicate(timeout=120)
    os.close(leader)
    return written.decode("utf-8", "replace")


def one_error_line(result, code: int) -> str:
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("Error: ")
    return line


def machine_signer(tmp_path) -> Signer:
    return Signer.load(tmp_path / "config" / "pith-archiver" / "signing-key.json")


def forged(signer: Signer) -> bytes:
    """The real bundle with another snapshot title, receipt, events, state and bundle
    all re-signed with ``signer`` under its own key_id."""
    bundle = json.loads((FIXTURES / f"{REAL}.bundle.json").read_bytes())
    bundle["events"][1]["payload"]["graph_snapshot"]["paper"]["title"] = "A forged title"
    return compact_json(wholly_resigned(bundle, signer))


# --- key roles (13.1) --------------------------------------------------------------------


def test_a_bundle_forged_with_the_archiver_key_is_rejected_everywhere(tmp_path, static_site):
    base, suffixes, _ = static_site
    archive = tmp_path / "archive"
    run_cli_crawl(tmp_path, "--no-follow", *(s for s in suffixes if s != REAL), resolver=base, out=archive).check()
    stolen = machine_signer(tmp_path)  # hot on every worker
    key_document = archive / layout.key_document(stolen.key_id)
    forgery = forged(stolen)
    (tmp_path / "forged.json").write_bytes(forgery)

    verified = run_cli("verify", "--keyring", key_document, tmp_path / "forged.json", home=tmp_path)
    assert verified.returncode == 1
    assert "REJECTED" in verified.stdout and "wrong_key_role at events[0].payload.receipt.key_id" in verified.stdout

    # the thief writes it into the archive through the real writer, with a valid manifest
    writer = ArchiveWriter(LocalStore(archive), stolen, worker="thief").open()
    verdict = verify_bundle(forgery, Keyring([stolen.pinned(REGISTRY)]))
    assert verdict.ok
    writer.add_verified(forgery, verdict, f"{base}/pith/{REAL}/bundle.json", datetime.now(timezone.utc)).result()
    writer.commit(stats={}, params={})

    for options in ([], ["--keyring", key_document]):
        audited = run_cli("audit", archive, *options, home=tmp_path)
        assert audited.returncode == 1, audited.stderr
        [finding] = [line for line in audited.stdout.splitlines() if line.startswith("bundle_rejected")]
        assert "wrong_key_role at events[0].payload.receipt.key_id" in finding
        assert audited.stdout.splitlines()[-1].startswith("1 discrepancy (bundle_rejected 1)")

    with serve_process(archive) as (_, url):  # on this machine (XDG_CONFIG_HOME is tmp_path/config)
        assert fetch(f"{url}/pith/1904.12043v2") == (404, b"")  # no alias leads to the forgery
        assert fetch(f"{url}/pith/{REAL}/bundle.json") == (404, b"")
        other = next(s for s in suffixes if s != REAL)
        assert fetch(f"{url}/pith/{other}/bundle.json") == (200, (FIXTURES / f"{other}.bundle.json").read_bytes())

    exported = run_cli("export", archive, "--format", "bag", "--out", tmp_path / "bag", home=tmp_path)
    assert "wrong_key_role" in one_error_line(exported, 1)
    assert not (tmp_path / "bag").exists()


def test_the_crawl_rejects_a_forgery_by_a_pinned_archive_key(tmp_path, static_site):
    base, _, root = static_site
    stolen = Signer.generate("stolen-worker-key")
    key_document = tmp_path / "stolen.json"
    key_document.write_text(json.dumps(stolen.archive_key_document()))
    (root / "pith" / REAL / "bundle.json").write_bytes(forged(stolen))
    archive = tmp_path / "archive"
    run_cli_crawl(
        tmp_path, "--resolver", base, "--out", str(archive), "--keyring", str(key_document), "--no-follow", REAL
    )
    [row] = [row for row in read_rows(archive, "verifications") if row["url"].endswith("/bundle.json")]
    assert (row["status"], row["reason"], row["detail_path"]) == (
        "rejected",
        "wrong_key_role",
        "events[0].payload.receipt.key_id",
    )
    assert not list((archive / layout.RAW).rglob("*.json"))


# --- one size rule (13.4) ----------------------------------------------------------------


def test_a_padded_bundle_is_refused_by_the_crawl_and_by_verify_alike(tmp_path, static_site):
    base, suffixes, root = static_site
    raw = (FIXTURES / f"{REAL}.bundle.json").read_bytes()
    huge = raw[:1] + b" " * (12 << 20) + raw[1:]  # the reproduced attack: 12 MiB after the opening brace
    padded = raw[:1] + b" " * (padded_bound(len(raw)) - len(raw) + 1) + raw[1:]  # one byte past the margin
    spaced = json.dumps(json.loads(raw)).encode()  # ', ' and ': ': within the margin
    for name, data in (("huge", huge), ("padded", padded), ("spaced", spaced)):
        (tmp_path / f"{name}.json").write_bytes(data)
    checked = run_cli("verify", *(tmp_path / f"{n}.json" for n in ("huge", "padded", "spaced")), home=tmp_path)
    assert checked.returncode == 1
    lines = checked.stdout.splitlines()
    assert "too_large" in lines[0] and f"limit {DEFAULT_MAX_BYTES}" in lines[0]
    assert "not_compact" in lines[1] and lines[2].startswith("VERIFIED")

    others = [s for s in suffixes if s != REAL]
    for suffix, padding in ((others[0], 8192), (others[1], 12 << 20)):
        (root / "pith" / suffix / "bundle.json").write_bytes(
            (FIXTURES / f"{suffix}.bundle.json").read_bytes().replace(b"{", b"{" + b" " * padding, 1)
        )
    archive = tmp_path / "archive"
    result = run_cli_crawl(tmp_path, "--resolver", base, "--out", str(archive), "--no-follow", *others)
    assert list((archive / layout.MANIFESTS).glob("*.json")), result.stderr[-3000:]
    rows = {row["url"].split("/")[-2]: (row["status"], row["reason"]) for row in read_rows(archive, "verifications")}
    assert rows == {others[0]: ("rejected", "not_compact"), others[1]: ("failed", "too_large")}
    assert not list((archive / layout.RAW).rglob("*.json"))  # nothing padded is archived as verified
    audited = run_cli("audit", archive, home=tmp_path)  # and what was archived audits clean: the same rule
    assert audited.returncode == 0, audited.stdout + audited.stderr
    assert f"bundle size limit {DEFAULT_MAX_BYTES} bytes" in audited.stdout


# --- an audit with no blind spots (13.5) --------------------------------------------------


def test_every_file_no_manifest_lists_is_an_orphan_wherever_it_lies(tmp_path, static_site):
    base, suffixes, _ = static_site
    archive = tmp_path / "archive"
    run_cli_crawl(tmp_path, suffixes[0], resolver=base, out=archive).check()
    planted = {
        "keys/someone-else.json": b"{}",
        "manifests/notes.txt": b"hello",
        "unknown/x.bin": b"\0" * 3,
        "raw/bundles/ab/" + "ab" * 32 + ".json": b"{}",
        "raw/bundles/ab/.tmp-killed-write": b"{",
    }
    for path, data in planted.items():
        (archive / path).parent.mkdir(parents=True, exist_ok=True)
        (archive / path).write_bytes(data)
    assert not list(archive.glob(".*"))  # the crawl keeps its own state outside the archive
    audited = run_cli("audit", archive, home=tmp_path)
    assert audited.returncode == 1
    orphans = {line.split()[1]: line.split()[2] for line in audited.stdout.splitlines() if line.startswith("orphan")}
    assert orphans == {path: str(len(data)) for path, data in planted.items()}
    assert audited.stdout.splitlines()[-1].startswith(f"{len(planted)} discrepancies (orphan {len(planted)})")


# --- your own archive, no ceremony (12.4) -------------------------------------------------


def test_an_archive_crawled_here_audits_clean_with_no_options(tmp_path, static_site):
    base, suffixes, _ = static_site
    archive = tmp_path / "archive"
    run_cli_crawl(tmp_path, suffixes[0], resolver=base, out=archive).check()
    clean = run_cli("audit", archive, home=tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.startswith("clean: 1 manifest, ") and clean.stderr == ""
    quiet = run_cli("audit", "-q", archive, home=tmp_path)
    assert quiet.returncode == 0 and len(quiet.stdout.splitlines()) == 1 and quiet.stderr == ""
    assert f"auditing {archive}" in on_a_terminal(tmp_path, "audit", archive)  # progress only where people look
    assert on_a_terminal(tmp_path, "audit", "-q", archive) == ""

    # elsewhere: one finding naming the key and the fix, no orphans; then each way to pin the key
    elsewhere = run_cli("audit", archive, home=tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path / "elsewhere")})
    assert elsewhere.returncode == 1
    finding, summary = elsewhere.stdout.splitlines()
    key_id = machine_signer(tmp_path).key_id
    assert finding.startswith("manifest_unpinned manifests/") and f"signed by {key_id} (fingerprint " in finding
    assert (
        f"pass --keyring {archive}/keys/{key_id}.json after checking its fingerprint, or --trust-archive-keys"
        in finding
    )
    private = tmp_path / "config" / "pith-archiver" / "signing-key.json"
    for options in (
        ["--keyring", archive / layout.key_document(key_id)],
        ["--trust-archive-keys"],
        ["--signing-key", private],
        ["--keyring", private],
    ):  # a private key file: its public half
        pinned = run_cli(
            "audit", archive, *options, home=tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path / "elsewhere")}
        )
        assert pinned.returncode == 0, (options, pinned.stdout, pinned.stderr)


# --- exit status and one-line errors (12.1, 12.2 for audit, serve, export) --------------------


def test_audit_serve_and_export_errors_are_one_line_with_their_exit_status(tmp_path, static_site):
    base, suffixes, _ = static_site
    archive = tmp_path / "archive"
    run_cli_crawl(tmp_path, suffixes[0], resolver=base, out=archive).check()
    (tmp_path / "notjson.json").write_text("not json")
    assert "no archive folder at" in one_error_line(run_cli("audit", tmp_path / "nowhere", home=tmp_path), 2)
    assert "notjson.json" in one_error_line(
        run_cli("audit", archive, "--keyring", tmp_path / "notjson.json", home=tmp_path), 2
    )
    assert "--signing-key" in one_error_line(
        run_cli("audit", archive, "--signing-key", tmp_path / "none", home=tmp_path), 2
    )
    assert "notjson.json" in one_error_line(
        run_cli(
            "export",
            archive,
            "--format",
            "bag",
            "--out",
            tmp_path / "b",
            "--keyring",
            tmp_path / "notjson.json",
            home=tmp_path,
        ),
        2,
    )
    assert "already exists" in one_error_line(
        run_cli("export", archive, "--format", "bag", "--out", tmp_path, home=tmp_path), 2
    )
    assert "no manifest verifies" in one_error_line(
        run_cli(
            "export",
            archive,
            "--format",
            "bag",
            "--out",
            tmp_path / "b",
            home=tmp_path,
            env={"XDG_CONFIG_HOME": str(tmp_path / "elsewhere")},
        ),
        2,
    )
    assert "no manifest verifies" in one_error_line(
        run_cli("serve", archive, home=tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path / "elsewhere")}), 2
    )
    endpoint = ["--s3-endpoint-url", "http://127.0.0.1:9"]
    credentials = {"AWS_ACCESS_KEY_ID": "pith-test", "AWS_SECRET_ACCESS_KEY": "pith-test-secret"}
    down = run_cli("audit", "s3://no-such-bucket/archive", *endpoint, home=tmp_path, env=credentials)
    assert "connection refused" in one_error_line(down, 4)  # a store that is down: the run failed
    unset = run_cli("audit", "s3://no-such-bucket/archive", *endpoint, home=tmp_path)
    assert "no credentials found" in one_error_line(unset, 2)  # the setup's to fix
    exported = run_cli("export", archive, "--format", "bag", "--out", tmp_path / "bag", "-q", home=tmp_path)
    assert exported.returncode == 0 and exported.stderr == ""
    assert exported.stdout.startswith("exported 3 bundle versions")
