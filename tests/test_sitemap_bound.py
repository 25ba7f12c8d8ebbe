"""--max-records bounds the sitemap walk, not only the records: once the budget is
claimed no further sitemap page is requested, alone and with a shared frontier. Our
mirror serves a sitemap index over many small pages; its request log counts them."""

import math

import pytest

from tests.plugins.crawling import run_cli_crawl
from tests.plugins.tables import read_rows
from tests.test_crawl_mirror import FAST_RETRIES
from tests.test_frontier import committed_records, finish, start_worker

PAGE_SIZE, BUDGET = 1, 5


def sitemaps_fetched(server) -> int:
    return sum(r.document == "sitemap" and r.status == 200 for r in server.requests)


def every_sitemap(catalog) -> int:
    """The index and its pages."""
    return 1 + math.ceil(len(catalog) / PAGE_SIZE)


@pytest.mark.slow
def test_max_records_stops_the_sitemap_walk(tmp_path, corpus_dir, corpus_catalog, mirror):
    server = mirror(sitemap_page_size=PAGE_SIZE)
    result = run_cli_crawl(
        tmp_path,
        *FAST_RETRIES,
        "--max-records",
        str(BUDGET),
        "sitemap",
        resolver=server.url,
        out=tmp_path / "archive",
        corpus=corpus_dir,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(read_rows(tmp_path / "archive", "records")) == result.stat("verified") == BUDGET
    fetched = sitemaps_fetched(server)
    assert fetched <= 1 + math.ceil(BUDGET / PAGE_SIZE) + 1 < every_sitemap(corpus_catalog) // 4
    assert result.stat("sitemaps_skipped_max_records") == every_sitemap(corpus_catalog) - fetched


@pytest.mark.parametrize("seed", ["sitemap", "another host"])
def test_max_records_stops_the_sitemap_walk_of_a_shared_frontier(
    tmp_path, corpus_dir, corpus_catalog, mirror, redis_url, seed
):
    """The resolver's sitemap is a task of the frontier; one on an --allow-host host is no
    task (an entry names none but the worker's own resolver and mirrors): read alone."""
    server = mirror(sitemap_page_size=PAGE_SIZE)
    seeds = (
        ["sitemap"]
        if seed == "sitemap"
        else [server.url.replace("127.0.0.1", "localhost") + "/sitemap.xml", "--allow-host", "localhost"]
    )
    stats = finish(
        start_worker(tmp_path, "w", server, corpus_dir, redis_url, "--max-records", str(BUDGET), *seeds), tmp_path, "w"
    )
    assert len(committed_records(tmp_path, "w")["w"]) == stats["pith/archived"] == BUDGET
    fetched = sitemaps_fetched(server)
    assert fetched <= 1 + math.ceil(BUDGET / PAGE_SIZE) + 1 < every_sitemap(corpus_catalog) // 4
    assert stats["pith/sitemaps_skipped_max_records"] == every_sitemap(corpus_catalog) - fetched
    assert stats["scheduler/dequeued/redis"] >= BUDGET  # the records it found were shared
    assert ("this worker reads it alone" in (tmp_path / "w.log").read_text()) == (seed != "sitemap")
