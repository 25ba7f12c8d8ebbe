"""Count and log the verdict the spider's verifier (crawler.verifier) gave each bundle."""

import logging

from crawler.items import BundleItem

logger = logging.getLogger(__name__)


class VerifyPipeline:
    """Counts verdicts in the crawl stats (``pith/verified``, ``pith/rejected``,
    ``pith/rejected/<reason>``, ``pith/unexpected_record``) and names each rejection
    in the log, before the archive pipeline stores or quarantines the bundle."""

    def __init__(self, stats):
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.stats)

    def process_item(self, item):
        if not isinstance(item, BundleItem):
            return item
        verdict = item.verdict
        if verdict.ok:
            self.stats.inc_value("pith/verified")
            if item.suffix and not verdict.pith_number.endswith(item.suffix):
                self.stats.inc_value("pith/unexpected_record")
                logger.warning("%s served %s, another record than it names", item.url, verdict.pith_number)
        else:
            self.stats.inc_value("pith/rejected")
            self.stats.inc_value(f"pith/rejected/{verdict.reason}")
            logger.warning("rejected %s: %s at %s (%s)", item.url, verdict.reason, verdict.path or "<document>",
                           verdict.detail)
        return item
