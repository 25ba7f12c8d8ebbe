"""Scrapy's scheduler for a crawl on one machine, with the records it finds on disk.

A request that opens a record (``Meta.OPENS_RECORD``, set by the spider for every
record a response names) is claimed here: the first time a record is named it waits,
as a suffix and a depth, in the crawl's SeenStore (``crawler.scheduling.seen``); every later time,
and past ``--max-records``, it is dropped (``crawler.scheduling.claims``). Everything else (the record's page and
state, retries, mirror fallbacks, sitemaps) is Scrapy's own scheduling. A waiting record
becomes a request (``spider.record_request``, whose source is picked then, so spreading
over mirrors follows each one's pace) only when Scrapy's queue is empty and the engine
asks for more: records already open finish before new ones start, and memory holds the
requests in flight, not the records found. A crawl sharing a Redis frontier uses
``crawler.frontier.FrontierScheduler`` instead, which claims the same way.
"""

import logging
from collections import deque
from typing import Any, Protocol

from scrapy import Request, Spider
from scrapy.core.scheduler import Scheduler
from scrapy.crawler import Crawler
from scrapy.statscollectors import StatsCollector

from ..crawl_config import crawl_config, is_pith_crawl
from ..meta_keys import take_opening
from ..stat_keys import Stat
from .claims import Opening, claim_found
from .seen import SeenStore

logger = logging.getLogger(__name__)

TAKE = 32  # waiting records read from SQLite at once (one transaction, not one per record)


class RecordSpider(Protocol):
    """What the scheduler needs of its spider."""

    def record_request(self, suffix: str, depth: int) -> Request: ...


class LocalScheduler(Scheduler):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.records = SeenStore()
        self.builder: RecordSpider | None = None  # the spider, which builds a record's request
        self.counts: StatsCollector | None = None
        self.found: list[tuple[Opening, None]] = []  # named by responses, not yet claimed
        self.ready: deque[tuple[str, int]] = deque()  # taken from SQLite, not yet requested
        self.max_records = 0
        self.held_max = 0  # the most requests held in memory at once

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Scheduler:  # type: ignore[override]  # Scrapy's own for another spider
        """Another spider gets Scrapy's own scheduler: it has no records to claim."""
        if not is_pith_crawl(crawler):
            return Scheduler.from_crawler(crawler)
        scheduler = super().from_crawler(crawler)
        scheduler.records = SeenStore.for_job(crawler.settings)
        scheduler.counts = crawler.stats
        scheduler.max_records = crawl_config(crawler).max_records
        return scheduler

    def open(self, spider: Spider) -> Any:
        self.builder = spider  # type: ignore[assignment]  # the pith spider
        taken = self.records.open()
        if taken and self.counts is not None:  # a resumed job may rightly find nothing left to fetch
            self.counts.set_value(Stat.RECORDS_TAKEN_BEFORE, taken)
        return super().open(spider)

    def close(self, reason: str) -> Any:
        self._claim()
        self.records.put_back(self.ready)
        self.ready.clear()
        if self.counts is not None:
            self.counts.set_value(Stat.REQUESTS_HELD_MAX, self.held_max)
        self.records.close()
        return super().close(reason)

    def records_full(self) -> bool:
        """--max-records reached (counting the records found so far): no record will be
        claimed any more."""
        self._claim()
        return bool(self.max_records) and len(self.records) >= self.max_records

    def enqueue_request(self, request: Request) -> bool:
        opening = take_opening(request)
        if opening is None:
            return super().enqueue_request(request)
        self.found.append((opening, None))  # claimed in one transaction with those found beside it
        return True

    def _claim(self) -> None:
        """Claim the records found since: the seen-set queues those claimed (``take``)."""
        found, self.found = self.found, []
        claim_found(found, self.records, self.max_records, self.counts)

    def next_request(self) -> Request | None:
        self._claim()
        request = super().next_request()
        if request is not None:
            return request
        if not self.ready:
            self.ready.extend(self.records.take(TAKE))
            self.held_max = max(self.held_max, len(self.ready) + len(self.mqs))
        if not self.ready or self.builder is None:
            return None
        return self.builder.record_request(*self.ready.popleft())

    def has_pending_requests(self) -> bool:
        return bool(self.found or self.ready or self.records.waiting) or super().has_pending_requests()

    def __len__(self) -> int:
        return len(self.found) + len(self.ready) + self.records.waiting + super().__len__()
