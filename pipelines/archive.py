"""Archive what the verification pipeline judged: verified bundles as raw bytes and
table rows, rejected ones in quarantine, failures as rows, each written into the crawl's
archive (``crawler.extensions.crawl_archive``, an extension, which also commits). Storage work
runs off the reactor thread."""

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from functools import partial
from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DropItem, NotConfigured
from scrapy.utils.asyncio import run_in_thread
from twisted.python.failure import Failure

from crawler import signals as pith_signals
from crawler.extensions.crawl_archive import CrawlArchive, when
from crawler.items import BundleItem, FetchFailureItem, StateCheckItem
from crawler.links import base_of
from crawler.stat_keys import Stat
from pipelines.verdict_record import verdict_fields
from pith.verdict import Verdict
from storage.archive import layout
from storage.archive.stores import StorageError

logger = logging.getLogger(__name__)


def _raw_path(verdict: Verdict, raw_sha256: str, future: Future) -> str | None:
    """Where the archive keeps the bytes just added (None: a version archived before)."""
    if not verdict.ok:
        return layout.quarantined(raw_sha256)
    if future.done() and future.exception() is None and future.result() is None:
        return None  # a duplicate: add_prepared stored nothing
    return layout.raw_bundle(raw_sha256)


class ArchivePipeline:
    """On when the crawl archives (the ``CrawlArchive`` extension is on)."""

    def __init__(self, crawler: Crawler, archive: CrawlArchive) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.archive = archive
        # bundles are counted as their writes finish, in the upload threads: Scrapy's
        # inc_value is a read and a write, and two threads between them lose a count
        self._counting = threading.Lock()
        crawler.signals.connect(self._lost, signal=signals.item_error)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> "ArchivePipeline":
        archive = crawler.get_extension(CrawlArchive)
        if archive is None:
            raise NotConfigured("PITH_ARCHIVE is not set")
        archive.check_before_start()  # the first component made after the extensions
        return cls(crawler, archive)

    def _lost(self, item: Any, response: Any, spider: Any, failure: Failure) -> None:
        """A pipeline raised on an item: its record is not archived, and the crawl must not
        say it was (it counts against --max-failures like a record that could not be fetched)."""
        self.stats.inc_value(Stat.ITEM_ERRORS)

    async def open_spider(self) -> None:
        await self.archive.open()

    async def close_spider(self) -> None:
        await self.archive.close()

    async def process_item(self, item: Any) -> Any:
        writer = self.archive.writer
        try:
            if isinstance(item, BundleItem):
                await self._bundle(item)
            elif isinstance(item, FetchFailureItem):
                await run_in_thread(writer.add_failure, item.url, item.reason, item.detail, when(item.fetched_at))
            elif isinstance(item, StateCheckItem) and not item.matches:
                await run_in_thread(
                    writer.add_failure,
                    item.url,
                    item.reason,
                    item.detail,
                    when(item.fetched_at),
                    item.pith_number,
                    "state.json",
                )
        except StorageError as exc:
            self.archive.stop(exc)
            raise DropItem(f"not archived: {exc}") from exc
        return item

    async def _bundle(self, item: BundleItem) -> None:
        verdict = item.verdict
        raw_sha256 = item.raw_sha256  # the archive, its WARC record and the path all name it
        refused: list[str] = []  # "stale" or "forked", when the archive does not make it current
        add: Callable[..., Future]
        if verdict.ok:
            if item.prepared is None:  # every verifier prepares what it verifies (crawler.verifying)
                raise ValueError(f"{item.url}: a verified bundle item without its prepared rows")
            add = partial(
                self.archive.writer.add_prepared,
                equivocation=item.equivocation,
                on_objection=refused.append,
                forks_are_split_views=self._from_a_mirror(item.url),
                stored=item.stored,
            )
            args: tuple = (item.body, item.prepared, item.url, when(item.fetched_at))
        else:
            add = partial(self.archive.writer.add_rejected, raw_sha256=raw_sha256)
            args = (item.body, verdict, item.url, when(item.fetched_at))
        # inline while the uploads keep up (a thread hop per bundle costs more than the
        # work) or there is nothing to upload (its verifier stored it); from a thread
        # when add would wait for room, so the reactor never blocks
        room = item.stored is not None or self.archive.uploader.has_room(2 * len(item.body))
        future, run_id = self._add(add, args) if room else await run_in_thread(self._add, add, args)
        future.add_done_callback(partial(self._count, verdict.ok))
        warc = self.archive.warc
        if warc is not None:
            raw_path = _raw_path(verdict, raw_sha256, future)
            warc.verdict(item.url, verdict_fields(verdict, raw_sha256, raw_path, item.key_ids))
        if verdict.ok:
            self.crawler.signals.send_catch_log(pith_signals.bundle_archived, url=item.url, run_id=run_id)
        for relation in refused:
            self.crawler.signals.send_catch_log(pith_signals.version_refused, url=item.url, relation=relation)
            if relation == "forked" and item.equivocation is None and self._from_a_mirror(item.url):
                self.stats.inc_value(Stat.EQUIVOCATIONS)
                logger.error("split view: %s serves a fork of the archive's current version of the record", item.url)
        # the bytes and parsed trees are stored or queued now: whatever still holds the
        # item (signals, loggers) must not keep ~100 KB of objects per bundle alive
        if verdict.bundle is not None:
            item.verdict = replace(verdict, bundle=None)
        item.prepared = None
        self.archive.commit_if_due()

    def _from_a_mirror(self, url: str) -> bool:
        """Whether a copy came from one of the mirrors a crawl spreads over (not its resolver)."""
        mirrors = getattr(self.crawler.spider, "mirrors", ())
        return bool(mirrors) and base_of(url) in mirrors  # a crawl of the resolver alone parses no URL

    def _add(self, add: Callable[..., Future], args: tuple) -> tuple[Future, layout.RunId]:
        """Add a bundle; the run it went into, read at once in the same thread (an
        interim commit switching runs meanwhile makes it name the next one: its
        validators are then kept one commit late, never early)."""
        future = add(*args)
        return future, self.archive.writer.current_run

    def _count(self, verified: bool, future: Future) -> None:
        if future.exception() is not None:
            return
        if not verified:
            key = Stat.QUARANTINED
        else:
            key = Stat.ARCHIVED if future.result() is not None else Stat.ALREADY_ARCHIVED
        with self._counting:
            self.stats.inc_value(key)
