"""Scrapy's downloader with its per-slot concurrency cap enforced.

Under the asyncio reactor, Scrapy 2.19's ``Downloader._process_queue`` starts each
download as a task and the task marks its request as transferring only once it runs;
meanwhile the loop sees every transfer slot free and starts everything queued for the
host. ``CONCURRENT_REQUESTS_PER_DOMAIN`` (and ``DOWNLOAD_SLOTS`` concurrency) then
caps nothing when there is no download delay. Taking the slot when the download is
handed over keeps the cap; the task's own bookkeeping then releases it as before.
"""

from scrapy.core.downloader import Downloader


class CappedDownloader(Downloader):
    def _wait_for_download(self, slot, request, queue_dfd):
        slot.transferring.add(request)
        return super()._wait_for_download(slot, request, queue_dfd)
