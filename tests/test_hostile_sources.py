"""Hostile sources (the test kit's swap, forge, trickle, error and down modes, and a
robots.txt that trickles), as a mirror beside a good resolver and as the resolver
alone, on every crawl path: every record found ends accounted for (archived,
unchanged, rejected or failed, never silently missing or archived under another
record's name), a bad source is named and held back, and the exit status says what
happened. Real crawls, real servers."""

import hashlib
import json
import socket
import time
from urllib.parse import urlsplit

import pytest
from scrapy.statscollectors import StatsCollector
from scrapy.utils.test import get_crawler

from crawler.downloading.spread import SourcePool
from crawler.extensions.record_ledger import RecordLedger
from crawler.items import BundleItem
from crawler.stat_keys import CrawlStats, Stat
from pith.verdict import Status, Verdict
from pith_archiver import FIXTURES
from pith_archiver.crawl.report import outcome
from pith_archiver.exit_status import ExitStatus
from pith_archiver.output import counted
from pith_testkit.faults import FaultPlan
from tests.plugins.archives import corpus_raws, extended
from tests.plugins.crawling import build_static_site, run_cli_crawl, serving
from tests.plugins.tables import read_rows
from tests.test_frontier import start_worker

REAL = "RLLQL6357CWNZYHNBMCYD3UK5B"  # a real bundle of the corpus: every swap serves it
SEEDS = 16
QUICK = ["-s", "PITH_RETRY_BACKOFF_BASE=0.01", "--no-follow"]
# records handed out one at a time: the first once the mirror's robots.txt has answered
# (until then it gets no bundle request), so the mirror is surely asked
ONE_AT_A_TIME = ["-s", "CONCURRENT_REQUESTS=1"]


def host_stat(result, url: str, what: str) -> int:
    return result.stats.get(f"pith/hosts/{urlsplit(url).netloc}/{what}", 0)


