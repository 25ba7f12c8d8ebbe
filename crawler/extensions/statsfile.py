"""Write the final crawl stats as JSON (PITH_STATS_FILE), for schedulers and monitoring."""

import json
import logging
from datetime import datetime
from pathlib import Path
from typing import Self

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.statscollectors import StatsCollector

from ..crawl_config import pith_crawl_only

logger = logging.getLogger(__name__)


class StatsFile:
    def __init__(self, path: Path, stats: StatsCollector) -> None:
        self.path = path
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        pith_crawl_only(crawler)
        path = crawler.settings.get("PITH_STATS_FILE")
        if not path:
            raise NotConfigured
        extension = cls(Path(path), crawler.stats)
        # after the stats collector has set finish_reason and finish_time
        crawler.signals.connect(extension.write, signal=signals.engine_stopped)
        return extension

    def write(self) -> None:
        values = {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in self.stats.get_stats().items()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(values, indent=1, sort_keys=True, default=str), "utf-8")
        logger.info("stats written to %s", self.path)
