"""A progress line a person can follow, fed by the crawl's own stats.

On a terminal it is a live line (rich); otherwise, or with PITH_PROGRESS=log, a log
line every few intervals. At the end, a summary. The counts are Scrapy stats, so
``scrapy crawl`` users see the same numbers in the stats dump.
"""

import logging
import sys
import time
from typing import Any

from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.statscollectors import StatsCollector
from scrapy.utils.asyncio import create_looping_call

from ..crawl_config import pith_crawl_only
from ..stat_keys import Stat, fetch_failures

logger = logging.getLogger(__name__)

COUNTS = (
    ("found", Stat.RECORDS_FOUND),
    ("fetched", Stat.BUNDLES_FETCHED),
    ("verified", Stat.VERIFIED),
    ("rejected", Stat.REJECTED),
    ("unchanged", Stat.NOT_MODIFIED),
    ("archived", Stat.ARCHIVED),
)


def snapshot(stats: StatsCollector) -> dict:
    values = {name: stats.get_value(key, 0) for name, key in COUNTS}
    values["failed"] = sum(fetch_failures(stats.get_stats()).values())  # as the summary counts them
    values["state_mismatch"] = stats.get_value(Stat.STATE_MISMATCH, 0)
    return values


def render(values: dict, elapsed: float) -> str:
    rate = values["fetched"] / elapsed if elapsed > 0 else 0.0
    return (
        f"records {values['found']} · fetched {values['fetched']} · verified {values['verified']} · "
        f"rejected {values['rejected']} · unchanged {values['unchanged']} · archived {values['archived']} · "
        f"failed {values['failed']} · {rate:.1f} bundles/s"
    )


class Progress:
    def __init__(self, stats: StatsCollector, mode: str, interval: float) -> None:
        self.stats = stats
        self.mode = mode
        self.interval = interval
        self.live: Any = None  # rich's Live, on a terminal
        self.task: Any = None  # the looping call of the ticks
        self.started = time.monotonic()
        self.ticks = 0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> "Progress":
        pith_crawl_only(crawler)
        mode = crawler.settings.get("PITH_PROGRESS")
        if mode == "off":
            raise NotConfigured
        if mode == "auto":
            mode = "live" if sys.stderr.isatty() else "log"
        extension = cls(crawler.stats, mode, crawler.settings.getfloat("PITH_PROGRESS_INTERVAL"))
        crawler.signals.connect(extension.opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.closed, signal=signals.spider_closed)
        return extension

    def opened(self, spider: Spider | None = None) -> None:
        self.started = time.monotonic()
        if self.mode == "live":
            from rich.live import Live  # only a terminal needs it

            self.live = Live("", refresh_per_second=4, transient=True)
            self.live.start()
        self.task = create_looping_call(self.tick)
        self.task.start(self.interval, now=False)

    def tick(self) -> None:
        line = render(snapshot(self.stats), time.monotonic() - self.started)
        self.ticks += 1
        if self.live is not None:
            self.live.update(line)
        elif self.ticks % 10 == 0:
            logger.info(line)

    def closed(self, spider: Spider | None = None, reason: str | None = None) -> None:
        if self.task is not None and self.task.running:
            self.task.stop()
        if self.live is not None:
            self.live.stop()
        values = snapshot(self.stats)
        self.stats.set_value(Stat.ELAPSED_SECONDS, round(time.monotonic() - self.started, 3))
        logger.info("crawl %s: %s", reason, render(values, time.monotonic() - self.started))
