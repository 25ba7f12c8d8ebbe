"""A ``--jobdir`` that survives a crash.

Scrapy writes a job directory's request queue and spider state as the crawl goes and
closes them only on a clean stop. A process killed in between (SIGKILL, the OOM
killer, a second Ctrl-C, power loss) leaves a torn queue file: every later push into
it fails, and the resumed crawl silently drops those requests and "finishes" early,
having archived a fraction of what it should. So the job directory is marked, under
an exclusive lock, while a crawl uses it. A crawl that finds the mark left behind
(nobody holds its lock) resets the frontier files and starts from its seeds again;
nothing is lost, since records the killed run committed are not archived twice (the
archive deduplicates by bundle_sha256) and conditional requests make re-fetching them
cheap. A mark whose lock is held means another live crawl uses the directory.
"""

import fcntl
import logging
import os
import shutil
from pathlib import Path

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.job import job_dir

from .seen import FILE_NAME as SEEN_FILE

logger = logging.getLogger(__name__)

MARK = "pith-running.lock"
FRONTIER_FILES = ("requests.queue", "requests.seen", "spider.state", SEEN_FILE)  # pith-state/ is crash-safe


class JobdirInUse(RuntimeError):
    """Another live crawl holds the job directory."""


class JobdirGuard:
    def __init__(self, jobdir: Path, stats):
        self.jobdir = jobdir
        self.stats = stats
        self.reset = False
        self._handle = None

    @classmethod
    def from_crawler(cls, crawler):
        path = job_dir(crawler.settings)
        if not path:
            raise NotConfigured
        guard = cls(Path(path), crawler.stats)
        guard.claim()  # before the scheduler opens the queue: extensions are built first
        crawler.signals.connect(guard.spider_opened, signal=signals.spider_opened)
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
            for name in FRONTIER_FILES:
                target = self.jobdir / name
                if target.is_dir():
                    shutil.rmtree(target)
                else:
                    target.unlink(missing_ok=True)
            self.reset = True

    def spider_opened(self, spider):
        if self.reset:
            self.stats.set_value("pith/jobdir_reset", 1)

    def spider_closed(self, spider, reason):
        """Every Scrapy job file is closed by now: the directory may be resumed."""
        os.unlink(self.jobdir / MARK)
        self._handle.close()
