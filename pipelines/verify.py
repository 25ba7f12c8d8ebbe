"""Verify every fetched bundle against the pinned keyring before anything is stored."""

import logging

from crawler.items import BundleItem
from pith.keyring import Keyring, KeyringError
from pith.verify import Verdict, verify_document

logger = logging.getLogger(__name__)


class VerifyPipeline:
    """Sets ``item.verdict`` on each BundleItem; counts verdicts in the crawl stats
    (``pith/verified``, ``pith/rejected``, ``pith/rejected/<reason>``)."""

    def __init__(self, keyring: Keyring, stats):
        self.keyring = keyring
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler):
        settings = crawler.settings
        # never NotConfigured: a crawl without its verifier would archive nothing (or worse)
        keyring = Keyring.build(settings.getlist("PITH_KEYRINGS"), settings.getbool("PITH_DEFAULT_KEYS"))
        if not len(keyring):
            raise KeyringError("the keyring is empty: nothing could verify (PITH_KEYRINGS, PITH_DEFAULT_KEYS)")
        return cls(keyring, crawler.stats)

    def process_item(self, item):
        if not isinstance(item, BundleItem):
            return item
        if item.parse_error:
            item.verdict = Verdict("rejected", *item.parse_error)
        else:
            item.verdict = verify_document(item.document.data, self.keyring, item.document.exact)
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
