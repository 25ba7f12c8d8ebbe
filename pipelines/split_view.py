"""Compare the verified copies of a cross-checked record (``crawler.spider_mixins.cross_check``)
that different sources served, and flag a copy that forks from another (a split
view) so that the archive keeps it as evidence under reason ``equivocation``.

Stats: ``pith/cross_check/<relation>`` per pair of copies compared (``same``,
``extends``, ``fork``) and ``pith/equivocations`` (copies flagged), besides the spider's.
"""

import logging
from typing import Any

from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.statscollectors import StatsCollector

from crawler.crawl_config import crawl_config
from crawler.items import BundleItem
from crawler.links import base_of
from crawler.stat_keys import Stat, StatFamily
from pith.split_view import FORK, Equivocation, compare, event_ids

logger = logging.getLogger(__name__)


class SplitViewPipeline:
    """Between verification and the archive. Remembers, for each cross-checked record,
    the event ids of the verified copies seen so far (N records times the sources:
    the sample bounds it), and compares each new copy with those of other sources."""

    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats
        self.copies: dict[str, list[tuple[str, str, str, tuple[str, ...]]]] = {}  # source, url, bundle, events

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> "SplitViewPipeline":
        if crawl_config(crawler).cross_check <= 0:
            raise NotConfigured("PITH_CROSS_CHECK is 0")
        return cls(crawler.stats)

    def process_item(self, item: Any) -> Any:
        if not isinstance(item, BundleItem) or not item.cross_check or not item.verdict.ok:
            return item
        verdict, source = item.verdict, base_of(item.url)
        ours = event_ids(verdict.bundle or {})
        seen = self.copies.setdefault(verdict.pith_number or "", [])
        for other_source, other_url, other_bundle, theirs in seen:
            if other_source == source:
                continue
            comparison = compare(ours, theirs)
            self.stats.inc_value(StatFamily.CROSS_CHECK + comparison.relation)
            if comparison.relation == FORK:
                item.equivocation = Equivocation.of(
                    item.url, ours, other_url, other_bundle, theirs, comparison.parted_at
                )
                self.stats.inc_value(Stat.EQUIVOCATIONS)
                logger.error("split view of %s: %s", verdict.pith_number, item.equivocation.detail)
                break
        seen.append((source, item.url, verdict.bundle_sha256 or "", ours))
        return item
