"""scrapy-redis's scheduler for a crawl shared by many workers: shared tasks with owners
and leases, a local queue for the work that continues them, and a close decided by the
whole crawl, not one worker's empty queue."""

import heapq
import itertools
import logging
import time
from typing import Any, Self

import redis
from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.asyncio import call_later, create_looping_call
from scrapy.utils.defer import deferred_from_coro
from scrapy_redis.scheduler import Scheduler

from .. import signals as pith_signals
from ..crawl_config import crawl_config
from ..meta_keys import Meta, take_opening
from ..scheduling.claims import BUNDLE, PAGE, Opening, claim_found
from ..stat_keys import Stat
from .client import Frontier
from .errors import FrontierError, RequestNotSerializable
from .serializer import KIND_OF

logger = logging.getLogger(__name__)

TAKE = 8  # tasks taken per round trip: few, so no worker sits on work another could do


class FrontierScheduler(Scheduler):
    """scrapy-redis's scheduler for a crawl shared by many workers.

    A request that opens a task (``meta[Meta.TASK]`` not held by this worker) goes
    to the shared queue, through scrapy-redis's shared duplicate filter; everything
    else (retries, redirects, mirror fallbacks, the state.json check of a bundle, the
    mirror list) stays in a local queue, unfiltered: it continues work this worker
    holds, which another worker redoes whole if this one dies. Settings:
    PITH_FRONTIER_LEASE, PITH_FRONTIER_IDLE_CLOSE, PITH_FRONTIER_POLL.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.local: list[tuple[int, int, Request]] = []
        self.order = itertools.count()
        self.running: set[str] = set()  # tasks this worker popped
        self.recoveries_seen = 0  # takeovers whose interim commits the archive has read
        self.closing = False
        self.drained_since: float | None = None
        self.unreachable_since: float | None = None
        self.found: list[tuple[Opening, Request]] = []  # records named, not yet claimed, with their requests
        self.max_records = 0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        frontier = crawler.get_extension(Frontier)
        if frontier is None:
            raise FrontierError("FrontierScheduler needs the Frontier extension (set PITH_FRONTIER)")
        scheduler = super().from_crawler(crawler)
        scheduler.crawler, scheduler.frontier = crawler, frontier
        scheduler.max_records = crawl_config(crawler).max_records
        settings = crawler.settings
        scheduler.idle_close = settings.getfloat("PITH_FRONTIER_IDLE_CLOSE")
        scheduler.poll = settings.getfloat("PITH_FRONTIER_POLL")
        scheduler.unreachable_max = settings.getfloat("PITH_FRONTIER_UNREACHABLE_MAX")
        crawler.signals.connect(scheduler.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(scheduler.spider_idle, signal=signals.spider_idle)
        crawler.signals.connect(scheduler.archive_committed, signal=pith_signals.archive_committed)
        scheduler.ticker = create_looping_call(scheduler.tick)
        return scheduler

    def open(self, spider: Spider) -> None:
        super().open(spider)
        self.frontier.heartbeat()
        logger.info(
            "worker %s joined the frontier %s (%d requests queued)",
            self.frontier.worker,
            self.frontier.prefix.rstrip(":"),
            len(self.queue),
        )

    def spider_opened(self, spider: Spider) -> None:
        self.ticker.start(self.poll, now=False)  # the engine's scraper is open only now

    def enqueue_request(self, request: Request) -> bool:
        opening = take_opening(request)
        if opening is not None:  # claimed in one round trip with those found beside it
            self.found.append((opening, request))
            if len(self.found) == 1:
                call_later(0, self.flush)
            return True
        self._schedule(request)
        return True

    def _claim(self) -> None:
        """Claim the records found since the last round trip: a record is this worker's
        when it is the first of all workers to name it (within --max-records)."""
        found, self.found = self.found, []
        for request in claim_found(found, self.frontier, self.max_records, self.stats):
            self._schedule(request)

    def records_full(self) -> bool:
        """--max-records reached across the workers: no record will be claimed any more."""
        self._claim()
        return self.frontier.full

    def _schedule(self, request: Request) -> None:
        task = request.meta.get(Meta.TASK)
        if task and task not in self.running and self._share(request):
            self.stats.inc_value("scheduler/enqueued/redis")
        else:
            self._keep(request)
            self.stats.inc_value("scheduler/enqueued/memory")

    def _share(self, request: Request) -> bool:
        """Queue a request that opens a task in the frontier, past scrapy-redis's duplicate
        filter (its fingerprint and set, checked as it is queued). False when no task can
        name it (a sitemap seed on an --allow-host host): this worker fetches it alone."""
        first = not self.queue.pending
        try:
            self.queue.push(request, None if request.dont_filter else self.df.request_fingerprint(request))
        except RequestNotSerializable as exc:
            logger.warning("%s: this worker reads it alone", exc)
            return False
        if first:  # send what this turn of the reactor queues in one go
            call_later(0, self.flush)
        return True

    def _keep(self, request: Request) -> None:
        heapq.heappush(self.local, (-request.priority, next(self.order), request))

    def flush(self) -> None:
        self._claim()
        filtered = self.queue.flush(self.df.key)
        if filtered:
            self.stats.inc_value("dupefilter/filtered", filtered)

    def next_request(self) -> Request | None:
        self.flush()
        if not self.local:
            self._take()
        return heapq.heappop(self.local)[2] if self.local else None

    def _take(self) -> int:
        """Take a few shared tasks into the local queue; how many."""
        requests = self.queue.take(TAKE)
        if requests:
            self._learn_recoveries()
        for request in requests:
            self.running.add(request.meta[Meta.TASK])
            self._keep(request)
        if requests:
            self.stats.inc_value("scheduler/dequeued/redis", len(requests))
        return len(requests)

    def _learn_recoveries(self) -> None:
        """Before running tasks a dead worker held, have the archive read what that
        worker's interim commits committed, so none of it is archived twice."""
        count = self.frontier.recoveries()
        if count > self.recoveries_seen:
            self.recoveries_seen = count
            self.crawler.signals.send_catch_log(pith_signals.frontier_recovered)

    def has_pending_requests(self) -> bool:
        return bool(self.found or self.local or self.queue.pending) or len(self.queue) > 0

    def archive_committed(self) -> None:
        """Release the tasks whose results the manifest just committed lists. The archive
        commits once, as the spider closes, when the engine has run every request it
        started; the tasks still queued here never ran and go to the other workers."""
        self.flush()
        unfinished = {entry[2].meta.get(Meta.TASK) for entry in self.local}
        released = self.frontier.release(self.running - unfinished)
        self.stats.set_value(Stat.FRONTIER_RELEASED, released)

    def spider_idle(self) -> None:
        """Keep the worker open: the frontier, not one worker's empty queue, says when
        the crawl is over (see ``tick``)."""
        if not self.closing:
            self.frontier.mark_idle()
            raise DontCloseSpider

    def tick(self) -> None:
        """Renew the lease; when there is room, take shared work; when idle, give back
        dead workers' tasks, and close once all has stayed drained for a while."""
        try:
            self._tick()
        except redis.RedisError as exc:  # a LoopingCall that raises never runs again
            self.unreachable(exc)
        else:
            self.unreachable_since = None

    def unreachable(self, exc: redis.RedisError) -> None:
        """Retry a frontier that does not answer, for PITH_FRONTIER_UNREACHABLE_MAX
        seconds; then stop: an unattended worker must not wait forever on a Redis that
        is gone. What it archived is committed as it closes."""
        now = time.monotonic()
        self.unreachable_since = self.unreachable_since or now
        if self.closing or now - self.unreachable_since < self.unreachable_max:
            logger.error("frontier unreachable, retrying: %s", exc)
            return
        logger.error("frontier unreachable for %.0f s, stopping: %s", now - self.unreachable_since, exc)
        self.stats.set_value(Stat.FRONTIER_LOST, f"unreachable for {now - self.unreachable_since:.0f} s: {exc}")
        self.closing = True
        deferred_from_coro(self.crawler.engine.close_spider_async(reason="frontier_unreachable"))

    def _tick(self) -> None:
        self.frontier.heartbeat()
        engine = self.crawler.engine
        if self.closing or engine.spider is None:
            return
        self.flush()
        if not engine.needs_backout() and self._take():
            engine.crawl(heapq.heappop(self.local)[2])  # wakes the engine now, not at its next heartbeat
        if not engine.spider_is_idle():
            self.drained_since = None
            return
        self.frontier.mark_idle()
        if self.recover() or any(self.frontier.drain()):
            self.drained_since = None
            return
        now = time.monotonic()
        self.drained_since = self.drained_since or now
        if now - self.drained_since >= self.idle_close:
            self.closing = True
            deferred_from_coro(engine.close_spider_async(reason="finished"))

    def recover(self) -> int:
        """Queue again the tasks of workers that died; how many."""
        taken = self.frontier.recover()
        if taken:
            self.frontier.announce_recovery()
            self._learn_recoveries()
        refused = []
        for task, arg in taken:
            prefix, _, suffix = task.partition(":")
            if prefix in (BUNDLE, PAGE):  # a record task's owner holds its depth
                depth = int(arg) if arg.isdigit() else arg.decode("latin-1")
                arg = {"kind": KIND_OF[prefix], "suffix": suffix, "depth": depth}
            request = self.queue.rebuild(task, arg)
            if request is None:
                refused.append(task)
            else:
                self.queue.push(request)  # past the duplicate filter already
        self.frontier.release(refused)
        self.flush()
        if taken:
            self.stats.inc_value(Stat.FRONTIER_RECOVERED, len(taken))
            logger.info("queued again %d tasks of a worker that stopped", len(taken))
        return len(taken)

    def close(self, reason: str) -> None:
        """Leave the crawl, handing the tasks still held (all of them when nothing was
        committed) to the other workers. Never flush: the queue and seen-sets belong to
        the whole crawl."""
        if self.ticker.running:
            self.ticker.stop()
        self.closing = True
        try:
            self.flush()
            handed_over = self.frontier.leave()
        except redis.RedisError as exc:  # its tasks return to the others when its lease runs out
            logger.error("worker %s could not leave the frontier: %s", self.frontier.worker, exc)
            return
        logger.info(
            "worker %s left the frontier: %d tasks done, %d handed to the other workers",
            self.frontier.worker,
            self.stats.get_value(Stat.FRONTIER_RELEASED, 0),
            handed_over,
        )
