"""Archive what the verification pipeline judged: verified bundles as raw bytes and
table rows, rejected ones in quarantine, failures as rows; commit a signed manifest
every PITH_COMMIT_EVERY bundles (a checkpoint, while the crawl goes on) and when the
spider closes. Storage work runs off the reactor thread."""

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DropItem, NotConfigured
from scrapy.utils.asyncio import run_in_thread
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from scrapy.utils.log import failure_to_exc_info
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from crawler import signals as pith_signals
from crawler.crawl_config import crawl_config
from crawler.frontier import Frontier
from crawler.items import BundleItem, FetchFailureItem, StateCheckItem
from crawler.jobdir import JobdirGuard
from crawler.links import base_of
from crawler.stat_keys import PREFIX, Stat
from crawler.worker import worker_name
from pith.canonical import sha256_hex
from pith.keyring import Keyring
from pith.reasons import Reason
from pith.shipped import version
from pith.signing import Signer
from pith.verify import Verdict
from storage.archive import layout
from storage.archive.manifest import present_runs
from storage.archive.stores import ObjectStore, StorageError
from storage.capture.warc import Exchange, FetchFailure, WarcPolicy, verdict_fields
from storage.capture.warc import software as warc_software
from storage.capture.warc_process import WarcProcess
from storage.writing.table_writer import memory_pool
from storage.writing.uploads import BoundedUploader
from storage.writing.writer import ArchiveWriter

logger = logging.getLogger(__name__)


def _raw_path(verdict: Verdict, raw_sha256: str, future: Future) -> str | None:
    """Where the archive keeps the bytes just added (None: a version archived before)."""
    if not verdict.ok:
        return layout.quarantined(raw_sha256)
    if future.done() and future.exception() is None and future.result() is None:
        return None  # a duplicate: add_verified stored nothing
    return layout.raw_bundle(raw_sha256)


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


