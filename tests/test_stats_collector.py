"""The crawl's stats collector (crawler.stats_collector): Scrapy's in-memory one, read
without Scrapy's check on every attribute, counting exactly as Scrapy's does."""

from scrapy.settings import Settings
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

import crawler.settings as project_settings
from crawler.stats_collector import PlainStatsCollector


def project_crawler():
    """A crawler on the project's settings (no engine runs, so no reactor is needed)."""
    settings = Settings()
    settings.setmodule(project_settings, priority="project")
    return get_crawler(settings_dict={**settings.copy_to_dict(), "TWISTED_REACTOR_ENABLED": False})


def counted(stats: MemoryStatsCollector) -> tuple[dict, dict]:
    """The stats after a crawl's kinds of counting, and what the collector kept once closed."""
    stats.open_spider()
    stats.set_value("start", 1)
    for _ in range(3):
        stats.inc_value("pith/verified")
    stats.inc_value("pith/bytes", 4096, start=100)
    stats.max_value("depth_max", 2)
    stats.max_value("depth_max", 1)
    stats.min_value("depth_min", 5)
    stats.min_value("depth_min", 7)
    stats.set_stats({**stats.get_stats(), "replaced": True})
    during = dict(stats.get_stats())
    stats.close_spider(reason="finished")
    return during, stats.spider_stats


def test_the_crawl_counts_with_the_plain_collector():
    crawler = project_crawler()
    assert type(crawler.stats) is PlainStatsCollector


def test_it_counts_what_scrapys_collector_counts():
    crawler = project_crawler()
    ours, scrapys = counted(PlainStatsCollector(crawler)), counted(MemoryStatsCollector(crawler))
    assert ours == scrapys
    assert ours[0]["pith/verified"] == 3 and ours[0]["pith/bytes"] == 4196 and ours[0]["depth_max"] == 2


def test_its_methods_are_not_wrapped_on_each_read():
    """Scrapy's collector hands out a wrapper (cached on the instance) for each method read;
    ours hands out the method itself, and reads ``_stats`` without raising on the way."""
    crawler = project_crawler()
    scrapys, ours = MemoryStatsCollector(crawler), PlainStatsCollector(crawler)
    assert getattr(scrapys.inc_value, "__func__", None) is not MemoryStatsCollector.inc_value
    assert ours.inc_value.__func__ is MemoryStatsCollector.inc_value
    assert "_cached_inc_value" in vars(scrapys) and "_cached_inc_value" not in vars(ours)