def closed_port() -> str:
    """A loopback URL nothing listens on: a source that is down (connection refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def seeds(tmp_path, corpus_catalog) -> list[str]:
    """SEEDS records (never the swapped one), and a seeds file naming them."""
    chosen = sorted(s for s in corpus_catalog.suffixes if s != REAL)[:SEEDS]
    (tmp_path / "seeds.txt").write_text("".join(f"{suffix}\n" for suffix in chosen))
    return chosen


def crawl_seeds(tmp_path, corpus_dir, resolver: str, *args: str):
    """Crawl the seeds file (``seeds``) from ``resolver``, quickly, with ``args``."""
    seeds_file = ["--seeds-file", str(tmp_path / "seeds.txt")]
    return run_cli_crawl(
        tmp_path, *QUICK, *args, *seeds_file, resolver=resolver, out=tmp_path / "archive", corpus=corpus_dir
    )


def archived(tmp_path) -> set[str]:
    if not (tmp_path / "archive" / "tables" / "records").exists():  # nothing committed
        return set()
    return {row["pith_number"].rpartition(":")[2] for row in read_rows(tmp_path / "archive", "records")}


def accounted(result, records: int) -> None:
    """The invariant: every record found ends in one outcome, none unaccounted for."""
    outcomes = {k.rpartition("/")[2]: v for k, v in result.stats.items() if k.startswith("pith/records/")}
    assert result.stat("records_unaccounted") == 0, result.stderr[-3000:]
    assert sum(outcomes.values()) == result.stat("records_found") == records, outcomes


HOSTILE_MIRRORS = {
    "swap": FaultPlan(swap_with=REAL),
    "forge": FaultPlan(forge=True),
    "404": FaultPlan(error_rate=1.0, error_status=404, paths=r"/bundle\.json$"),
    "500": FaultPlan(error_rate=1.0, error_status=500, paths=r"/bundle\.json$"),
}


@pytest.mark.slow
@pytest.mark.parametrize("mode", [*HOSTILE_MIRRORS, "huge"])
def test_a_hostile_mirror_beside_a_good_resolver_costs_a_few_requests_and_no_record(
    tmp_path, corpus_dir, mirror, seeds, mode
):
    resolver = mirror()
    huge = FaultPlan(oversize=frozenset(seeds), oversize_bytes=8 * 1024 * 1024)  # past DOWNLOAD_MAXSIZE
    bad = mirror(faults=HOSTILE_MIRRORS.get(mode, huge)).url
    result = crawl_seeds(
        tmp_path, corpus_dir, resolver.url, *ONE_AT_A_TIME, "--mirror", bad, "-s", "DOWNLOAD_MAXSIZE=4000000"
    )
    # bad copies are evidence in quarantine (exit 1); failures to answer cost nothing (exit 0)
    assert result.returncode == (1 if mode in ("swap", "forge") else 0), result.stdout + result.stderr[-3000:]
    assert archived(tmp_path) == set(seeds)  # every record, each under its own name
    accounted(result, SEEDS)
    assert result.stat("records/archived") == SEEDS
    what = {"swap": "wrong_record", "forge": "rejected"}.get(mode, "failed")
    bad_copies = host_stat(result, bad, what)
    assert 1 <= bad_copies == host_stat(result, bad, "requests") <= 4  # held back to 2 in flight, demoted after 3
    assert host_stat(result, bad, "demoted") == (bad_copies >= 3)
    sources = next(line for line in result.stdout.splitlines() if line.startswith("sources: "))
    assert f"{urlsplit(bad).netloc} {counted(bad_copies, 'request')}, 0 records ({what} {bad_copies}" in sources
    if mode == "swap":
        rows = [r for r in read_rows(tmp_path / "archive", "verifications") if r["reason"] == "wrong_record"]
        assert rows and all(r["status"] == "rejected" and urlsplit(r["url"]).netloc in bad for r in rows)


@pytest.mark.slow
def test_a_mirror_that_is_down_costs_its_robots_txt_and_no_record(tmp_path, corpus_dir, mirror, seeds):
    resolver, down = mirror(), closed_port()
    result = crawl_seeds(tmp_path, corpus_dir, resolver.url, "--mirror", down)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert archived(tmp_path) == set(seeds)
    accounted(result, SEEDS)
    # its robots.txt, refused, is its first bad copy; until then it got no bundle request
    assert host_stat(result, down, "robots_failed") == 1
    failed = host_stat(result, down, "failed")
    assert failed == host_stat(result, down, "requests") <= 2  # then held back, and demoted after 3 bad copies
    assert host_stat(result, down, "demoted") == (failed == 2)
    assert "robots_failed 1" in next(line for line in result.stdout.splitlines() if line.startswith("sources: "))


@pytest.mark.slow
def test_a_mirror_trickling_its_robots_txt_holds_no_bundle(tmp_path, corpus_dir, mirror, seeds):
    """Its robots.txt gets PITH_ROBOTSTXT_DEADLINE, retries included; meanwhile the
    resolver takes every record (before: each bundle request sent to the mirror waited
    for its robots.txt's 5 attempts of DOWNLOAD_TIMEOUT each)."""
    resolver = mirror()
    slow = mirror(faults=FaultPlan(trickle=1.0, trickle_documents=("robots", "bundle")))
    started = time.monotonic()
    result = crawl_seeds(
        tmp_path,
        corpus_dir,
        resolver.url,
        "--mirror",
        slow.url,
        "-s",
        "PITH_ROBOTSTXT_DEADLINE=3",
        "-s",
        "DOWNLOAD_TIMEOUT=5",
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert archived(tmp_path) == set(seeds)
    accounted(result, SEEDS)
    assert host_stat(result, slow.url, "robots_failed") == 1  # a bad copy toward its demotion
    assert [r.document for r in slow.requests].count("robots") == 1  # a retry would start past the deadline
    assert host_stat(result, slow.url, "failed") == host_stat(result, slow.url, "requests") <= 2
    assert elapsed < 20  # before: 5 x 5 s for its robots.txt, then its bundles' timeouts


def test_a_source_whose_robots_txt_has_not_answered_gets_no_bundle_while_another_can():
    resolver, mirror = "http://resolver.test", "http://mirror.test"
    pool = SourcePool([resolver, mirror], demote_after=3, hold_back=2)
    pool.robots_awaited(mirror)
    assert {pool.pick() for _ in range(5)} == {resolver}
    assert pool.pick(tried=[resolver]) == mirror  # no other source left: the record waits for it
    pool.robots_answered(mirror, fetched=False)
    assert pool.pick() == mirror  # answered: it takes its share (the resolver has 5 outstanding)
    pool.judged(mirror, "failed")
    assert mirror not in pool.demoted
    pool.judged(mirror, "failed")
    assert mirror in pool.demoted  # its robots.txt counted: demoted after 3 bad copies


@pytest.mark.slow
def test_a_trickling_mirror_costs_about_three_timeouts(tmp_path, corpus_dir, mirror, seeds):
    resolver, slow = mirror(), mirror(faults=FaultPlan(trickle=1.0))
    started = time.monotonic()
    result = crawl_seeds(tmp_path, corpus_dir, resolver.url, "-s", "DOWNLOAD_TIMEOUT=2", "--mirror", slow.url)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert archived(tmp_path) == set(seeds)
    accounted(result, SEEDS)
    assert host_stat(result, slow.url, "failed") == host_stat(result, slow.url, "requests") <= 4
    assert result.stats.get("retry/count", 0) == 0  # a slow mirror's request falls back, it is not retried there
    assert elapsed < 30  # two rounds of 2 s timeouts, not SEEDS x 5 attempts


@pytest.mark.slow
@pytest.mark.parametrize(
    ("path", "plan"),
    [
        ("one seed", FaultPlan(swap_with=REAL)),
        ("seeds file", FaultPlan(swap_with=REAL)),
        ("sitemap", FaultPlan(swap_with=REAL)),
        ("seeds file", FaultPlan(forge=True)),
        ("seeds file", FaultPlan(error_rate=1.0, error_status=404, paths=r"/bundle\.json$")),
        ("seeds file", FaultPlan(trickle=1.0)),
        ("seeds file", None),  # down: nothing listens
    ],
)
def test_a_hostile_resolver_alone_never_ends_ok(tmp_path, corpus_dir, corpus_catalog, mirror, seeds, path, plan):
    resolver = closed_port() if plan is None else mirror(faults=plan, sitemap_page_size=10).url
    named = {"one seed": [seeds[0]], "seeds file": ["--seeds-file", str(tmp_path / "seeds.txt")]}
    result = run_cli_crawl(
        tmp_path,
        *QUICK,
        *("-s", "RETRY_TIMES=0", "-s", "DOWNLOAD_TIMEOUT=2"),
        *named.get(path, ["sitemap"]),
        resolver=resolver,
        out=tmp_path / "archive",
        corpus=corpus_dir,
    )
    found = {"one seed": 1, "seeds file": SEEDS}.get(path, len(corpus_catalog))
    assert result.returncode in (ExitStatus.REJECTED, ExitStatus.FAILED), result.stdout + result.stderr[-3000:]
    accounted(result, found)
    if plan is not None and plan.swap_with:  # only the swapped record is itself, and only when it was asked for
        assert archived(tmp_path) == ({REAL} if path == "sitemap" else set())
        assert result.stat("bundle_failures/wrong_record") == found - len(archived(tmp_path))


@pytest.mark.slow
def test_a_cross_check_against_a_swapping_mirror_flags_no_split_view(tmp_path, corpus_dir, mirror, seeds):
    resolver, swapping = mirror(), mirror(faults=FaultPlan(swap_with=REAL))
    result = crawl_seeds(tmp_path, corpus_dir, resolver.url, "--cross-check", "4", "--mirror", swapping.url)
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]  # the wrong copies, in quarantine
    assert archived(tmp_path) == set(seeds)
    accounted(result, SEEDS)
    assert (result.stat("equivocations"), result.stat("cross_check/fork")) == (0, 0)
    assert host_stat(result, swapping.url, "wrong_record") >= 4  # each sampled record's copy, named as such


@pytest.mark.slow
def test_a_state_of_another_record_is_named_wrong_record(tmp_path, corpus_dir, mirror, seeds):
    server = mirror(faults=FaultPlan(swap_with=REAL, swap_documents=("state",)))
    result = crawl_seeds(tmp_path, corpus_dir, server.url, "--check-state")
    assert archived(tmp_path) == set(seeds)
    accounted(result, SEEDS)
    rows = [r for r in read_rows(tmp_path / "archive", "verifications") if r["reason"] == "wrong_record"]
    assert len(rows) == SEEDS and all(r["url"].endswith("/state.json") for r in rows)


@pytest.mark.slow
def test_a_frontier_worker_beside_a_swapping_mirror_accounts_for_every_record(
    tmp_path, corpus_dir, mirror, seeds, redis_url
):
    resolver, swapping = mirror(), mirror(faults=FaultPlan(swap_with=REAL))
    worker = start_worker(
        tmp_path, "a", resolver, corpus_dir, redis_url, "--no-follow", "--mirror", swapping.url, *seeds
    )
    assert worker.wait(timeout=90) == 1, (tmp_path / "a.log").read_text()[-3000:]
    stats = json.loads((tmp_path / "a.json").read_text())
    assert stats.get(Stat.RECORDS_UNACCOUNTED, 0) == 0
    assert stats["pith/records/archived"] == stats[Stat.RECORDS_FOUND] == SEEDS + 1  # the worker's own seed, REAL
    assert archived(tmp_path) == {*seeds, REAL}
    wrong = stats["pith/rejected/wrong_record"]
    assert 1 <= wrong <= 4 and stats.get("pith/mirrors_demoted", 0) == (wrong >= 3)  # held back, then demoted


def test_a_record_answered_by_another_is_unaccounted_for_and_fails_the_run(caplog):
    stats = StatsCollector(get_crawler())
    ledger = RecordLedger(stats)
    asked, served = "A" * 26, "B" * 26
    ledger.opened(asked)

    item = BundleItem(
        url=f"http://m/pith/{asked}/bundle.json",
        body=b"{}",
        raw_sha256=hashlib.sha256(b"{}").hexdigest(),
        fetched_at="2026-01-01T00:00:00Z",
        suffix=asked,
        verdict=Verdict(Status.VERIFIED, pith_number=f"pith:2019:{served}"),
    )
    ledger.item_scraped(item)  # a verified bundle of another record settles nothing asked for
    ledger.closed("finished")
    assert stats.get_value(Stat.RECORDS_UNACCOUNTED) == 1
    assert asked in caplog.text
    crawl = CrawlStats.of({**stats.get_stats(), Stat.BUNDLES_FETCHED: 1, Stat.MANIFEST: "m"})
    result = outcome(crawl, (1.0, True))
    assert result.status == ExitStatus.FAILED and "records unaccounted for: 1" in result.why


@pytest.mark.slow
def test_an_alias_resolved_to_another_record_is_a_wrong_record(tmp_path, corpus_dir, corpus_catalog, mirror, seeds):
    """A resolver sending the arXiv id, DOI and short number of REAL to another record:
    that record verifies, but does not carry the alias asked for."""
    other = seeds[0]
    server = mirror(faults=FaultPlan(misresolve=other))
    aliases = ["arXiv:1904.12043", "10.48550/arxiv.1904.12043", "pith:RLLQL635"]
    result = run_cli_crawl(
        tmp_path,
        *QUICK,
        *aliases,
        resolver=server.url,
        out=tmp_path / "archive",
        corpus=corpus_dir,
    )
    assert result.returncode == ExitStatus.FAILED, result.stdout + result.stderr[-3000:]
    assert result.stat("bundle_failures/wrong_record") == 1  # the three aliases resolved to one record, claimed once
    assert archived(tmp_path) == set()
    accounted(result, 1)


@pytest.mark.slow
def test_a_swapping_mirror_the_registry_lists_costs_no_record(tmp_path, corpus_dir, mirror):
    """--mirrors-from-registry: the resolver's mirror list names a mirror that swaps."""
    swapping = mirror(faults=FaultPlan(swap_with=REAL))
    suffixes = build_static_site(tmp_path / "registry")
    listed = [{"name": "swapping", "base_url": swapping.url}]
    (tmp_path / "registry" / "pith-mirrors.json").write_text(
        json.dumps({"manifest_type": "pith_mirror_manifest", "manifest_version": "1.0", "mirrors": listed})
    )
    with serving(tmp_path / "registry") as registry:
        result = run_cli_crawl(
            tmp_path,
            *QUICK,
            *ONE_AT_A_TIME,
            "--mirrors-from-registry",
            *suffixes,
            resolver=registry,
            out=tmp_path / "archive",
        )
    assert result.returncode in (0, 1), result.stdout + result.stderr[-3000:]
    assert archived(tmp_path) == set(suffixes)
    accounted(result, len(suffixes))
    asked = host_stat(result, swapping.url, "requests")
    assert asked >= 1  # the listed mirror took its share: REAL's copy good, any other a wrong record
    assert host_stat(result, swapping.url, "records") + host_stat(result, swapping.url, "wrong_record") == asked
    assert host_stat(result, swapping.url, "wrong_record") == result.stat("rejected/wrong_record")


@pytest.mark.slow
def test_a_stale_mirror_is_counted_against_it_and_the_newer_versions_stay_current(tmp_path, corpus_dir, mirror):
    """The resolver served newer versions last run; the mirror serves the older ones."""
    raws = corpus_raws(corpus_dir)
    chosen = sorted(set(raws) - {p.name.split(".")[0] for p in FIXTURES.glob("*.bundle.json")})[:8]
    (tmp_path / "newer").mkdir()
    for suffix in chosen:
        (tmp_path / "newer" / f"{suffix}.bundle.json").write_bytes(extended(raws[suffix], "2026-06-10T00:00:00Z"))
    (tmp_path / "seeds.txt").write_text("".join(f"{suffix}\n" for suffix in chosen))
    resolver, stale = mirror(directory=tmp_path / "newer"), mirror()
    assert crawl_seeds(tmp_path, corpus_dir, resolver.url).returncode == 0
    newer = {row["pith_number"]: row["bundle_sha256"] for row in read_rows(tmp_path / "archive", "records")}

    again = crawl_seeds(tmp_path, corpus_dir, resolver.url, *ONE_AT_A_TIME, "--mirror", stale.url)
    assert again.returncode == 0, again.stdout + again.stderr[-3000:]
    accounted(again, len(chosen))
    assert 1 <= host_stat(again, stale.url, "stale") == host_stat(again, stale.url, "requests") <= 4
    current = {
        r["pith_number"]: r["bundle_sha256"]
        for r in read_rows(tmp_path / "archive", "records")
        if r["accepted_as_current"]
    }
    assert current == newer


@pytest.mark.slow
def test_a_mirror_whose_robots_txt_forbids_the_records_leaves_them_to_the_resolver(tmp_path, corpus_dir, mirror, seeds):
    """robots.txt is that source's policy: a record it forbids is fetched from another
    source, never counted as forbidden while one allows it, and the mirror is not
    demoted for it (its policy is not a bad copy)."""
    resolver, polite = mirror(), mirror(disallow=("/pith/",))
    result = crawl_seeds(tmp_path, corpus_dir, resolver.url, *ONE_AT_A_TIME, "--mirror", polite.url)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert archived(tmp_path) == set(seeds)
    accounted(result, SEEDS)
    assert result.stat("records/archived") == SEEDS
    assert result.stat("robots_forbidden") == 0
    assert result.stats.get("robotstxt/forbidden", 0) >= 1  # asked of the mirror, refused by its robots.txt
    assert host_stat(result, polite.url, "demoted") == 0
