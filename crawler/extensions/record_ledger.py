"""Every record a crawl opens ends accounted for.

A record is opened when the crawl starts its work (``record_opened``: the scheduler
asked the spider for its request, whichever scheduler, so a worker of a shared
frontier accounts for the records it took, not those the others took) and settled by
what ends it: its bundle verified and handed to the archive as that very record
(``archived``, new or already held), rejected, found unchanged (304), failed (no
source gave it, or a pipeline raised on it), or forbidden by robots.txt. A bundle
settles the record it *is* (its ``pith_number``), not the one its URL named, so a
source that answers for one record with another's leaves the one asked for open.

Only the records still open are held (those in flight), so memory does not grow with
the crawl. When the spider closes, the ones left open are unaccounted for: counted
(``pith/records_unaccounted``, the job's exit status 4) and named in the log.
Stats: ``pith/records/<outcome>`` per record settled.
"""

import logging
from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.statscollectors import StatsCollector

from pith.numbers import suffix_of

from .. import signals as pith_signals
from ..items import BundleItem, FetchFailureItem
from ..stat_keys import Stat, StatFamily

logger = logging.getLogger(__name__)

NAMED = 100  # unaccounted records named in the log, at most


class RecordLedger:
    """Extension: the records opened and not yet settled."""

    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats
        self.open: set[str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> "RecordLedger":
        ledger = cls(crawler.stats)
        crawler.signals.connect(ledger.opened, signal=pith_signals.record_opened)
        crawler.signals.connect(ledger.settle, signal=pith_signals.record_settled)
        crawler.signals.connect(ledger.item_scraped, signal=signals.item_scraped)
        crawler.signals.connect(ledger.item_lost, signal=signals.item_error)
        crawler.signals.connect(ledger.item_lost, signal=signals.item_dropped)
        crawler.signals.connect(ledger.closed, signal=signals.spider_closed)
        return ledger

    def opened(self, suffix: str) -> None:
        self.open.add(suffix)

    def settle(self, suffix: str | None, outcome: str) -> None:
        if suffix in self.open:
            self.open.discard(suffix)
            self.stats.inc_value(StatFamily.RECORDS + outcome)

    def item_scraped(self, item: Any) -> None:
        if isinstance(item, FetchFailureItem):
            self.settle(item.suffix, "failed")
        elif isinstance(item, BundleItem) and item.answers:
            verdict = item.verdict
            if verdict.ok:  # the record it is, whatever record its URL named
                self.settle(suffix_of(verdict.pith_number or ""), "archived")
            else:
                self.settle(item.suffix, "rejected")

    def item_lost(self, item: Any, **kwargs: Any) -> None:
        """A pipeline raised on the item or dropped it: its record is not archived."""
        if isinstance(item, FetchFailureItem) or (isinstance(item, BundleItem) and item.answers):
            self.settle(item.suffix, "failed")

    def closed(self, reason: str) -> None:
        if not self.open:
            return
        missing = sorted(self.open)
        self.stats.set_value(Stat.RECORDS_UNACCOUNTED, len(missing))
        logger.log(
            logging.ERROR if reason == "finished" else logging.WARNING,  # else stopped with records in flight
            "%d records unaccounted for (opened, never archived, unchanged, rejected or failed): %s%s",
            len(missing),
            ", ".join(missing[:NAMED]),
            f" and {len(missing) - NAMED} more" if len(missing) > NAMED else "",
        )
