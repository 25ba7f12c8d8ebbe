"""What one job (one invocation of ``crawl``, ``audit`` or ``export``) did, typed, for
the machines that watch scheduled jobs (``pith_archiver.reporting.metrics``,
``pith_archiver.reporting.notify``).

The command fills in its counts; the exit status is the one the process exits with
(``pith_archiver.reporting.job_hooks`` reads it), so a metric or a message never disagrees with
what cron or systemd saw.
"""

import time
from dataclasses import dataclass, field

from crawler.stat_keys import CrawlStats

from ..exit_status import MEANING, ExitStatus

DONE = (ExitStatus.OK, ExitStatus.REJECTED, ExitStatus.PARTIAL)  # the job finished and committed


@dataclass
class JobSummary:
    command: str  # crawl, audit or export
    archive: str
    started: float = field(default_factory=time.time)  # seconds since the epoch
    status: ExitStatus | None = None  # None while the job goes on (a crawl's interim commit)
    why: str = ""
    archived: int = 0  # crawl: bundles archived new; audit: bundles checked; export: bundle versions exported
    unchanged: int = 0
    rejected: dict[str, int] = field(default_factory=dict)  # reason (audit: discrepancy code) -> count
    failed: int = 0
    requests: int = 0
    run_id: str | None = None  # a crawl's first run, which names the crawl
    manifest: str | None = None  # the latest manifest committed, in the archive
    finished: float | None = None

    @property
    def duration(self) -> float:
        return (self.finished or time.time()) - self.started

    @property
    def succeeded(self) -> bool:
        """Done, with a commit: exit 0, 1 or 3 (what ``last success`` counts)."""
        return self.status in DONE

    def as_dict(self) -> dict:
        """The JSON a ``--notify`` endpoint receives."""
        status = self.status
        return {
            "command": self.command,
            "archive": self.archive,
            "exit_status": None if status is None else int(status),
            "status": None if status is None else status.name.lower(),
            "meaning": None if status is None else MEANING[status],
            "why": self.why,
            "succeeded": self.succeeded,
            "run_id": self.run_id,
            "manifest": f"{self.archive.rstrip('/')}/{self.manifest}" if self.manifest else None,
            "started": _iso(self.started),
            "finished": _iso(self.finished) if self.finished else None,
            "duration_seconds": round(self.duration, 3),
            "records": {
                "archived": self.archived,
                "unchanged": self.unchanged,
                "rejected": sum(self.rejected.values()),
                "failed": self.failed,
            },
            "rejected_by_reason": dict(sorted(self.rejected.items())),
            "requests": self.requests,
        }


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def crawl_counts(stats: dict) -> dict:
    """A crawl's counts, from its Scrapy stats (at an interim commit or at the end)."""
    crawl = CrawlStats.of(stats)
    return {
        "archived": crawl.committed,  # a failed commit archived nothing
        "unchanged": crawl.unchanged,
        "rejected": crawl.rejections,
        "failed": crawl.failed,
        "requests": crawl.requests,
        "run_id": crawl.run_id,
        "manifest": crawl.manifest,
    }
