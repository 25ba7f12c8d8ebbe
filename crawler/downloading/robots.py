"""robots.txt per source: asked for as the source joins the crawl, and answered within
a deadline.

Scrapy's RobotsTxtMiddleware fetches a host's robots.txt when the first request to it
comes and holds every request to the host until it answers; that fetch is retried like
any request, each attempt allowed DOWNLOAD_TIMEOUT. A mirror trickling its robots.txt
held the bundle requests sent to it, and so the crawl, for five timeouts (150 s). Here
each source's robots.txt is asked for when the source joins the crawl, the spread sends
no bundle request to a source whose robots.txt has not answered while another source
can take it (``crawler.downloading.spread``), and all the attempts of a robots.txt request together
get PITH_ROBOTSTXT_DEADLINE seconds. One not answered by then forbids nothing, as in
Scrapy when it fails, and counts against its source as a bad copy.
"""

import time
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred

from .. import signals as pith_signals
from ..crawl_config import is_pith_crawl
from ..meta_keys import Meta


def robots_url(base: str) -> str:
    parts = urlsplit(base)
    return f"{parts.scheme}://{parts.netloc}/robots.txt"


class SourceRobots(RobotsTxtMiddleware):
    """Scrapy's robots.txt middleware, asking each source's robots.txt up front and
    holding its fetch to a deadline."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RobotsTxtMiddleware:  # type: ignore[override]  # Scrapy's own for another spider
        """Another spider gets Scrapy's middleware, which this project's settings replace."""
        return cls(crawler) if is_pith_crawl(crawler) else RobotsTxtMiddleware(crawler)

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)  # NotConfigured unless ROBOTSTXT_OBEY
        self.deadline = crawler.settings.getfloat("PITH_ROBOTSTXT_DEADLINE")
        self.download_timeout = crawler.settings.getfloat("DOWNLOAD_TIMEOUT")
        self.asking: set[Deferred[Any]] = set()
        crawler.signals.connect(self.source_added, signal=pith_signals.source_added)

    def source_added(self, base: str) -> None:
        """Ask for ``base``'s robots.txt now; the spread passes it over until it answers."""
        self.crawler.signals.send_catch_log(pith_signals.robots_awaited, base=base)
        asking = deferred_from_coro(self._ask(base))
        self.asking.add(asking)
        asking.addBoth(lambda _: self.asking.discard(asking))

    async def _ask(self, base: str) -> None:
        parser = await self.robot_parser(Request(robots_url(base), callback=NO_CALLBACK))
        self.crawler.signals.send_catch_log(pith_signals.robots_answered, base=base, fetched=parser is not None)

    async def process_request(self, request: Request, spider: Spider | None = None) -> None:
        if request.meta.get("dont_obey_robotstxt") and urlparse_cached(request).path == "/robots.txt":
            self._hold_to_deadline(request)
        await super().process_request(request)

    def _hold_to_deadline(self, request: Request) -> None:
        """Each attempt of a robots.txt request gets what is left of the deadline its
        first attempt set, never more than DOWNLOAD_TIMEOUT."""
        deadline = request.meta.setdefault(Meta.DEADLINE, time.monotonic() + self.deadline)
        left = deadline - time.monotonic()
        if left <= 0:
            raise IgnoreRequest(f"robots.txt not answered within {self.deadline:g} s")
        request.meta["download_timeout"] = min(left, self.download_timeout)