class ArchivePipeline:
    """Settings: PITH_ARCHIVE (folder or s3://bucket/prefix), AWS_ENDPOINT_URL (Scrapy's),
    PITH_SIGNING_KEY, PITH_WORKER, PITH_LOG_ORIGIN, PITH_UPLOAD_MAX_BYTES_IN_FLIGHT, PITH_COMMIT_EVERY,
    PITH_ARCHIVE_KEYRINGS (the archiver keys, besides this one's, whose manifests count
    for dedup and history: the other workers of a shared crawl)."""

    def __init__(
        self,
        crawler: Crawler,
        store: ObjectStore,
        signer: Signer,
        archive_keyring: Keyring,
        worker: str,
        in_flight: int,
        commit_every: int = 0,
        warc: WarcPolicy | None = None,
        log_origin: str | None = None,
    ) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.store = store
        self.archive = store.uri
        self.signer = signer
        self.archive_keyring = archive_keyring  # the other workers' keys: their manifests count too
        self.worker = worker
        self.in_flight = in_flight
        self.commit_every = commit_every
        self.warc = warc
        self.log_origin = log_origin
        self.writer: ArchiveWriter | None = None
        self.uploader: BoundedUploader | None = None
        self.interim: Deferred | None = None  # the interim commit under way
        # bundles are counted as their writes finish, in the upload threads: Scrapy's
        # inc_value is a read and a write, and two threads between them lose a count
        self._counting = threading.Lock()
        crawler.signals.connect(self._refresh, signal=pith_signals.frontier_recovered)
        crawler.signals.connect(self._lost, signal=signals.item_error)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> "ArchivePipeline":
        config = crawl_config(crawler)
        store, signer = config.store, config.signer
        if store is None or signer is None:
            raise NotConfigured("PITH_ARCHIVE is not set")
        frontier = crawler.get_extension(Frontier)
        if frontier is not None:  # before the engine opens: a refused worker starts nothing
            frontier.sign_as(signer.key_id)
        guard = crawler.get_extension(JobdirGuard)
        if guard is not None and guard.commits():  # a resumed job: before the scheduler opens its queue
            guard.check(present_runs(store))
        settings = crawler.settings
        return cls(
            crawler,
            store,
            signer,
            config.archive_keyring,
            worker_name(settings.get("PITH_WORKER")),
            settings.getint("PITH_UPLOAD_MAX_BYTES_IN_FLIGHT"),
            settings.getint("PITH_COMMIT_EVERY"),
            WarcPolicy(
                settings.getint("PITH_WARC_MAX_BYTES"),
                settings.getfloat("PITH_WARC_STALL_TIMEOUT"),
                settings.getint("PITH_WARC_QUEUE_BYTES"),
            )
            if settings.getbool("PITH_WARC")
            else None,
            settings.get("PITH_LOG_ORIGIN"),
        )

    def _writer(self) -> ArchiveWriter:
        if self.writer is None:
            raise RuntimeError("the archive pipeline's writer opens with the spider")
        return self.writer

    def _uploader(self) -> BoundedUploader:
        if self.uploader is None:
            raise RuntimeError("the archive pipeline's uploads open with the spider")
        return self.uploader

    def _warc(self) -> WarcProcess:
        warc = self._writer().warc
        if warc is None:
            raise RuntimeError("the crawl records no WARC (--no-warc)")
        return warc

    def _lost(self, item: Any, response: Any, spider: Any, failure: Failure) -> None:
        """A pipeline raised on an item: its record is not archived, and the run must not
        say it was (it counts against --max-failures like a record that could not be fetched)."""
        self.stats.inc_value(Stat.ITEM_ERRORS)

    async def open_spider(self) -> None:
        def open_writer() -> ArchiveWriter:
            store = self.store
            self.uploader = BoundedUploader(max_bytes_in_flight=self.in_flight, workers=store.upload_threads)
            trusted = Keyring([*self.archive_keyring, self.signer.pinned()])
            writer = ArchiveWriter(
                store,
                self.signer,
                worker=self.worker,
                uploader=self.uploader,
                keyring=trusted,
                warc=self.warc,
                warc_info=self._warc_info(),
                log_origin=self.log_origin,
            )
            return writer.open()

        self.writer = await run_in_thread(open_writer)
        if self._writer().warc is not None:
            self.crawler.signals.send_catch_log(pith_signals.warc_opened, record=self._record_in_warc)
        self.stats.set_value(Stat.RUN_ID, self._writer().first_run)
        self.crawler.signals.send_catch_log(
            pith_signals.archive_opened, committed=self._writer().committed_runs, present=self._writer().present_runs
        )
        self.stats.set_value(Stat.ARROW_MEMORY_POOL, memory_pool())

    async def process_item(self, item: Any) -> Any:
        try:
            if isinstance(item, BundleItem):
                await self._bundle(item)
            elif isinstance(item, FetchFailureItem):
                await run_in_thread(
                    self._writer().add_failure, item.url, item.reason, item.detail, _when(item.fetched_at)
                )
            elif isinstance(item, StateCheckItem) and not item.matches:
                await run_in_thread(
                    self._writer().add_failure,
                    item.url,
                    item.reason,
                    item.detail,
                    _when(item.fetched_at),
                    item.pith_number,
                    "state.json",
                )
        except StorageError as exc:
            self._stop(exc)
            raise DropItem(f"not archived: {exc}") from exc
        return item

    def _stop(self, exc: StorageError) -> None:
        """A store that keeps failing ends the crawl: nothing of this run will commit,
        so fetching more only wastes the resolver's bandwidth. (CloseSpider raised from
        a pipeline is only logged by Scrapy, so ask the engine directly.)"""
        if self.stats.get_value(Stat.COMMIT_ERROR):
            return
        self.stats.set_value(Stat.COMMIT_ERROR, f"storage failed: {exc}")
        logger.error("storage failed, stopping the crawl: %s", exc)
        deferred_from_coro(self.crawler.engine.close_spider_async(reason="storage_failed"))

    async def _bundle(self, item: BundleItem) -> None:
        verdict = item.verdict
        raw_sha256 = sha256_hex(item.body)  # once: the archive, its WARC record and the path all name it
        refused: list[str] = []  # "stale" or "forked", when the archive does not make it current
        add: Callable[..., Future]
        if verdict.ok:
            add = partial(
                self._writer().add_verified,
                equivocation=item.equivocation,
                on_objection=refused.append,
                forks_are_split_views=self._from_a_mirror(item.url),
                raw_sha256=raw_sha256,
            )
        else:
            add = partial(self._writer().add_rejected, raw_sha256=raw_sha256)
        args = (item.body, verdict, item.url, _when(item.fetched_at))
        # inline while the uploads keep up (a thread hop per bundle costs more than the
        # work); from a thread when add would wait for room, so the reactor never blocks
        room = self._uploader().has_room(2 * len(item.body))
        future, open_run = self._add(add, args) if room else await run_in_thread(self._add, add, args)
        future.add_done_callback(partial(self._count, verdict.ok))
        warc = self._writer().warc
        if warc is not None:
            warc.verdict(item.url, verdict_fields(verdict, raw_sha256, _raw_path(verdict, raw_sha256, future)))
        if verdict.ok:
            self.crawler.signals.send_catch_log(pith_signals.bundle_archived, url=item.url, open_run=open_run)
        for relation in refused:
            self.crawler.signals.send_catch_log(pith_signals.version_refused, url=item.url, relation=relation)
            if relation == "forked" and item.equivocation is None and self._from_a_mirror(item.url):
                self.stats.inc_value(Stat.EQUIVOCATIONS)
                logger.error("split view: %s serves a fork of the archive's current version of the record", item.url)
        # the bytes and parsed trees are stored or queued now: whatever still holds the
        # item (signals, loggers) must not keep ~100 KB of objects per bundle alive
        item.verdict = replace(verdict, bundle=None)
        if self.commit_every and self.interim is None and self._writer().pending_bundles() >= self.commit_every:
            # the run it commits: none other can begin before it is switched out
            open_run = self._writer().current_run
            interim = run_in_thread(self._writer().commit_interim, self._stats(), self._params())
            self.interim = deferred_from_coro(interim)
            self.interim.addBoth(self._interim_done, open_run)

    def _from_a_mirror(self, url: str) -> bool:
        """Whether a copy came from one of the mirrors a crawl spreads over (not its resolver)."""
        return base_of(url) in getattr(self.crawler.spider, "fallbacks", ())

    def _add(self, add: Callable[..., Future], args: tuple) -> tuple[Future, str]:
        """Add a bundle; the run it went into, read at once in the same thread (a
        checkpoint switching runs meanwhile makes it name the next one: its
        validators are then kept one commit late, never early)."""
        future = add(*args)
        return future, self._writer().current_run

    def _interim_done(self, result: Any, open_run: str) -> None:
        """A checkpoint ended: its manifest is the crawl's latest commit, or its failure
        stops the crawl (nothing may commit after a failed run)."""
        self.interim = None
        if isinstance(result, Failure):
            if isinstance(result.value, StorageError):
                self._stop(result.value)
            else:
                logger.error("checkpoint failed", exc_info=failure_to_exc_info(result))
                self.stats.set_value(Stat.COMMIT_ERROR, f"checkpoint failed: {result.value}")
            return None
        self.stats.inc_value(Stat.INTERIM_COMMITS)
        self.stats.set_value(Stat.MANIFEST, result)
        self.crawler.signals.send_catch_log(pith_signals.interim_committed, open_run=open_run)
        # logged once what the commit keeps (its bundles' validators) is kept too
        logger.info("interim commit %s", result)
        return None

    def _refresh(self) -> None:
        """The frontier is about to redo a dead worker's tasks: learn what its
        checkpoints committed, so none of it is archived twice."""
        if self.writer is not None:
            read = self._writer().refresh()
            logger.info("read %d manifests committed by other workers since the start", read)

    def _count(self, verified: bool, future: Future) -> None:
        if future.exception() is not None:
            return
        if not verified:
            key = Stat.QUARANTINED
        else:
            key = Stat.ARCHIVED if future.result() is not None else Stat.ALREADY_ARCHIVED
        with self._counting:
            self.stats.inc_value(key)

    async def close_spider(self) -> None:
        if self.writer is None:
            return
        flagged = self._writer().counts().get(Reason.NOT_APPEND_ONLY)
        if flagged:  # forks and rollbacks, kept as evidence only
            self.stats.set_value(Stat.NOT_APPEND_ONLY, flagged)
        if self.interim is not None:
            await maybe_deferred_to_future(self.interim)
        if not self.stats.get_value(Stat.BUNDLES_FETCHED) and not self.stats.get_value(Stat.NOT_MODIFIED):
            # a run that reached no bundle (resolver down, every seed failing) commits
            # nothing: an empty manifest would read as a run that worked
            await run_in_thread(self._writer().abort)
            await run_in_thread(self._uploader().close)
            logger.error("no bundle was fetched: nothing committed")
            return
        open_run = self._writer().current_run  # the final manifest's run id
        try:
            path = await run_in_thread(self._writer().commit, self._stats(), self._params())
        except StorageError as exc:
            self.stats.set_value(Stat.COMMIT_ERROR, str(exc))
            logger.error("nothing committed: %s", exc)
            return
        finally:
            await run_in_thread(self._uploader().close)
            self._warc_accounts()
        self.stats.set_value(Stat.MANIFEST, path)
        logger.info("committed %s", path)
        self.crawler.signals.send_catch_log(pith_signals.archive_committed, open_run=open_run)

    def _stats(self) -> dict:
        return {k: v for k, v in self.stats.get_stats().items() if k.startswith(PREFIX)}

    def _params(self) -> dict:
        return {
            "archive": self.archive,
            "worker": self.worker,
            "version": version(),
            "crawl_run_id": self._writer().first_run,
            "spider_args": self._spider_args(),
        }

    def _warc_accounts(self) -> None:
        """Exchanges no WARC file holds (the writer died, was stopped, or could not write them)."""
        warc = self._writer().warc
        if warc is not None and warc.lost:
            self.stats.inc_value(Stat.WARC_ERRORS, warc.lost)
        if warc is not None and warc.stopped:
            self.stats.set_value(Stat.WARC_STOPPED, warc.stopped)

    def _record_in_warc(self, fields: dict) -> Deferred | None:
        """What crawler.warc hands over: an exchange, or a request that got no response.
        A Deferred when the WARC writer's queue is full: it fires once there is room."""
        warc = self._warc()
        if "error" in fields:
            warc.failure(FetchFailure(**fields))
            return None
        if warc.record(Exchange(**fields)):
            return None
        from twisted.internet import reactor

        room: Deferred = Deferred()
        warc.when_room(lambda: reactor.callFromThread(room.callback, None))
        return room

    def _warc_info(self) -> dict:
        """The warcinfo record of each WARC file: who wrote it, from where, how politely."""
        settings = self.crawler.settings
        return {
            "software": warc_software(),
            "operator": settings.get("USER_AGENT"),
            "resolver": self._spider_args()["resolver"],
            "robots": "obey robots.txt" if settings.getbool("ROBOTSTXT_OBEY") else "ignore robots.txt",
            "worker": self.worker,
        }

    def _spider_args(self) -> dict:
        spider = self.crawler.spider
        return {
            **(spider.seeds.describe() if spider is not None and hasattr(spider, "seeds") else {"seeds": []}),
            "resolver": getattr(getattr(spider, "resolver", None), "base", None),
            "max_records": getattr(spider, "max_records", 0),
            "max_depth": getattr(spider, "max_depth", -1),
            "follow": getattr(spider, "follow", True),
        }
