"""``pith-archiver verify``: one line per bundle and a closing count, ``--json`` lines
for machines, exit 0/1/2, over files, directories and http URLs."""

import json
import shutil
import subprocess
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from mirror.tamper import tampered
from pith_archiver.cli import main
from tests.plugins.core import real_bundle_paths


def verify_cli(*args: str):
    return CliRunner().invoke(main, ["verify", *args])


@pytest.fixture
def corpus(tmp_path, real_raw):
    """The real bundles, one tampered copy in a subdirectory, and a file that is not JSON."""
    for path in real_bundle_paths():
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "nested").mkdir()
    suffix, raw = sorted(real_raw.items())[0]
    (tmp_path / "nested" / "bad.json").write_bytes(tampered(raw, "title_hash_char_changed"))
    (tmp_path / "notes.txt").write_text("not a bundle")
    return tmp_path


@pytest.fixture
def served(corpus):
    """A plain stdlib web server on a loopback port, serving the corpus directory."""
    handler = partial(SimpleHTTPRequestHandler, directory=str(corpus))
    handler.log_message = lambda *args: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_lines_and_closing_count(corpus, real_docs):
    result = verify_cli(str(corpus))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 5                         # four bundles, notes.txt skipped, the count
    verified = [line for line in lines if line.startswith("VERIFIED")]
    assert sorted(line.split()[1] for line in verified) == sorted(doc["pith_number"] for doc in real_docs.values())
    (rejected,) = [line for line in lines if line.startswith("REJECTED")]
    first = real_docs[sorted(real_docs)[0]]
    assert rejected.split()[1] == first["pith_number"]
    assert "bad.json" in rejected
    assert "canonical_hash_mismatch at canonical_sha256" in rejected
    assert lines[-1] == "3 verified, 1 rejected"


def test_json_lines(corpus):
    result = verify_cli("--json", str(corpus))
    assert result.exit_code == 1
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(records) == 4
    assert {r["status"] for r in records} == {"verified", "rejected"}
    bad = next(r for r in records if r["status"] == "rejected")
    assert (bad["reason"], bad["path"]) == ("canonical_hash_mismatch", "canonical_sha256")
    assert bad["source"].endswith("bad.json")
    for record in records:
        if record["status"] == "verified":
            assert record["reason"] is None and record["path"] is None
            assert record["pith_number"].startswith("pith:") and len(record["bundle_sha256"]) == 64
    assert result.stderr.strip() == "3 verified, 1 rejected"


def test_all_verified_exits_zero(real_docs):
    paths = [str(p) for p in real_bundle_paths()]
    result = verify_cli(*paths)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[-1] == f"{len(paths)} verified, 0 rejected"


@pytest.mark.parametrize("args", [
    ["--no-such-option"],
    ["--max-bytes", "0"],
    ["--max-depth", "1"],
    ["--no-default-keys"],                        # nothing left to trust
    ["--keyring", "/nonexistent/keys.json"],
])
def test_usage_errors_exit_two(args):
    result = verify_cli(*args)
    assert result.exit_code == 2
    assert "VERIFIED" not in result.stdout


def test_directory_without_bundles_is_a_usage_error(tmp_path):
    (tmp_path / "readme.txt").write_text("nothing here")
    result = verify_cli(str(tmp_path))
    assert result.exit_code == 2
    assert "no *.json or *.jsonl files" in result.stderr


def test_unreadable_path_is_counted_and_partial(tmp_path):
    result = verify_cli(str(real_bundle_paths()[0]), str(tmp_path / "missing.json"))
    assert result.exit_code == 3                   # some could not be read, none rejected
    assert result.stdout.splitlines()[1].startswith("UNREADABLE")
    assert result.stdout.splitlines()[-1] == "1 verified, 0 rejected, 1 unreadable"


@pytest.mark.parametrize("mutation, args, reason", [
    (None, ["--max-bytes", "4096"], "too_large"),     # a real bundle is ~13 KB
    (None, ["--max-depth", "4"], "too_deep"),         # and 8 deep
    ("invalid_utf8", [], "invalid_utf8"),
    ("nan_literal", [], "non_finite_number"),
])
def test_limits_and_hostile_bytes(tmp_path, real_raw, mutation, args, reason):
    raw = next(iter(real_raw.values()))
    path = tmp_path / "doc.json"
    path.write_bytes(tampered(raw, mutation) if mutation else raw)
    result = verify_cli("--json", *args, str(path))
    assert result.exit_code == 1
    assert json.loads(result.stdout)["reason"] == reason


def test_http_urls(served, real_docs):
    names = [p.name for p in real_bundle_paths()]
    urls = [f"{served}/{name}" for name in names] + [f"{served}/nested/bad.json", f"{served}/missing.json"]
    result = verify_cli("--json", *urls)
    assert result.exit_code == 1
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["status"] for r in records] == ["verified"] * len(names) + ["rejected", "unreadable"]
    assert [r["pith_number"] for r in records[:3]] == [real_docs[n.split(".")[0]]["pith_number"] for n in names]
    assert "404" in records[-1]["detail"]


def test_http_urls_all_verified_exit_zero(served):
    result = verify_cli(*(f"{served}/{p.name}" for p in real_bundle_paths()))
    assert result.exit_code == 0


def test_exit_codes_from_a_real_process(corpus):
    """The installed entry point, as a shell would see it."""
    command = [sys.executable, "-c", "from pith_archiver.cli import main; main()", "verify"]
    real = [str(p) for p in real_bundle_paths()]
    codes = [subprocess.run(command + args, capture_output=True, timeout=60).returncode
             for args in (real, [str(corpus)], ["--max-depth", "0"])]
    assert codes == [0, 1, 2]
