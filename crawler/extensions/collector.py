"""Run Python's cyclic garbage collector less often during a crawl (PITH_GC_THRESHOLD).

A crawl allocates a tree of a few hundred containers for every bundle and frees nearly
all of them by reference counting, yet each 700 allocations (Python's default) start a
collection that walks the young objects, and every few hundred bundles a full one walks
Scrapy's whole heap: 3 to 4 s of a 10,000-bundle crawl's thread (bench/RESULTS.md,
"Seventh round"). A larger first threshold collects the same cycles a few MiB later.
A threshold already higher, or a collector switched off (0), is left as it is. One of
the crawl's performance knobs (the others: ``pith_archiver.crawl.tuning``; all of them in
docs/OPERATIONS.md, "Performance knobs").
"""

import gc
import logging
from typing import Self

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured

logger = logging.getLogger(__name__)


class CollectorThreshold:
    def __init__(self, threshold: int):
        self.threshold = threshold
        self.before: tuple[int, ...] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        threshold = crawler.settings.getint("PITH_GC_THRESHOLD")
        if threshold <= 0:
            raise NotConfigured
        extension = cls(threshold)
        crawler.signals.connect(extension.raise_threshold, signal=signals.engine_started)
        crawler.signals.connect(extension.restore, signal=signals.engine_stopped)
        return extension

    def raise_threshold(self) -> None:
        self.before = gc.get_threshold()
        if 0 < self.before[0] < self.threshold:
            gc.set_threshold(self.threshold, *self.before[1:])
        logger.debug("garbage collector thresholds %s (were %s)", gc.get_threshold(), self.before)

    def restore(self) -> None:
        """Python's own thresholds again: the process may go on after the crawl (tests, scripts)."""
        if self.before is not None:
            gc.set_threshold(*self.before)
            self.before = None
