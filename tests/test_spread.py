"""A crawl spread over the resolver and its mirrors (crawler.downloading.spread): every record once,
each source its share, trust from the keyring alone (a mirror serving bad copies is
counted, demoted, and its records had from another source). Real crawls, real servers."""

import json
from contextlib import ExitStack
from urllib.parse import urlsplit

import pytest

from pith_testkit.faults import FaultPlan
from tests.plugins.crawling import build_static_site, run_cli_crawl, serving

pytestmark = pytest.mark.slow  # every test here crawls, serves or waits for over a second


def host_stat(result, url: str, what: str) -> int:
    return result.stats.get(f"pith/hosts/{urlsplit(url).netloc}/{what}", 0)


def bundles_served(server) -> int:
    return sum(r.document == "bundle" and r.status == 200 for r in server.requests)


@pytest.fixture
def seeds_file(tmp_path, corpus_catalog):
    path = tmp_path / "seeds.txt"
    path.write_text("".join(f"{suffix}\n" for suffix in sorted(corpus_catalog.suffixes)))
    return path


def test_bundle_requests_are_spread_over_the_resolver_and_its_mirrors(
    tmp_path, corpus_dir, corpus_catalog, mirror, seeds_file
):
    servers = [mirror(faults=FaultPlan(latency_ms=20)) for _ in range(3)]
    mirrors = [arg for server in servers[1:] for arg in ("--mirror", server.url)]
    seeds = ["--no-follow", "--seeds-file", str(seeds_file)]
    result = run_cli_crawl(
        tmp_path, *mirrors, *seeds, resolver=servers[0].url, out=tmp_path / "archive", corpus=corpus_dir
    )
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    records = len(corpus_catalog.suffixes)
    assert result.stat("archived") == records
    served = [bundles_served(server) for server in servers]
    assert sum(served) == records  # each record fetched once, from one source
    # each source took its share: a mirror is held back (PITH_MIRROR_HOLD_BACK in flight) until
    # it has served good copies, and this crawl's records are all picked at its start
    assert all(count >= 2 for count in served), served
    assert result.stat("mirrors_demoted") == 0
    assert [host_stat(result, s.url, "requests") for s in servers] == served
    assert sum(host_stat(result, s.url, "records") for s in servers) == records
    assert "sources: 127.0.0.1:" in result.stdout


def test_a_mirror_serving_bad_copies_is_demoted_and_its_records_had_elsewhere(
    tmp_path, corpus_dir, corpus_catalog, mirror, seeds_file
):
    suffixes = sorted(corpus_catalog.suffixes)
    # the resolver answers slower than the mirror, so that the mirror has served three bad
    # copies before the resolver alone has answered every record, however loaded the machine
    good = mirror(faults=FaultPlan(latency_ms=150))
    bad = mirror(faults=FaultPlan(latency_ms=20, tamper=set(suffixes)))  # every copy it serves is tampered
    result = run_cli_crawl(
        tmp_path,
        "--mirror",
        bad.url,
        "--no-follow",
        "--seeds-file",
        str(seeds_file),
        "-s",
        "CONCURRENT_REQUESTS=4",
        resolver=good.url,
        out=tmp_path / "archive",
        corpus=corpus_dir,
    )
    # the tampered copies are evidence (quarantined, exit 1); every record is archived from the resolver
    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    assert result.stat("archived") == len(suffixes)
    assert result.stat("mirrors_demoted") == 1
    rejected = host_stat(result, bad.url, "rejected")
    assert 3 <= rejected == host_stat(result, bad.url, "requests") == result.stat("mirror_refetches")
    assert rejected == result.stat("rejected")
    assert rejected <= 3 + 2 * 4  # demoted after 3: after that only records already open (and refetched) went to it
    assert host_stat(result, good.url, "records") == len(suffixes)
    assert "mirror " + bad.url + " demoted after 3 bad copies" in result.stderr


def test_mirrors_from_the_registry_mirror_list_take_their_share(tmp_path):
    with ExitStack() as servers:
        urls = []
        for name in ("registry", "m1", "m2"):
            suffixes = build_static_site(tmp_path / name)
            urls.append(servers.enter_context(serving(tmp_path / name)))
        listed = [{"name": f"mirror {i}", "base_url": url} for i, url in enumerate(urls)]
        (tmp_path / "registry" / "pith-mirrors.json").write_text(
            json.dumps({"manifest_type": "pith_mirror_manifest", "manifest_version": "1.0", "mirrors": listed})
        )
        # one request at a time: the records are handed out once the listed mirrors' robots.txt
        # answered (a source whose robots.txt has not answered gets no bundle request)
        common = ["--resolver", urls[0], "--no-follow", *suffixes, "-s", "CONCURRENT_REQUESTS=1"]
        alone = run_cli_crawl(tmp_path, *common, "--out", str(tmp_path / "a"))
        spread = run_cli_crawl(tmp_path, *common, "--mirrors-from-registry", "--out", str(tmp_path / "b"))
    assert alone.returncode == spread.returncode == 0, spread.stderr[-3000:]
    assert [host_stat(alone, url, "requests") for url in urls] == [3, 0, 0]  # listed mirrors are not used unasked
    assert [host_stat(spread, url, "requests") for url in urls] == [1, 1, 1]
    assert spread.stat("archived") == 3


def test_each_source_is_held_to_its_own_politeness(tmp_path, corpus_dir, corpus_catalog, mirror, seeds_file):
    """Two sources on one host name (as on loopback): each its own download slot, so
    the per-host cap holds for each, and both are asked at once."""
    servers = [mirror(faults=FaultPlan(latency_ms=40)) for _ in range(2)]
    result = run_cli_crawl(
        tmp_path,
        "--mirror",
        servers[1].url,
        "--no-follow",
        "--seeds-file",
        str(seeds_file),
        "-s",
        "CONCURRENT_REQUESTS_PER_DOMAIN=2",
        resolver=servers[0].url,
        out=tmp_path / "archive",
        corpus=corpus_dir,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stat("archived") == len(corpus_catalog.suffixes)
    assert [server.peak_in_flight for server in servers] == [2, 2]
