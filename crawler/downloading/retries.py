"""Polite retries: Scrapy's, waiting before each one as the server asks, or backing off."""

import random
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.retry import RetryMiddleware, get_retry_request
from scrapy.http import Response
from scrapy.settings import BaseSettings
from scrapy.utils.asyncio import sleep

from ..crawl_config import is_pith_crawl
from ..meta_keys import time_left
from ..stat_keys import Stat


def retry_after_seconds(value: bytes | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    text = value.decode("latin-1").strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


class BackoffRetryMiddleware(RetryMiddleware):
    """Scrapy's retries, waiting before each one: the server's Retry-After on 429/503
    when it sends one (capped by PITH_RETRY_AFTER_MAX), else exponential backoff with
    jitter from PITH_RETRY_BACKOFF_BASE up to PITH_RETRY_BACKOFF_MAX seconds; a request
    with a deadline (robots.txt, ``crawler.downloading.robots``) waits until then at most."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RetryMiddleware:  # type: ignore[override]  # Scrapy's own for another spider
        """Another spider gets Scrapy's retries, which this project's settings turn off."""
        return super().from_crawler(crawler) if is_pith_crawl(crawler) else RetryMiddleware.from_crawler(crawler)

    def __init__(self, settings: BaseSettings) -> None:
        super().__init__(settings)
        self.backoff_base = settings.getfloat("PITH_RETRY_BACKOFF_BASE")
        self.backoff_max = settings.getfloat("PITH_RETRY_BACKOFF_MAX")
        self.retry_after_max = settings.getfloat("PITH_RETRY_AFTER_MAX")

    async def process_response(  # type: ignore[override]  # Scrapy awaits it
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Request | Response:
        if request.meta.get("dont_retry") or response.status not in self.retry_http_codes:
            return response
        retry = get_retry_request(request, spider=self.crawler.spider, reason=f"HTTP {response.status}")  # type: ignore[arg-type]  # the spider is open
        if retry is None:
            return response
        hinted = retry_after_seconds(response.headers.get(b"Retry-After")) if response.status in (429, 503) else None
        if hinted is not None:
            self.crawler.stats.inc_value(Stat.RETRY_AFTER_HONOURED)
            await self._wait(request, min(hinted, self.retry_after_max))
        else:
            await self._wait(request, self._backoff(request))
        return retry

    async def process_exception(  # type: ignore[override]  # Scrapy awaits it
        self, request: Request, exception: Exception, spider: Spider | None = None
    ) -> Request | Response | None:
        retry = super().process_exception(request, exception)
        if retry is not None:
            await self._wait(request, self._backoff(request))
        return retry

    def _backoff(self, request: Request) -> float:
        attempt = request.meta.get("retry_times", 0)
        return min(self.backoff_max, self.backoff_base * 2**attempt) * random.uniform(0.5, 1.0)  # noqa: S311 - jitter, not a secret

    @staticmethod
    async def _wait(request: Request, seconds: float) -> None:
        """Wait ``seconds``, but never past the request's deadline (``Meta.DEADLINE``)."""
        left = time_left(request)
        seconds = seconds if left is None else min(seconds, left)
        if seconds > 0:
            await sleep(seconds)
