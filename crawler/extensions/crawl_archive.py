"""The crawl's archive, as a Scrapy extension: its writer and its WARC writer.

One ``ArchiveWriter`` (``storage.archive``) per crawl, reached by the components that
write into it through ``crawler.get_extension(CrawlArchive)`` (as the frontier is): the
archive pipeline adds the items to ``writer``, the WARC recorder (``crawler.downloading.warc_recorder``)
hands each exchange to ``warc``. It commits a signed manifest every ``commit_every``
bundles (an interim commit, while the crawl goes on) and at the end.

Its ``open`` and ``close`` bracket the items, so the archive pipeline calls them from
its own: Scrapy opens the item pipelines before the spider opens (the signing-key check
is then already recorded in the WARC) and closes them before the scheduler (a frontier's
tasks go back only once what they archived is committed); no signal comes at those
moments. Storage work runs off the reactor thread.
"""

import logging
from dataclasses import replace
from datetime import datetime
from typing import Any

from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import run_in_thread
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from scrapy.utils.log import failure_to_exc_info
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from pith.keyring import Keyring
from pith.reasons import Reason
from pith.shipped import version
from storage.archive import layout
from storage.archive.manifest import present_runs
from storage.archive.stores import StorageError
from storage.capture.warc import WarcPolicy
from storage.capture.warc import software as warc_software
from storage.capture.warc_process import WarcProcess
from storage.writing.table_writer import memory_pool
from storage.writing.uploads import BoundedUploader
from storage.writing.writer import ArchiveWriter

from .. import signals as pith_signals
from ..crawl_config import CrawlConfig, crawl_config
from ..scheduling.jobdir import JobdirGuard
from ..stat_keys import PREFIX, Stat
from ..verifying.verifier import SERVICE as VERIFIER_SERVICE
from ..verifying.verifier import verifier_processes
from ..worker import worker_name

logger = logging.getLogger(__name__)


