"""Text from outside (a WARC file, a bundle, a remote server) never reaches a terminal
or a log raw: no ESC, BEL, CR, C1 control or bidi override byte in what ``audit``,
``verify``, the crawl summary and the log print, and ``--json`` lines stay JSON."""

import gzip
import io
import json
import logging
from datetime import datetime, timezone

import pytest

from pith.printable import printable
from pith.signing import Signer
from pith_archiver.crawl.report import report
from pith_archiver.output import escape_logs
from storage.archive.folder_store import LocalStore
from storage.capture.exchanges import Exchange
from storage.capture.warc import WarcPolicy
from storage.writing.writer import ArchiveWriter
from tests.plugins.cli import run_cli
from tests.plugins.core import real_bundle_paths

HOSTILE = "\x1b]0;owned\x07\x1b[31mred\x1b[0m\r\x9b2J\u202eevil"
RAW = ("\x1b", "\x07", "\r", "\x9b", "\u202e")


def assert_clean(text: str) -> None:
    assert not any(char in text for char in RAW), repr(text)


def test_printable_escapes_controls_and_keeps_lines():
    assert printable(HOSTILE) == "\\u001b]0;owned\\u0007\\u001b[31mred\\u001b[0m\\u000d\\u009b2J\\u202eevil"
    assert printable("two\tcolumns\nand a line: é ✓") == "two\tcolumns\nand a line: é ✓"
    assert json.loads(f'"{printable(HOSTILE)}"') == HOSTILE  # a JSON string escape: --json stays JSON


@pytest.mark.slow  # an archive written and audited: over a second
def test_audit_of_a_warc_carrying_escape_codes_prints_no_control_byte(tmp_path):
    signer = Signer.generate("hygiene-archiver")
    signer.save(tmp_path / "config" / "pith-archiver" / "signing-key.json")  # this machine's key: trusted
    writer = ArchiveWriter(LocalStore(tmp_path / "archive"), signer, warc=WarcPolicy(), warc_info={}).open()
    when = datetime.now(timezone.utc)
    headers = [("Content-Type", "application/json")]
    writer.warc.record(
        Exchange("http://127.0.0.1:9/pith/R/bundle.json", "GET", [], b"", 200, "HTTP/1.1", headers, b"{}", when)
    )
    writer.commit({}, {})
    warc = next((tmp_path / "archive" / "warc").glob("*.warc.gz"))
    with open(warc, "ab") as handle:  # a gzip member of escape codes appended
        handle.write(gzip.compress(HOSTILE.encode()))

    text = run_cli("audit", tmp_path / "archive")
    assert text.returncode == 1 and "warc_invalid" in text.stdout, text.output
    assert_clean(text.stdout + text.stderr)
    assert "\\u001b]0;owned\\u0007" in text.stdout  # said, escaped
    as_json = run_cli("audit", "--json", tmp_path / "archive")
    assert_clean(as_json.stdout + as_json.stderr)
    found = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert any("\x1b]0;owned\x07" in item.get("detail", "") for item in found)  # the data intact, once decoded


def test_verify_of_a_bundle_with_escapes_in_its_fields_prints_no_control_byte(tmp_path):
    bundle = json.loads(real_bundle_paths()[0].read_text())
    bundle["pith_number"] = f"pith:2018:{HOSTILE}"
    path = tmp_path / "hostile.bundle.json"
    path.write_text(json.dumps(bundle))
    text = run_cli("verify", path)
    assert text.returncode == 1 and "pith_number_mismatch" in text.stdout
    assert_clean(text.stdout + text.stderr)
    as_json = run_cli("verify", "--json", path)
    assert_clean(as_json.stdout + as_json.stderr)
    assert json.loads(as_json.stdout.splitlines()[0])["pith_number"] == bundle["pith_number"]


