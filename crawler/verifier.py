"""Parse and verify fetched bundles off the reactor, in a pool of worker processes.

Verifying a bundle is ~0.5 ms of Python that holds the GIL (only the Ed25519 checks
release it), so threads would slow Scrapy's thread rather than free it: the work goes
to processes (bench/RESULTS.md, "Verification off the reactor"). Handing a bundle to a
process and taking its verdict back still costs the crawl's process about two thirds
of what verifying it inline does, so the pool pays only where a core is idle. At most
``IN_FLIGHT_PER_WORKER`` bundles per worker are queued; past that the spider's callback
waits, its responses stay in Scrapy's scraper and the engine stops downloading until
the workers catch up. A worker that dies (killed, out of memory) takes nothing with it:
the pool is replaced and the bundle verified again.
"""

import asyncio
import logging
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from scrapy import signals
from scrapy.utils.asyncio import is_asyncio_available

from pith.keyring import KeyringError
from pith.parse import Limits
from pith.verify import Verdict
from .key_watch import crawl_keyring
from .verify_worker import Checker, check, start

logger = logging.getLogger(__name__)

IN_FLIGHT_PER_WORKER = 4
ATTEMPTS = 3  # pools a bundle may break before it is verified in the crawl's own thread


def default_workers() -> int:
    """One worker where this process may use three cores or more, else none. One worker
    verifies ~2,000 bundles a second, several times what one crawl thread fetches, so a
    second never helps; on two cores it takes CPU from the crawl thread and whatever
    else runs there (measured: bench/RESULTS.md, "Verification off the reactor")."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return 1 if cores >= 3 else 0


class Verifier:
    """``await verifier.verify(raw)``: the verdict on a bundle's bytes and whether they
    parsed. Settings: PITH_KEYRINGS, PITH_DEFAULT_KEYS, PITH_VERIFY_WORKERS (0: in the
    crawl's own thread, as before)."""

    def __init__(self, checker: Checker, workers: int):
        self.checker = checker
        self.workers = workers
        self.stats = None  # the crawl's, once it opens
        self.pool: ProcessPoolExecutor | None = None
        self.slots = asyncio.Semaphore(workers * IN_FLIGHT_PER_WORKER) if workers else None

    @classmethod
    def from_crawler(cls, crawler):
        settings = crawler.settings
        # a crawl without its verifier would archive nothing (or worse): never NotConfigured
        keyring = crawl_keyring(settings)
        if not len(keyring):
            raise KeyringError("the keyring is empty: nothing could verify (PITH_KEYRINGS, PITH_DEFAULT_KEYS)")
        workers = settings.get("PITH_VERIFY_WORKERS")
        workers = default_workers() if workers is None else settings.getint("PITH_VERIFY_WORKERS")
        verifier = cls(Checker(keyring, Limits()), max(workers, 0))
        crawler.signals.connect(verifier.open, signal=signals.spider_opened)
        crawler.signals.connect(verifier.close, signal=signals.spider_closed)
        return verifier

    async def verify(self, raw: bytes) -> tuple[Verdict, bool]:
        if self.workers and self.pool is None and not is_asyncio_available():
            logger.warning("PITH_VERIFY_WORKERS needs Scrapy's asyncio reactor: verifying in the crawl's thread")
            self.workers = 0
        if not self.workers:
            return self.checker(raw)
        async with self.slots:
            for _ in range(ATTEMPTS):
                pool = self.pool or self._start()
                try:
                    return await asyncio.wrap_future(pool.submit(check, raw))
                except BrokenProcessPool:
                    self._replace(pool)
        logger.warning("%d verifier pools broke on one bundle: verifying it in the crawl's thread", ATTEMPTS)
        return self.checker(raw)

    def _start(self) -> ProcessPoolExecutor:
        self.pool = ProcessPoolExecutor(
            self.workers, mp_context=multiprocessing.get_context("spawn"), initializer=start, initargs=(self.checker,)
        )
        return self.pool

    def _replace(self, broken: ProcessPoolExecutor) -> None:
        """A worker died: every bundle it held comes back as BrokenProcessPool and is
        submitted again, to one new pool."""
        if self.pool is broken:
            logger.warning("a verifier process died; starting a new pool and verifying its bundles again")
            broken.shutdown(wait=False, cancel_futures=True)
            self.pool = None
            if self.stats is not None:
                self.stats.inc_value("pith/verify_pool_restarts")

    def open(self, spider) -> None:
        self.stats = spider.crawler.stats
        self.stats.set_value("pith/verify_workers", self.workers)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None
