"""--max-records bounds the sitemap walk, not only the records: once the budget is
claimed no further sitemap page is requested, alone and with a shared frontier. Our
mirror serves a sitemap index over many small pages; its request log counts them."""

import math

from tests.test_crawl_mirror import crawl, records
from tests.test_frontier import committed_records, finish, start_worker

PAGE_SIZE, BUDGET = 1, 5


def sitemaps_fetched(server) -> int:
    return sum(r.document == "sitemap" and r.status == 200 for r in server.requests)


def every_sitemap(catalog) -> int:
    """The index and its pages."""
    return 1 + math.ceil(len(catalog) / PAGE_SIZE)


def test_max_records_stops_the_sitemap_walk(tmp_path, corpus_dir, corpus_catalog, mirror):
    server = mirror(sitemap_page_size=PAGE_SIZE)
    result = crawl(tmp_path, corpus_dir, server, "--max-records", str(BUDGET), "sitemap")
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(records(tmp_path)) == result.stat("verified") == BUDGET
    fetched = sitemaps_fetched(server)
    assert fetched <= 1 + math.ceil(BUDGET / PAGE_SIZE) + 1 < every_sitemap(corpus_catalog) // 4
    assert result.stat("sitemaps_skipped_max_records") == every_sitemap(corpus_catalog) - fetched


def test_max_records_stops_the_sitemap_walk_of_a_shared_frontier(tmp_path, corpus_dir, corpus_catalog, mirror,
                                                                redis_url):
    server = mirror(sitemap_page_size=PAGE_SIZE)
    stats = finish(start_worker(tmp_path, "w", server, corpus_dir, redis_url, "--max-records", str(BUDGET),
                                "sitemap"), tmp_path, "w")
    assert len(committed_records(tmp_path, "w")["w"]) == stats["pith/archived"] == BUDGET
    fetched = sitemaps_fetched(server)
    assert fetched <= 1 + math.ceil(BUDGET / PAGE_SIZE) + 1 < every_sitemap(corpus_catalog) // 4
    assert stats["pith/sitemaps_skipped_max_records"] == every_sitemap(corpus_catalog) - fetched