def when(stamp: str) -> datetime:
    """An item's ``fetched_at`` as a datetime."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


class CrawlArchive:
    """The crawl config's store, signer, archive keyring, worker, commit interval, WARC
    policy and log origin; PITH_UPLOAD_MAX_BYTES_IN_FLIGHT. Off (NotConfigured) when
    the crawl archives nothing."""

    def __init__(self, crawler: Crawler, config: CrawlConfig) -> None:
        if config.store is None or config.signer is None:
            raise NotConfigured("PITH_ARCHIVE is not set")
        self.crawler = crawler
        self.stats = crawler.stats
        self.config = config
        self.worker = worker_name(config.worker)
        self.in_flight = crawler.settings.getint("PITH_UPLOAD_MAX_BYTES_IN_FLIGHT")
        self._writer: ArchiveWriter | None = None
        self._uploader: BoundedUploader | None = None
        self.interim: Deferred | None = None  # the interim commit under way
        crawler.signals.connect(self._refresh, signal=pith_signals.frontier_recovered)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> "CrawlArchive":
        return cls(crawler, crawl_config(crawler))

    def check_before_start(self) -> None:
        """What must hold before the scheduler opens (called once the extensions are
        all made): a resumed job's queue was built on runs the archive holds. (That the
        signing key is no other live worker's, the frontier checks as it is made.)"""
        store = self.config.store
        assert store is not None  # noqa: S101 - checked when made
        guard = self.crawler.get_extension(JobdirGuard)
        if guard is not None and guard.commits():  # a resumed job: before the scheduler opens its queue
            guard.check(present_runs(store))

    @property
    def writer(self) -> ArchiveWriter:
        if self._writer is None:
            raise RuntimeError("the crawl's archive opens with the spider")
        return self._writer

    @property
    def uploader(self) -> BoundedUploader:
        if self._uploader is None:
            raise RuntimeError("the crawl's archive opens with the spider")
        return self._uploader

    @property
    def warc(self) -> WarcProcess | None:
        """The crawl's WARC writer, once the archive is open (None before, or with --no-warc)."""
        return None if self._writer is None else self._writer.warc

    def uncommitted(self) -> int:
        """Bundles archived new that no commit holds yet (none before the archive opens)."""
        return 0 if self._writer is None else self._writer.uncommitted()

    async def open(self) -> None:
        config = self.config

        def open_writer() -> ArchiveWriter:
            store, signer = config.store, config.signer
            assert store is not None and signer is not None  # noqa: S101 - checked when made
            self._uploader = BoundedUploader(max_bytes_in_flight=self.in_flight, workers=store.upload_threads)
            return ArchiveWriter(
                store,
                signer,
                worker=self.worker,
                uploader=self._uploader,
                keyring=Keyring([*config.archive_keyring, signer.pinned()]),
                warc=self._warc_policy(),
                warc_info=self._warc_info(),
                log_origin=config.log_origin,
            ).open()

        self._writer = await run_in_thread(open_writer)
        self.stats.set_value(Stat.RUN_ID, self.writer.first_run)
        self.crawler.signals.send_catch_log(
            pith_signals.archive_opened,
            committed=self.writer.committed_runs,
            present=self.writer.present_runs,
            warc=self.writer.warc,
            writer=self.writer,
        )

    def stop(self, exc: StorageError) -> None:
        """A store that keeps failing ends the crawl: nothing of this run will commit,
        so fetching more only wastes the resolver's bandwidth. (CloseSpider raised from
        a pipeline is only logged by Scrapy, so ask the engine directly.)"""
        if self.stats.get_value(Stat.COMMIT_ERROR):
            return
        self.stats.set_value(Stat.COMMIT_ERROR, f"storage failed: {exc}")
        logger.error("storage failed, stopping the crawl: %s", exc)
        deferred_from_coro(self.crawler.engine.close_spider_async(reason="storage_failed"))

    def commit_if_due(self) -> None:
        """An interim commit once ``commit_every`` bundles wait (one at a time)."""
        every = self.config.commit_every
        if every and self.interim is None and self.writer.pending_bundles() >= every:
            # the run it commits: none other can begin before it is switched out
            run_id = self.writer.current_run
            interim = run_in_thread(self.writer.commit_interim, self._stats(), self._params())
            self.interim = deferred_from_coro(interim)
            self.interim.addBoth(self._interim_done, run_id)

    def _interim_done(self, result: Any, run_id: layout.RunId) -> None:
        """An interim commit ended: its manifest is the crawl's latest commit, or its
        failure stops the crawl (nothing may commit after a failed run)."""
        self.interim = None
        if isinstance(result, Failure):
            if isinstance(result.value, StorageError):
                self.stop(result.value)
            else:
                logger.error("interim commit failed", exc_info=failure_to_exc_info(result))
                self.stats.set_value(Stat.COMMIT_ERROR, f"interim commit failed: {result.value}")
            return None
        self.stats.inc_value(Stat.INTERIM_COMMITS)
        self.stats.set_value(Stat.MANIFEST, result)
        self.crawler.signals.send_catch_log(pith_signals.interim_committed, run_id=run_id)
        # logged once what the commit keeps (its bundles' validators) is kept too
        logger.info("interim commit %s", result)
        return None

    def _refresh(self) -> None:
        """The frontier is about to redo a dead worker's tasks: learn what its interim
        commits committed, so none of it is archived twice."""
        if self._writer is not None:
            read = self.writer.refresh()
            logger.info("read %d manifests committed by other workers since the start", read)

    async def close(self) -> None:
        """Commit what the crawl archived (nothing when it reached no bundle)."""
        if self._writer is None:
            return
        flagged = self.writer.counts().get(Reason.NOT_APPEND_ONLY)
        if flagged:  # forks and rollbacks, kept as evidence only
            self.stats.set_value(Stat.NOT_APPEND_ONLY, flagged)
        if self.interim is not None:
            await maybe_deferred_to_future(self.interim)
        if not self.stats.get_value(Stat.BUNDLES_FETCHED) and not self.stats.get_value(Stat.NOT_MODIFIED):
            # a crawl that reached no bundle (resolver down, every seed failing) commits
            # nothing: an empty manifest would read as a crawl that worked
            await run_in_thread(self.writer.abort)
            await run_in_thread(self.uploader.close)
            logger.error("no bundle was fetched: nothing committed")
            return
        run_id = self.writer.current_run  # the final manifest's run id
        try:
            path = await run_in_thread(self.writer.commit, self._stats(), self._params())
        except Exception as exc:  # the store failing, or the disk under the spool full: nothing of the run commits
            why = str(exc) if isinstance(exc, StorageError) else f"{type(exc).__name__}: {exc}"
            self.stats.set_value(Stat.COMMIT_ERROR, why)
            self.stats.set_value(Stat.UNCOMMITTED, self.uncommitted())
            logger.error(
                "the final commit failed: %s; %d bundles archived new are not committed", why, self.uncommitted()
            )
            return
        finally:
            await run_in_thread(self.uploader.close)
            self._warc_accounts()
            # asked once the commit is done: pyarrow comes in with the tables, after the
            # WARC writer's child has exited (loaded beside it, it made the crawl's peak)
            self.stats.set_value(Stat.ARROW_MEMORY_POOL, memory_pool())
        self.stats.set_value(Stat.MANIFEST, path)
        logger.info("committed %s", path)
        self.crawler.signals.send_catch_log(pith_signals.archive_committed, run_id=run_id)

    def _stats(self) -> dict:
        return {k: v for k, v in self.stats.get_stats().items() if k.startswith(PREFIX)}

    def _params(self) -> dict:
        store = self.config.store
        return {
            "archive": store.uri if store is not None else None,
            "worker": self.worker,
            "version": version(),
            "crawl_run_id": self.writer.first_run,
            "spider_args": self.config.describe(),
        }

    def _warc_accounts(self) -> None:
        """Exchanges no WARC file holds (the writer died, was stopped, or could not write them)."""
        warc = self.warc
        if warc is not None and warc.lost:
            self.stats.inc_value(Stat.WARC_ERRORS, warc.lost)
        if warc is not None and warc.stopped:
            self.stats.set_value(Stat.WARC_STOPPED, warc.stopped)

    def _warc_policy(self) -> WarcPolicy | None:
        """The crawl's WARC policy; its writer's process hosts the verifier when the
        crawl verifies off its own thread (one interpreter fewer than a process each)."""
        policy = self.config.warc
        if policy is not None and verifier_processes(self.crawler.settings):
            return replace(policy, hosted=(VERIFIER_SERVICE,))
        return policy

    def _warc_info(self) -> dict:
        """The warcinfo record of each WARC file: who wrote it, from where, how politely."""
        settings = self.crawler.settings
        return {
            "software": warc_software(),
            "operator": settings.get("USER_AGENT"),
            "resolver": self.config.resolver,
            "robots": "obey robots.txt" if settings.getbool("ROBOTSTXT_OBEY") else "ignore robots.txt",
            "worker": self.worker,
        }
