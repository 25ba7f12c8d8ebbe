"""Every HTTP exchange of the crawl, handed to the archive's WARC writer as received.

A downloader middleware placed next to the download handler (priority 950): its
``process_response`` sees each response before any other middleware, so before
HttpCompressionMiddleware decodes the body, before redirects are followed and
before retries; what is recorded is the status, headers and body the server sent
(a gzipped body stays gzipped, with its Content-Encoding). Its ``process_request``
runs last on the way out, so the request record has the headers Scrapy sends.

The archive pipeline owns the writer (it belongs to the archive's runs) and
announces it with the ``warc_opened`` signal; the crawler layer knows it only as
a function taking plain fields (``exchange_of``, ``failure_of``) and returning None,
or a Deferred when the writer's queue is full: the response then waits for it (the
reactor goes on), so a writer slower than the crawl slows the crawl rather than
losing records, and a stuck one is stopped by its watch. A request that got
no response (a refused connection, a timeout, a body cut short: Scrapy drops a
partial body) leaves a ``metadata`` record naming the error instead, since there is
no response to keep.
"""

import logging
from collections.abc import Callable, Coroutine
from datetime import datetime, timezone
from typing import Any

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Headers, Response
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred

from . import signals as pith_signals
from .crawl_config import pith_crawl_only
from .stat_keys import Stat

logger = logging.getLogger(__name__)


def _headers(headers: Headers) -> list[tuple[str, str]]:
    """Scrapy's headers as (name, value) text pairs, each value of a repeated header its own pair."""
    return [(name.decode("latin-1"), value.decode("latin-1")) for name, values in headers.items() for value in values]


class WarcRecorder:
    """Settings: PITH_WARC (on by default; ``--no-warc``), PITH_ARCHIVE."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.record: Callable[[dict], Deferred | None] | None = None  # until the archive pipeline opens its writer
        crawler.signals.connect(self._opened, signal=pith_signals.warc_opened)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> "WarcRecorder":
        pith_crawl_only(crawler)
        settings = crawler.settings
        if not settings.getbool("PITH_WARC") or not settings.get("PITH_ARCHIVE"):
            raise NotConfigured("PITH_WARC is off")
        return cls(crawler)

    def _opened(self, record: Callable[[dict], Deferred | None]) -> None:
        self.record = record

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response | Coroutine[Any, Any, Response]:
        room = self._write(Stat.WARC_RESPONSES, exchange_of, request, response)
        return response if room is None else _once(room, response)

    def process_exception(self, request: Request, exception: Exception, spider: Spider | None = None) -> None:
        """No response (refused, timed out, a body cut short): a ``metadata`` record says
        what happened. A request a middleware dropped (robots.txt, off the crawl's
        hosts) was never sent: nothing happened on the wire to keep."""
        if not isinstance(exception, IgnoreRequest):
            self._write(Stat.WARC_FAILURES, failure_of, request, exception)

    def _write(
        self, stat: str, fields_of: Callable[[Request, Any], dict], request: Request, outcome: Any
    ) -> Deferred | None:
        if self.record is None:  # before the archive opened (robots.txt, the signing key)
            self._count(Stat.WARC_UNRECORDED)
            return None
        try:
            room = self.record(fields_of(request, outcome))
        except Exception:  # the crawl goes on without the record; the count says so
            logger.exception("%s: not recorded in the WARC", request.url)
            self._count(Stat.WARC_ERRORS)
            return None
        self._count(stat)
        return room

    def _count(self, stat: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(stat)


async def _once(room: Deferred, response: Response) -> Response:
    """``response``, once the WARC writer has room for more."""
    await maybe_deferred_to_future(room)
    return response


def failure_of(request: Request, exception: Exception) -> dict:
    """A request that got no response, as plain values: ``storage.capture.warc.FetchFailure``'s fields."""
    return {
        "url": request.url,
        "method": request.method,
        "error": f"{type(exception).__name__}: {exception}"[:2000],
        "fetched_at": datetime.now(timezone.utc),
    }


def exchange_of(request: Request, response: Response) -> dict:
    """The exchange as plain values: the fields of ``storage.capture.warc.Exchange``."""
    request_headers = _headers(request.headers)
    if not any(name.lower() == "host" for name, _ in request_headers):
        request_headers.insert(0, ("Host", urlparse_cached(request).netloc))  # the HTTP client adds it
    return {
        "url": response.url,
        "method": request.method,
        "request_headers": request_headers,
        "request_body": request.body or b"",
        "status": response.status,
        "protocol": response.protocol or "HTTP/1.1",
        "response_headers": _headers(response.headers),
        "body": response.body,
        "fetched_at": datetime.now(timezone.utc),
        "ip_address": str(response.ip_address) if response.ip_address else None,
    }