def test_the_crawl_summary_prints_no_control_byte(capsys):
    stats = {  # what a registry's bundles (event types) and a registry's mirror list (hosts) put in the stats
        "pith/bundles_fetched": 2,
        "pith/verified": 2,
        "pith/merge_inferred": 2,
        f"pith/merge_inferred/{HOSTILE}": 2,
        "pith/hosts/registry.example:443/requests": 1,
        f"pith/hosts/{HOSTILE}:443/requests": 1,
    }
    report(stats, "archive", (0.0, False))
    out = capsys.readouterr()
    assert "\\u001b]0;owned" in out.out  # the summary names them, escaped
    assert_clean(out.out + out.err)


def test_log_lines_are_escaped_by_every_root_handler():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        escape_logs()
        logging.getLogger("storage.serving.server").warning("400 for a malformed request: %s", HOSTILE)
    finally:
        root.removeHandler(handler)
    assert "\\u001b]0;owned" in stream.getvalue()
    assert_clean(stream.getvalue())


@pytest.mark.slow  # a crawl in a subprocess
def test_a_crawl_of_a_registry_speaking_escape_codes_prints_and_logs_none(tmp_path, corpus_dir, mirror):
    """A resolver announcing a key named with escape codes, and bundles holding an event
    type so named: the notice, the summary and Scrapy's log (``-v``: on stderr) name
    them escaped."""
    from pith_testkit.corpus import corpus_signer
    from storage.serving.source import KEYRING_NAME
    from tests.plugins.archives import corpus_raws
    from tests.plugins.crawling import run_cli_crawl
    from tests.plugins.mirror import SMALL_CORPUS_SEED
    from tests.tamper import with_new_event
    from tests.test_registry_changes import seeded, site

    raws = corpus_raws(corpus_dir)
    suffixes = list(raws)[:2]
    signer = corpus_signer(SMALL_CORPUS_SEED)
    bundles = {suffix: with_new_event(raws[suffix], signer, f"review_{HOSTILE}") for suffix in suffixes}
    announced = {**Signer.generate("announced").public_document(), "key_id": f"key-{HOSTILE}"}
    server = mirror(site(tmp_path / "site", corpus_dir, bundles, key_document=announced))
    result = run_cli_crawl(
        tmp_path, *seeded(tmp_path, suffixes, corpus_dir / KEYRING_NAME), resolver=server.url, out=tmp_path / "archive"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "notice: the registry announces signing key key-\\u001b]0;owned" in result.stderr
    assert "merge inferred: 2 verified bundles" in result.stdout
    assert "unpinned key: the registry announces key-\\u001b]0;owned" in result.stdout  # the summary, escaped
    assert_clean(result.stdout + result.stderr)


@pytest.mark.slow  # serve in a subprocess
def test_serve_refuses_heads_carrying_escape_codes_and_logs_no_traceback(tmp_path):
    """Clients sending escape codes in the request line, most gone before the answer:
    400s, and serve's log (``-vv``: every request) holds neither a raw control byte nor
    a traceback."""
    import os
    import signal
    import socket
    import subprocess
    import sys

    from pith_archiver import FIXTURES
    from tests.plugins.cli import isolated_home

    serve = subprocess.Popen(
        [sys.executable, "-m", "pith_archiver", "serve", str(FIXTURES), "-vv", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env={**os.environ, **isolated_home(tmp_path)},
    )
    try:
        host, port = serve.stdout.readline().decode().split("//")[1].strip().rstrip("/").split(":")
        head = f"GET /pith/{HOSTILE} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        for _ in range(20):  # gone at once
            with socket.create_connection((host, int(port)), timeout=10) as client:
                client.sendall(head)
        with socket.create_connection((host, int(port)), timeout=10) as client:
            client.sendall(head)
            assert client.recv(64).startswith(b"HTTP/1.1 400")
    finally:
        serve.send_signal(signal.SIGTERM)
        _, err = serve.communicate(timeout=30)
    log = err.decode("utf-8", "replace")
    assert "Traceback" not in log, log[-3000:]
    assert_clean(log)
