"""What SIGINT (Ctrl-C) and SIGTERM do to a running crawl: three steps, each sooner.

Scrapy's own handlers stop gracefully on the first signal and, on the second, stop the
reactor without closing the spider: nothing is committed, and every bundle verified
since the last commit is lost (left as orphans for the audit). Ours, while Scrapy runs:

1. Ctrl-C: Scrapy's graceful stop. No new request; those in flight finish, through
   their retries; what was archived is committed.
2. Ctrl-C again, or SIGTERM: stop at once. The requests in flight are dropped
   (``crawler.downloading.downloader``: back in the queue, so a ``--jobdir`` keeps them), what was
   archived is committed. Past ``PITH_STOP_GRACE`` seconds (a store that hangs), step 3.
3. Another signal: exit now, without committing, one line saying how many bundles
   archived since the last commit are lost.

The summary (``crawl_report``) then exits 130, or 143 when the last signal was SIGTERM;
after it, ``pith_archiver.interrupts`` bounds what is left.
"""

import logging
import signal
import threading
from types import FrameType
from typing import NoReturn

from scrapy import signals
from scrapy.core.engine import ExecutionEngine
from scrapy.crawler import Crawler
from scrapy.utils.defer import deferred_from_coro

from crawler.downloading.downloader import CappedDownloader
from crawler.extensions.crawl_archive import CrawlArchive
from crawler.stat_keys import Stat

from .. import interrupts
from ..interrupts import SIGNALS, name_of
from ..output import counted, say

logger = logging.getLogger(__name__)

AT_ONCE = 2  # the step a SIGTERM starts at


class CrawlStop:
    """The crawl's handlers of SIGINT and SIGTERM, from ``install`` to ``uninstall``
    (the time Scrapy's reactor runs, started without Scrapy's own handlers)."""

    def __init__(self, crawler: Crawler, grace: float) -> None:
        self.crawler = crawler
        self.grace = grace
        self.step = 0
        self.signum: int | None = None  # the last signal received
        self._grace_timer: threading.Timer | None = None
        self._stopping_on_start = False

    def install(self) -> None:
        for signum in SIGNALS:
            signal.signal(signum, self._on_signal)

    def uninstall(self) -> None:
        """Scrapy is done: what is left (the summary) is bounded as any command's unwinding."""
        if self._grace_timer is not None:
            self._grace_timer.cancel()
        if self.signum is None:
            interrupts.raise_on_signals()
        else:
            interrupts.unwinding(self.signum)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        """Runs in the main thread between two bytecodes of whatever it was doing: it
        only counts, and hands the stop to the reactor (or exits)."""
        from twisted.internet import reactor

        self.signum = signum
        self.step = max(self.step + 1, AT_ONCE if signum == signal.SIGTERM else 1)
        if self.step > AT_ONCE:
            self._abort(f"{name_of(signum)} again")
        if self.step == AT_ONCE:
            self._grace_timer = interrupts.exit_after(
                self.grace, lambda: self._abort(f"not stopped within PITH_STOP_GRACE ({self.grace:g} s)")
            )
        reactor.callFromThread(self._stop, signum, self.step)

    def _stop(self, signum: int, step: int) -> None:
        """In the reactor: step 1 or 2 (see the module docstring)."""
        self.crawler.stats.set_value(Stat.STOPPED_BY, name_of(signum))
        try:
            engine = self.crawler.engine
        except RuntimeError:  # the crawl never began: nothing to stop
            return
        if step < AT_ONCE:
            logger.info("%s: stopping gracefully (send it again to stop at once)", name_of(signum))
            say(
                f"{name_of(signum)}: stopping; requests in flight finish, what was archived is committed "
                "(Ctrl-C again: stop at once)",
                err=True,
            )
        else:
            engine.pause()  # nothing new starts while those in flight are dropped
            downloader = engine.downloader
            dropped = downloader.drop_in_flight() if isinstance(downloader, CappedDownloader) else 0
            logger.info("%s: stopping at once, %d requests in flight dropped", name_of(signum), dropped)
            say(
                f"{name_of(signum)}: stopping at once; {counted(dropped, 'request')} in flight dropped, "
                "committing what was archived (another signal: quit without committing)",
                err=True,
            )
        if engine.running:
            deferred_from_coro(self._close(engine))
        elif not self._stopping_on_start:  # still opening (or already stopped: then it never starts)
            self._stopping_on_start = True
            self.crawler.signals.connect(self._stop_on_start, signal=signals.engine_started)

    @staticmethod
    async def _close(engine: ExecutionEngine) -> None:
        """Close the spider with Scrapy's reason for a stop (``finish_reason`` shutdown); one
        closing already (the crawl done, committing) goes on, and this waits for it."""
        if engine.spider is not None:
            await engine.close_spider_async(reason="shutdown")

    async def _stop_on_start(self) -> None:
        """The engine was still opening (the archive read, the spider opened): stop it as
        it starts (Scrapy's own way for a stop during its start)."""
        await self.crawler.engine.stop_async()

    def _abort(self, why: str) -> NoReturn:
        """Step 3: exit now, from the signal handler or the grace timer's thread."""
        archive = self.crawler.get_extension(CrawlArchive)
        lost = archive.uncommitted() if archive is not None else 0
        assert self.signum is not None  # noqa: S101 - a signal started the stop
        interrupts.exit_now(
            self.signum,
            f"{why}: quit without committing; lost {counted(lost, 'bundle')} archived new since the last commit "
            "(the audit lists what they left as orphans); rerun the same command",
        )
