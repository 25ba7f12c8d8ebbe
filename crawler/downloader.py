"""Scrapy's downloader with its per-slot concurrency cap enforced.

Under the asyncio reactor, Scrapy 2.19's ``Downloader._process_queue`` starts each
download as a task and the task marks its request as transferring only once it runs;
meanwhile the loop sees every transfer slot free and starts everything queued for the
host. ``CONCURRENT_REQUESTS_PER_DOMAIN`` (and ``DOWNLOAD_SLOTS`` concurrency) then
caps nothing when there is no download delay. Taking the slot when the download is
handed over keeps the cap; the task's own bookkeeping then releases it as before.
"""

from typing import Any

from scrapy import Request
from scrapy.core.downloader import Downloader, Slot
from scrapy.http import Response
from twisted.internet.defer import Deferred


class CappedDownloader(Downloader):
    """The one place the crawler overrides a private Scrapy method, on purpose: Scrapy
    2.19 has no public hook between a slot's queue handing a request over and the
    download task that starts it (downloader middlewares and ``request_reached_downloader``
    run before the request joins the slot's queue), and the cap must be taken exactly
    there. ``_wait_for_download`` is called synchronously by
    ``_process_queue`` and returns the task's coroutine; when upgrading Scrapy, check
    that it still does, or drop this class once Scrapy enforces the cap itself
    (``test_the_per_host_cap_holds_without_a_download_delay`` measures it)."""

    def _wait_for_download(self, slot: Slot, request: Request, queue_dfd: Deferred[Response]) -> Any:
        slot.transferring.add(request)
        return super()._wait_for_download(slot, request, queue_dfd)
