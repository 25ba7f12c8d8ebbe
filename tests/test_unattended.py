"""Runs a scheduler can leave alone: every setup mistake is one line and exit 2 before
any request, a run that archived nothing or less than asked never exits 0, and a
terminal or cron sees a summary, not Scrapy's log. All through the real command line."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crawler.stat_keys import CrawlStats
from pith_archiver.crawl.report import outcome
from pith_archiver.exit_status import ExitStatus
from pith_testkit.faults import FaultPlan
from tests.plugins.cli import isolated_home, run_cli
from tests.plugins.crawling import run_cli_crawl

REAL = "RLLQL6357CWNZYHNBMCYD3UK5B"


def one_error_line(proc) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.fixture
def refused_url():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.slow
def test_an_unreachable_resolver_fails_the_run_and_commits_nothing(tmp_path, refused_url):
    proc = run_cli("crawl", "--resolver", refused_url, "--out", "x", "-s", "RETRY_TIMES=1", REAL, home=tmp_path)
    assert proc.returncode == 4, proc.stderr
    assert "failed (exit 4): no bundle could be fetched, nothing committed" in proc.stderr
    assert "fetch failures: fetch_failed 1" in proc.stdout
    assert not list((tmp_path / "x").rglob("*.json"))  # no empty manifest, no key document
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, said",
    [
        (["--resolver", "foo"], "--resolver 'foo' is not an http(s) URL"),
        (["--resolver", "ftp://example.org"], "is not an http(s) URL"),
        (["--mirror", "127.0.0.1:8080"], "--mirror '127.0.0.1:8080' is not an http(s) URL"),
        (["--keyring", "notjson.json"], "notjson.json:"),
        (["--keyring", "empty.json", "--no-default-keys"], "empty.json:"),
        (["--archive-keyring", "notjson.json"], "--archive-keyring notjson.json: not JSON"),
        (["--no-default-keys"], "the keyring is empty"),
        (["--out", "/proc/nope"], "--out: /proc/nope is not a writable folder"),
        (["--out", "afile"], "is not a folder"),
        (["--signing-key", "notjson.json"], "--signing-key notjson.json: not a usable signing key"),
        (["--frontier", "redis://127.0.0.1:1/0"], "--frontier:"),
        (["-s", "NOEQUALS"], "-s 'NOEQUALS' is not NAME=VALUE"),
        (["not-a-seed!"], "seed:"),
        (["--seeds-file", "seeds.txt"], "seeds.txt, line 4: 'not-a-seed!' is not a Pith number"),
        (["--seeds-file", "latin1.txt"], "latin1.txt: not UTF-8 text"),
    ],
)
def test_setup_mistakes_are_one_line_and_exit_2_before_any_request(tmp_path, mirror, args, said):
    server = mirror()
    (tmp_path / "notjson.json").write_text("not json")
    (tmp_path / "empty.json").write_text('{"keys": 3}')
    (tmp_path / "afile").write_text("")
    (tmp_path / "seeds.txt").write_text(f"# two good, then a bad one\n{REAL}\n\nnot-a-seed!\n")
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9\n")
    resolver = [] if "--resolver" in args else ["--resolver", server.url]
    seeds = [] if "not-a-seed!" in args or "--seeds-file" in args else [REAL]
    proc = run_cli("crawl", *resolver, "--out", "y", *args, *seeds, home=tmp_path)
    assert proc.returncode == 2, proc.stderr
    line = one_error_line(proc)
    assert line.startswith("Error: ") and said in line, line
    assert server.requests == []
    assert not (tmp_path / "y" / "manifests").exists()
    assert not (tmp_path / "config").exists() or "--signing-key" in args  # no key made for a run that never started


def test_a_missing_bucket_is_one_line_before_any_request(tmp_path, mirror, s3_endpoint, s3_env):
    server = mirror()
    proc = run_cli(
        "crawl",
        "--resolver",
        server.url,
        "--out",
        "s3://nosuchbucket/x",
        "--s3-endpoint-url",
        s3_endpoint,
        REAL,
        env=s3_env,
        home=tmp_path,
    )
    assert proc.returncode == 2
    assert "bucket nosuchbucket does not exist" in one_error_line(proc)
    assert server.requests == []


@pytest.mark.slow
def test_a_keyring_that_verifies_nothing_never_starts_a_scrapy_crawl(tmp_path, static_site):
    """``scrapy crawl pith`` has no verifier switched off with a warning: a broken
    keyring stops it before anything is fetched or archived."""
    base, _, _ = static_site
    (tmp_path / "bad.json").write_text("not json")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "scrapy",
            "crawl",
            "pith",
            "-a",
            f"resolver={base}",
            "-a",
            f"seeds={REAL}",
            "-s",
            f"PITH_ARCHIVE={tmp_path / 'archive'}",
            "-s",
            f"PITH_KEYRINGS={tmp_path / 'bad.json'}",
        ],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[1],
        timeout=120,
        env={**os.environ, **isolated_home(tmp_path), "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert proc.returncode != 0
    assert "KeyringError" in proc.stderr
    assert not (tmp_path / "archive" / "manifests").exists()


@pytest.mark.slow
def test_a_clean_run_prints_a_summary_and_keeps_scrapys_log_in_a_file(tmp_path, corpus_dir, mirror):
    proc = run_cli_crawl(tmp_path, REAL, resolver=mirror().url, out="archive", corpus=corpus_dir, logged=False)
    assert proc.returncode == 0, proc.stderr
    assert "ok (exit 0): done" in proc.stdout
    assert "Scrapy" not in proc.stdout + proc.stderr and "Dumping" not in proc.stdout + proc.stderr
    assert len(proc.stdout.splitlines()) <= 8, proc.stdout
    log = Path(next(line[5:] for line in proc.stdout.splitlines() if line.startswith("log: ")))
    assert "Dumping Scrapy stats" in log.read_text()
    assert log.is_relative_to(tmp_path / "cache")  # the archive folder holds only the archive


@pytest.mark.slow
def test_quiet_prints_one_line(tmp_path, corpus_dir, mirror):
    proc = run_cli_crawl(tmp_path, "-q", REAL, resolver=mirror().url, out="archive", corpus=corpus_dir, logged=False)
    assert proc.returncode == 0, proc.stderr
    assert [line for line in proc.stderr.splitlines() if not line.startswith("created the archiver signing key")] == []
    assert len(proc.stdout.splitlines()) == 1
    assert proc.stdout.startswith("ok (exit 0): archived ") and "requests" in proc.stdout


@pytest.mark.slow
def test_verbose_puts_the_log_on_stderr(tmp_path, corpus_dir, mirror):
    proc = run_cli_crawl(
        tmp_path, "-v", "--no-follow", REAL, resolver=mirror().url, out="archive", corpus=corpus_dir, logged=False
    )
    assert proc.returncode == 0
    assert "Dumping Scrapy stats" in proc.stderr and "log: " not in proc.stdout


@pytest.mark.slow
def test_fetch_failures_within_the_budget_are_partial_beyond_it_failed(tmp_path, corpus_dir, corpus_catalog, mirror):
    seeds = sorted(corpus_catalog.suffixes)[:10]
    server = mirror(faults=FaultPlan(oversize={seeds[0]}))
    common = ["--no-follow", "-s", "DOWNLOAD_MAXSIZE=4000000", *seeds]
    within = run_cli_crawl(
        tmp_path, "--max-failures", "10%", *common, resolver=server.url, out="archive", corpus=corpus_dir, logged=False
    )
    assert within.returncode == 3, within.stderr
    assert "fetch failures: too_large 1" in within.stdout
    assert "partial (exit 3): 1 fetch failure (within --max-failures)" in within.stderr
    beyond = run_cli_crawl(
        tmp_path, "--max-failures", "0", *common, resolver=server.url, out="archive", corpus=corpus_dir, logged=False
    )
    assert beyond.returncode == 4
    assert "more than --max-failures allows" in beyond.stderr


@pytest.mark.slow
def test_rejections_exit_1_and_are_counted_by_reason(tmp_path, corpus_dir, corpus_catalog, mirror):
    seeds = sorted(corpus_catalog.suffixes)[:4]
    proc = run_cli_crawl(
        tmp_path,
        "--no-follow",
        *seeds,
        resolver=mirror(faults=FaultPlan(tamper={seeds[1]})).url,
        out="archive",
        corpus=corpus_dir,
        logged=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert "rejections: " in proc.stdout and "rejected (exit 1): 1 bundle rejected" in proc.stderr


@pytest.mark.slow
def test_stats_json_carries_what_the_summary_says(tmp_path, corpus_dir, mirror):
    proc = run_cli_crawl(
        tmp_path,
        "--no-follow",
        "--stats-json",
        "s.json",
        REAL,
        resolver=mirror().url,
        out="archive",
        corpus=corpus_dir,
        logged=False,
    )
    stats = json.loads((tmp_path / "s.json").read_text())
    assert proc.returncode == 0
    assert stats["downloader/request_count"] >= 1 and stats["pith/archived"] == 1


@pytest.mark.slow
def test_an_unforeseen_error_is_one_line_unless_asked_for_the_traceback(tmp_path):
    """An OSError nobody turned into a named error still ends as one line and exit 4 (met
    here in the test kit's command line, which runs in pith-archiver's command group)."""
    proc = run_cli("corpus", "generate", "--records", "1", "--out", "/proc/no/such/corpus", home=tmp_path, kit=True)
    assert proc.returncode == 4
    assert "rerun with -vv for the traceback" in proc.stderr
    assert one_error_line(proc).startswith("Error: ") and "/proc/no" in proc.stderr


@pytest.mark.slow
def test_the_demo_prints_an_audit_command_that_comes_out_clean(tmp_path):
    demo = run_cli("crawl", timeout=300, home=tmp_path)
    assert demo.returncode == 0, demo.stderr
    command = next(line.split() for line in demo.stdout.splitlines() if line.startswith("  pith-archiver audit "))
    audit = run_cli(*command[1:], home=tmp_path)
    assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr
    assert audit.stdout.splitlines()[-1].startswith("clean: ")


def test_a_worker_that_lost_its_frontier_fails_even_when_the_others_had_every_record():
    """A shared worker that fetched nothing is fine when the others took it all, but not
    when it stopped because the frontier was gone: the crawl may be far from done."""
    lost = {"pith/frontier_lost": "unreachable for 300 s: Connection refused", "pith/records_found": 0}
    result = outcome(CrawlStats.of(lost), (0.0, False), shared=True)
    assert result.status == ExitStatus.FAILED
    assert "unreachable for 300 s" in result.why
    assert outcome(CrawlStats.of({"pith/records_found": 0}), (0.0, False), shared=True).status == ExitStatus.OK
