"""The crawler against our own mirror over real sockets: every seed kind, discovery of
the whole corpus from one seed, fallbacks, every fault mode, and stop-and-resume."""

import json
import signal
import subprocess
import sys
import time

import pytest

from pith_testkit.faults import FaultPlan
from storage.serving.source import KEYRING_NAME
from tests.plugins.cli import isolated_home
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.mirror import serve_process
from tests.plugins.tables import read_rows

pytestmark = pytest.mark.slow  # every test here crawls, serves or waits for over a second

REAL = "RLLQL6357CWNZYHNBMCYD3UK5B"
FAST_RETRIES = [
    "-s",
    "PITH_RETRY_BACKOFF_BASE=0.01",
    "-s",
    "PITH_RETRY_AFTER_MAX=1",
    "-s",
    "AUTOTHROTTLE_ENABLED=false",
]


def test_one_seed_reaches_the_whole_corpus_on_the_mirror_in_use(tmp_path, corpus_dir, corpus_catalog, mirror):
    server = mirror()
    result = run_cli_crawl(
        tmp_path, *FAST_RETRIES, f"pith:2019:{REAL}", resolver=server.url, out=tmp_path / "archive", corpus=corpus_dir
    )
    assert result.returncode == 0, result.stderr[-3000:]
    total = len(corpus_catalog)
    assert result.stat("records_found") == total
    assert (result.stat("verified"), result.stat("rejected"), result.stat("state_mismatch")) == (total, 0, 0)
    # the bundles name https://pith.science; every fetch still went to the mirror in use
    fetched = {r.record for r in server.requests if r.document == "bundle" and r.status == 200}
    assert fetched == set(corpus_catalog.suffixes)
    assert {r["pith_number"] for r in read_rows(tmp_path / "archive", "records")} == {
        corpus_catalog.entry(s).pith_number for s in corpus_catalog.suffixes
    }


def test_one_seed_reaches_every_record_through_record_pages_when_bundles_name_none(
    tmp_path, pages_corpus_dir, corpus_catalog
):
    """Over bundles that name no other record, as the registry's, `serve` links the
    records from its saved catalog's graph: a page and a bundle per record."""
    keyring = str(pages_corpus_dir / KEYRING_NAME)
    with serve_process(pages_corpus_dir, "--keyring", keyring) as (_, url):
        seed = corpus_catalog.suffixes[0]
        result = run_cli_crawl(
            tmp_path, *FAST_RETRIES, seed, resolver=url, out=tmp_path / "archive", corpus=pages_corpus_dir
        )
    assert result.returncode == 0, result.stderr[-3000:]
    total = len(corpus_catalog)
    assert (result.stat("records_found"), result.stat("verified"), result.stat("archived")) == (total, total, total)
    assert result.stat("pages_fetched") == total  # no bundle names its citers: every page is read
    assert 1.9 <= result.stats["pith/requests_per_record"] <= 2.2


