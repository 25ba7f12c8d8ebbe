"""A ``--jobdir`` that survives a crash.

Scrapy writes a job directory's request queue and spider state as the crawl goes and
closes them only on a clean stop. A process killed in between (SIGKILL, the OOM
killer, a second Ctrl-C, power loss) leaves a torn queue file: every later push into
it fails, and the resumed crawl silently drops those requests and "finishes" early,
having archived a fraction of what it should. So the job directory is marked, under
an exclusive lock, while a crawl uses it. A crawl that finds the mark left behind
(nobody holds its lock) resets the frontier files and starts from its seeds again;
nothing is lost, since records the killed crawl committed are not archived twice (the
archive deduplicates by bundle_sha256) and conditional requests make re-fetching them
cheap. A mark whose lock is held means another live crawl uses the directory.

The job directory is a cache of the archive too: it lists the run ids its commits
wrote (``pith-commits``), and a job resumed against an archive that no longer holds
one of them (deleted, restored from an older copy, replaced) starts from its seeds
again the same way, since the records it took are no longer archived
(``check``, called by the archive pipeline before the scheduler opens the queue).
"""

import fcntl
import logging
import os
import shutil
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Self, TextIO

from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.statscollectors import StatsCollector
from scrapy.utils.job import job_dir

from .. import signals as pith_signals
from ..crawl_config import pith_crawl_only
from ..stat_keys import Stat, StatFamily
from .seen import FILE_NAME as SEEN_FILE

logger = logging.getLogger(__name__)

MARK = "pith-running.lock"
COMMITS = "pith-commits"  # the run ids of the manifests this job committed, one a line
# pith-state/ is crash-safe, and checked against the archive on its own (ConditionalRequestMiddleware)
FRONTIER_FILES = ("requests.queue", "requests.seen", "spider.state", SEEN_FILE, COMMITS)


class JobdirInUse(RuntimeError):
    """Another live crawl holds the job directory."""


class JobdirGuard:
    def __init__(self, jobdir: Path, stats: StatsCollector) -> None:
        self.jobdir = jobdir
        self.stats = stats
        self.reset = False
        self._handle: TextIO | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        pith_crawl_only(crawler)
        path = job_dir(crawler.settings)
        if not path:
            raise NotConfigured
        guard = cls(Path(path), crawler.stats)
        guard.claim()  # before the scheduler opens the queue: extensions are built first
        crawler.signals.connect(guard.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(guard.note_commit, signal=pith_signals.interim_committed)
        crawler.signals.connect(guard.note_commit, signal=pith_signals.archive_committed)
        crawler.signals.connect(guard.spider_closed, signal=signals.spider_closed)
        return guard

    def claim(self) -> None:
        mark = self.jobdir / MARK
        left_behind = mark.exists()
        handle = open(mark, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise JobdirInUse(f"{self.jobdir} is in use by another crawl") from None
        self._handle = handle
        if left_behind:
            logger.warning(
                "%s was not closed cleanly (the crawl was killed): its queue cannot be trusted; "
                "starting again from the seeds (committed records are not archived twice)",
                self.jobdir,
            )
            self._start_over()

    def _start_over(self) -> None:
        for name in FRONTIER_FILES:
            target = self.jobdir / name
            if target.is_dir():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)
        self.reset = True

    def commits(self) -> set[str]:
        """The run ids of the manifests this job committed."""
        path = self.jobdir / COMMITS
        return set(path.read_text("utf-8").split()) if path.exists() else set()

    def check(self, present: AbstractSet[str]) -> None:
        """Start over from the seeds when the archive lacks a manifest this job
        committed (``present``: the run ids of those it holds): the records the job
        took for them are no longer archived. Before the scheduler opens the queue."""
        missing = self.commits() - set(present)
        if missing:
            logger.warning(
                "cache did not match the archive: it lacks %d manifests the job in %s committed; "
                "the job's state dropped, starting again from the seeds",
                len(missing),
                self.jobdir,
            )
            self._start_over()
            self.stats.set_value(StatFamily.CACHE_DROPPED + "job", len(missing))

    def note_commit(self, run_id: str) -> None:
        with open(self.jobdir / COMMITS, "a", encoding="utf-8") as handle:
            handle.write(run_id + "\n")

    def spider_opened(self, spider: Spider) -> None:
        if self.reset:
            self.stats.set_value(Stat.JOBDIR_RESET, 1)

    def spider_closed(self, spider: Spider, reason: str) -> None:
        """Every Scrapy job file is closed by now: the directory may be resumed."""
        os.unlink(self.jobdir / MARK)
        if self._handle is not None:
            self._handle.close()
