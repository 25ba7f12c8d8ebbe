"""Scrapy's downloader with its per-slot concurrency cap enforced, and a way to stop
waiting for the requests it holds.

Under the asyncio reactor, Scrapy 2.19's ``Downloader._process_queue`` starts each
download as a task and the task marks its request as transferring only once it runs;
meanwhile the loop sees every transfer slot free and starts everything queued for the
host. ``CONCURRENT_REQUESTS_PER_DOMAIN`` (and ``DOWNLOAD_SLOTS`` concurrency) then
caps nothing when there is no download delay. Taking the slot when the download is
handed over keeps the cap; the task's own bookkeeping then releases it as before.

A crawl stopping at once (a second Ctrl-C, or SIGTERM: ``pith_archiver.crawl.stop``)
must not wait for downloads that may take up to ``DOWNLOAD_TIMEOUT`` each, nor for a
retry's backoff: ``drop_in_flight`` cancels every fetch the downloader holds. The
spider never hears of a dropped request (its errback would count the record failed):
it goes back to the scheduler, so a ``--jobdir`` keeps it for the resumed crawl.
"""

from typing import Any

from scrapy import Request, Spider
from scrapy.core.downloader import Downloader, Slot
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.http.request import NO_CALLBACK
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from ..stat_keys import Stat


class CappedDownloader(Downloader):
    """The one place the crawler overrides a private Scrapy method, on purpose: Scrapy
    2.19 has no public hook between a slot's queue handing a request over and the
    download task that starts it (downloader middlewares and ``request_reached_downloader``
    run before the request joins the slot's queue), and the cap must be taken exactly
    there. ``_wait_for_download`` is called synchronously by
    ``_process_queue`` and returns the task's coroutine; when upgrading Scrapy, check
    that it still does, or drop this class once Scrapy enforces the cap itself
    (``test_the_per_host_cap_holds_without_a_download_delay`` measures it)."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.fetching: dict[Request, Deferred] = {}  # every fetch under way, queued in a slot or downloading
        self.dropped: set[Request] = set()

    def fetch(self, request: Request, spider: Spider | None = None) -> Deferred:
        fetching = super().fetch(request)
        self.fetching[request] = fetching
        return fetching.addBoth(self._fetched, request)

    def drop_in_flight(self) -> int:
        """Cancel every fetch under way; returns how many there were. Pause the engine
        first, so that none starts meanwhile."""
        held = list(self.fetching.items())
        self.dropped.update(request for request, _ in held)
        for slot in self.slots.values():
            slot.queue.clear()  # their fetches are cancelled below: none may start a download later
        for _, fetching in held:
            fetching.cancel()
        self.crawler.stats.inc_value(Stat.REQUESTS_DROPPED, len(held))
        return len(held)

    def _fetched(self, result: Any, request: Request) -> Any:
        """A dropped request the scheduler gave goes back to it (the engine schedules a
        Request the downloader returns); one downloaded directly (robots.txt, the signing
        key document) has no spider callback and fails with the cancellation."""
        self.fetching.pop(request, None)
        dropped = request in self.dropped
        self.dropped.discard(request)
        if dropped and isinstance(result, Failure) and request.callback not in (None, NO_CALLBACK):
            return request.replace(dont_filter=True)  # the duplicate filter has seen it
        return result

    def _wait_for_download(self, slot: Slot, request: Request, queue_dfd: Deferred[Response]) -> Any:
        slot.transferring.add(request)
        return super()._wait_for_download(slot, request, queue_dfd)
