"""Count and log the verdict the spider's verifier (crawler.verifying.verifier) gave each bundle."""

import logging
import re
from typing import Any

from scrapy.crawler import Crawler
from scrapy.signalmanager import SignalManager
from scrapy.statscollectors import StatsCollector

from crawler.crawl_config import pith_crawl_only
from crawler.items import BundleItem
from crawler.signals import bundle_rejected
from crawler.stat_keys import Stat, StatFamily
from pith.json_path import value_at
from pith.reasons import Reason
from pith.verdict import Verdict

logger = logging.getLogger(__name__)


class VerdictStatsPipeline:
    """Counts verdicts in the crawl stats (``pith/verified``, ``pith/rejected``,
    ``pith/rejected/<reason>``; a copy of another record than the one asked for is
    rejected ``wrong_record`` by the spider, crawler.verifying.identity), names each rejection in the
    log before the archive pipeline quarantines the bundle, and counts what an
    operator must act on when the registry changes: ``pith/merge_inferred[/<type>]``,
    ``pith/unknown_keys/<key_id>``, ``pith/unsupported_versions/<member>=<value>``."""

    def __init__(self, stats: StatsCollector, signals: SignalManager) -> None:
        self.stats = stats
        self.signals = signals

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> "VerdictStatsPipeline":
        pith_crawl_only(crawler)
        return cls(crawler.stats, crawler.signals)

    def process_item(self, item: Any) -> Any:
        if not isinstance(item, BundleItem):
            return item
        verdict = item.verdict
        if verdict.ok:
            self.stats.inc_value(Stat.VERIFIED)
            if not verdict.merge_confirmed:
                self.count_inferred(verdict)
        else:
            self.stats.inc_value(Stat.REJECTED)
            self.stats.inc_value(StatFamily.REJECTED + verdict.reason)
            logger.warning(
                "rejected %s: %s at %s (%s)", item.url, verdict.reason, verdict.path or "<document>", verdict.detail
            )
            if verdict.reason in (Reason.UNKNOWN_KEY, Reason.UNSUPPORTED_VERSION):
                self.count_registry_change(verdict)
            self.signals.send_catch_log(bundle_rejected, url=item.url)
        return item

    def count_inferred(self, verdict: Verdict) -> None:
        self.stats.inc_value(Stat.MERGE_INFERRED)
        for event_type in verdict.inferred_types:
            self.stats.inc_value(StatFamily.MERGE_INFERRED + stat_safe(event_type))
        if not verdict.merge_inferred_match:
            self.stats.inc_value(Stat.MERGE_INFERRED_DIFFERS)

    def count_registry_change(self, verdict: Verdict) -> None:
        """Which unpinned key, or which unknown version, the registry started using."""
        named = value_at(verdict.bundle, verdict.path)
        if verdict.reason == Reason.UNKNOWN_KEY:
            self.stats.inc_value(StatFamily.UNKNOWN_KEYS + stat_safe(named))
        else:
            self.stats.inc_value(f"{StatFamily.UNSUPPORTED_VERSIONS}{verdict.path}={stat_safe(named)}")


def stat_safe(text: object) -> str:
    """Text from a fetched document, made safe to be part of a stats key."""
    return re.sub(r"[^A-Za-z0-9._:-]", "_", str(text))[:64]
