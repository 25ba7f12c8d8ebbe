"""Notice, before the first record, that the registry announces a key nobody pinned.

The resolver publishes its current signing key at ``/pith-signing-key.json``. When the
registry rotates its key, every bundle signed by the new one is ``unknown_key`` until
an operator pins it; this extension fetches that document as the crawl opens and
compares it with the pinned keyring, so the crawl says up front which key appeared
(key_id and fingerprint) and how to pin it. It never trusts the key itself.
"""

import logging
from typing import Self

import scrapy
from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured

from pith.keyring import Keyring, KeyringError, PinnedKey, key_from_entry
from pith.parse import parse
from pith.reasons import Rejected

from ..crawl_config import crawl_config, pith_crawl_only
from ..signals import operator_notice
from ..stat_keys import Stat, StatFamily

logger = logging.getLogger(__name__)

KEY_DOCUMENT_PATH = "/pith-signing-key.json"


def announced_keys(document: object) -> list[dict]:
    """The key entries of a key document: one entry, ``{"keys": [...]}``,
    ``{"public_keys": [...]}`` or a list of entries."""
    if isinstance(document, dict):
        for member in ("keys", "public_keys"):
            if isinstance(document.get(member), list):
                return [e for e in document[member] if isinstance(e, dict)]
        return [document] if "key_id" in document else []
    return [e for e in document if isinstance(e, dict)] if isinstance(document, list) else []


def registry_pin_hint(url: str, key: PinnedKey) -> str:
    return (
        f"check its fingerprint with the registry out of band, then pin it: "
        f"pith-archiver keys pin {url} --fingerprint {key.fingerprint} --into FILE, "
        "and crawl with --keyring FILE"
    )


class SigningKeyWatch:
    """Stats: ``pith/announced_keys/pinned``, ``pith/announced_keys/unpinned/<key_id>``
    (its fingerprint), ``pith/announced_keys/conflicts``; the operator_notice signal
    carries the one line a person must read."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.keyring = Keyring([])  # the crawl's, once its spider opens

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        pith_crawl_only(crawler)
        if not crawler.settings.getbool("PITH_WATCH_SIGNING_KEY"):
            raise NotConfigured
        watch = cls(crawler)
        crawler.signals.connect(watch.spider_opened, signal=signals.spider_opened)
        return watch

    async def spider_opened(self, spider: Spider) -> None:
        config = crawl_config(self.crawler)
        self.keyring = config.keyring
        url = config.resolver + KEY_DOCUMENT_PATH
        try:
            response = await self.crawler.engine.download_async(scrapy.Request(url, dont_filter=True))
        except Exception as exc:  # the crawl goes on: this is advice, not a check
            logger.info("no signing-key document at %s (%s)", url, exc)
            return
        if response.status != 200:
            logger.info("no signing-key document at %s (HTTP %d)", url, response.status)
            return
        self.compare(url, response.body)

    def compare(self, url: str, body: bytes) -> None:
        try:
            entries = announced_keys(parse(body).data)
        except Rejected as rejected:
            logger.warning("signing-key document %s unusable: %s", url, rejected)
            return
        stats = self.crawler.stats
        for entry in entries:
            try:
                key = key_from_entry(entry)
            except KeyringError as exc:
                logger.warning("signing-key document %s: %s", url, exc)
                continue
            pinned = self.keyring.get(key.key_id)
            if pinned is not None and pinned.raw == key.raw:
                stats.inc_value(Stat.ANNOUNCED_KEYS_PINNED)
            elif pinned is not None:
                stats.inc_value(Stat.ANNOUNCED_KEYS_CONFLICTS)
                self.notify(
                    f"the registry announces key {key.key_id} with fingerprint {key.fingerprint}, but "
                    f"{key.key_id} is pinned with fingerprint {pinned.fingerprint}: its bundles will be "
                    "rejected; find out which is genuine before changing the keyring"
                )
            else:
                stats.set_value(StatFamily.ANNOUNCED_UNPINNED + key.key_id, key.fingerprint)
                self.notify(
                    f"the registry announces signing key {key.key_id} (fingerprint {key.fingerprint}), "
                    f"which is not pinned: bundles it signs will be rejected as unknown_key; "
                    + registry_pin_hint(url, key)
                )

    def notify(self, line: str) -> None:
        logger.warning(line)
        self.crawler.signals.send_catch_log(operator_notice, line=line)
