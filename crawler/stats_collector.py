"""Scrapy's in-memory stats collector, read without Scrapy 2.19's check on every attribute.

Scrapy's ``StatsCollector.__getattribute__`` wraps each attribute read to warn about the
deprecated ``spider`` argument of its methods: every ``inc_value`` formats a name and
raises and catches an AttributeError for each attribute it touches (``self._stats``),
then calls through a wrapper. A crawl counts a dozen stats per bundle, and Scrapy as many
again per request: ~2% of the crawl's thread. This collector reads its attributes as any
object does; its methods are Scrapy's own, so it counts exactly what Scrapy's does. One
of the crawl's performance knobs (docs/OPERATIONS.md, "Performance knobs").
"""

from scrapy.statscollectors import MemoryStatsCollector


class PlainStatsCollector(MemoryStatsCollector):
    """``STATS_CLASS``: Scrapy's default collector, less the per-read deprecation check."""

    __getattribute__ = object.__getattribute__