def test_alias_seeds_resolve_through_the_resolver(tmp_path, corpus_dir, mirror):
    server = mirror()
    seeds = [
        "pith:RLLQL635",
        "RLLQL6357CWN",
        "1904.12043",
        "1904.12043v2",
        "arXiv:1904.12043",
        "10.48550/arxiv.1904.12043",
        "https://doi.org/10.48550/arxiv.1904.12043",
    ]
    result = run_cli_crawl(
        tmp_path, *FAST_RETRIES, "--no-follow", *seeds, resolver=server.url, out=tmp_path / "archive", corpus=corpus_dir
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (result.stat("records_found"), result.stat("verified"), result.stat("seeds_unresolved")) == (1, 1, 0)
    assert [r["pith_number"] for r in read_rows(tmp_path / "archive", "records")] == [f"pith:2019:{REAL}"]


def test_unknown_alias_is_counted_not_fatal(tmp_path, corpus_dir, mirror):
    result = run_cli_crawl(
        tmp_path,
        *FAST_RETRIES,
        "--no-follow",
        "--max-failures",
        "1",
        "2101.99999",
        REAL,
        resolver=mirror().url,
        out=tmp_path / "archive",
        corpus=corpus_dir,
    )
    assert result.returncode == 3  # done with failures, within --max-failures
    assert "partial (exit 3): 1 fetch failure" in result.stderr
    assert (result.stat("seeds_unresolved"), result.stat("verified")) == (1, 1)


def test_sitemap_index_seed_finds_every_record(tmp_path, corpus_dir, corpus_catalog, mirror):
    server = mirror(sitemap_page_size=10)
    result = run_cli_crawl(
        tmp_path,
        *FAST_RETRIES,
        "--no-follow",
        "sitemap",
        resolver=server.url,
        out=tmp_path / "archive",
        corpus=corpus_dir,
    )
    assert result.stat("records_found") == len(corpus_catalog)
    assert result.stat("verified") == len(corpus_catalog)
    assert any(r.path.startswith("/sitemap-") for r in server.requests)


def test_fallback_mirror_serves_what_the_primary_cannot(tmp_path, corpus_dir, mirror):
    primary = mirror(faults=FaultPlan(error_rate=1.0, error_status=500, paths=r"/bundle\.json$"))
    secondary = mirror()
    result = run_cli_crawl(
        tmp_path,
        *FAST_RETRIES,
        "--max-records",
        "5",
        "--mirror",
        secondary.url,
        "-s",
        "RETRY_TIMES=1",
        REAL,
        resolver=primary.url,
        out=tmp_path / "archive",
        corpus=corpus_dir,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    failed = {r.path for r in primary.requests if r.path.endswith("/bundle.json")}
    assert {r.status for r in primary.requests if r.path.endswith("/bundle.json")} == {500}
    # the bundle requests are spread over both; each the primary failed went to the secondary
    assert (result.stat("verified"), result.stat("mirror_fallbacks")) == (5, len(failed))
    assert failed
    assert len([r for r in secondary.requests if r.document == "bundle" and r.status == 200]) == 5


def twelve(catalog) -> list[str]:
    return sorted(catalog.suffixes)[:12]


def run_with_faults(tmp_path, corpus_dir, mirror, plan, *args):
    """Crawl twelve records, named as seeds, through a mirror injecting ``plan``."""
    server = mirror(faults=plan)
    seeds = twelve(server.source.catalog)
    return server, run_cli_crawl(
        tmp_path,
        *FAST_RETRIES,
        "--no-follow",
        "-s",
        "RETRY_TIMES=8",
        *args,
        *seeds,
        resolver=server.url,
        out=tmp_path / "archive",
        corpus=corpus_dir,
    )


def test_429_with_retry_after_is_honoured(tmp_path, corpus_dir, mirror):
    server, result = run_with_faults(tmp_path, corpus_dir, mirror, FaultPlan(rate_limit_every=4, retry_after=1))
    assert result.stat("verified") == 12
    assert result.stat("retry_after_honoured") == sum(r.status == 429 for r in server.requests) > 0


def test_server_errors_are_retried(tmp_path, corpus_dir, mirror):
    server, result = run_with_faults(tmp_path, corpus_dir, mirror, FaultPlan(fail_first=2, error_status=503))
    assert result.stat("verified") == 12
    assert result.stats.get("retry/count", 0) >= 24
    assert sum(r.status == 503 for r in server.requests) >= 24


def test_dropped_connections_and_truncated_bodies_are_retried(tmp_path, corpus_dir, mirror):
    plan = FaultPlan(drop_rate=0.2, truncate_rate=0.2, seed=3)
    server, result = run_with_faults(tmp_path, corpus_dir, mirror, plan)
    assert (result.stat("verified"), result.stat("rejected")) == (12, 0)  # a truncated body never reaches verification
    assert any(r.fault == "drop" for r in server.requests) and any(r.fault == "truncate" for r in server.requests)
    assert result.stats.get("retry/count", 0) > 0


def test_tampered_bundle_is_rejected_and_quarantined(tmp_path, corpus_dir, corpus_catalog, mirror):
    victim = twelve(corpus_catalog)[3]
    _, result = run_with_faults(tmp_path, corpus_dir, mirror, FaultPlan(tamper={victim}))
    assert (result.stat("verified"), result.stat("rejected/canonical_hash_mismatch")) == (11, 1)
    rejected = [v for v in read_rows(tmp_path / "archive", "verifications") if v["status"] == "rejected"]
    assert [(v["reason"], v["url"].split("/")[-2]) for v in rejected] == [("canonical_hash_mismatch", victim)]


def test_wrong_content_type_changes_nothing(tmp_path, corpus_dir, mirror):
    _, result = run_with_faults(tmp_path, corpus_dir, mirror, FaultPlan(wrong_content_type=True))
    assert result.stat("verified") == 12


def test_redirect_loop_and_oversize_end_as_named_failures(tmp_path, corpus_dir, corpus_catalog, mirror):
    looping, huge = twelve(corpus_catalog)[4:6]
    _, result = run_with_faults(
        tmp_path,
        corpus_dir,
        mirror,
        FaultPlan(redirect_loop={looping}, oversize={huge}),
        "-s",
        "DOWNLOAD_MAXSIZE=4000000",
        "--max-failures",
        "2",
    )
    assert result.returncode == 3, result.stderr[-3000:]  # done with failures, within the budget
    assert result.stat("bundle_failures/too_large") == 1
    assert result.stat("bundle_failures/fetch_failed") == 1
    failed = {
        (v["reason"], v["url"].split("/")[-2])
        for v in read_rows(tmp_path / "archive", "verifications")
        if v["status"] == "failed"
    }
    assert failed == {("too_large", huge), ("fetch_failed", looping)}


def test_the_per_host_cap_holds_without_a_download_delay(tmp_path, corpus_dir, corpus_catalog, mirror):
    """Scrapy 2.19 alone lets every queued request for a host go at once when no delay
    is set (crawler/downloading/downloader.py): the mirror sees no more than the cap in flight."""
    server = mirror(faults=FaultPlan(latency_ms=40))
    result = run_cli_crawl(
        tmp_path,
        *FAST_RETRIES,
        "-s",
        "CONCURRENT_REQUESTS_PER_DOMAIN=3",
        REAL,
        resolver=server.url,
        out=tmp_path / "archive",
        corpus=corpus_dir,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stat("archived") == len(corpus_catalog)
    assert server.peak_in_flight == 3


def test_stop_and_resume_loses_nothing(tmp_path, corpus_dir, corpus_catalog, mirror):
    server = mirror(faults=FaultPlan(latency_ms=150))
    jobdir = tmp_path / "job"
    stats_file = tmp_path / "stats-first.json"
    command = [
        sys.executable,
        "-m",
        "pith_archiver",
        "crawl",
        "--resolver",
        server.url,
        "--keyring",
        str(corpus_dir / KEYRING_NAME),
        "--out",
        str(tmp_path / "archive"),
        "--jobdir",
        str(jobdir),
        "--progress",
        "off",
        "-s",
        "CONCURRENT_REQUESTS_PER_DOMAIN=2",
        "-s",
        "AUTOTHROTTLE_ENABLED=false",
        REAL,
    ]
    env = {**__import__("os").environ, **isolated_home(tmp_path)}
    first = subprocess.Popen(
        [*command, "--stats-json", str(stats_file)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while sum(r.document == "bundle" and r.status == 200 for r in server.requests) < 8:
        assert time.monotonic() < deadline and first.poll() is None, "the first crawl never got going"
        time.sleep(0.05)
    first.send_signal(signal.SIGINT)  # Ctrl-C: a graceful stop that keeps the job
    _, stderr = first.communicate(timeout=60)
    assert first.returncode == 130  # interrupted: what was archived is committed
    assert f"resume with: pith-archiver crawl --resolver {server.url}" in stderr and f"--jobdir {jobdir}" in stderr
    assert "Traceback" not in stderr
    stopped = json.loads(stats_file.read_text())
    assert stopped["finish_reason"] == "shutdown"
    assert 0 < stopped["pith/archived"] < len(corpus_catalog)

    resumed = run_cli_crawl(
        tmp_path,
        "--resolver",
        server.url,
        "--keyring",
        str(corpus_dir / KEYRING_NAME),
        "--out",
        str(tmp_path / "archive"),
        "--jobdir",
        str(jobdir),
        REAL,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert stopped["pith/archived"] + resumed.stat("archived") == len(corpus_catalog)
    numbers = [r["pith_number"] for r in read_rows(tmp_path / "archive", "records")]
    assert len(numbers) == len(set(numbers)) == len(corpus_catalog)
