"""Every HTTP exchange of the crawl, handed to the crawl's WARC writer as received.

A downloader middleware placed next to the download handler (priority 950): its
``process_response`` sees each response before any other middleware, so before
HttpCompressionMiddleware decodes the body, before redirects are followed and
before retries; what is recorded is the status, headers and body the server sent
(a gzipped body stays gzipped, with its Content-Encoding). Its ``process_request``
runs last on the way out, so the request record has the headers Scrapy sends.

The WARC writer (``storage.capture.warc_process.WarcProcess``) belongs to the crawl's archive
(the ``CrawlArchive`` extension: its files go into the archive's runs); each exchange
goes to it as an ``Exchange`` (``storage.capture.exchanges``). Its queue full, the response waits
until there is room (the reactor goes on), so a writer slower than the crawl slows the
crawl rather than losing records, and a stuck one is stopped by its watch. A request
that got no response (a refused connection, a timeout, a body cut short: Scrapy drops
a partial body) leaves a ``metadata`` record naming the error instead (a
``FetchFailure``), since there is no response to keep.
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

from storage.capture.exchanges import Exchange, FetchFailure
from storage.capture.warc_process import WarcProcess

from ..crawl_config import crawl_config
from ..extensions.crawl_archive import CrawlArchive
from ..stat_keys import Stat

logger = logging.getLogger(__name__)


def _headers(headers: Headers) -> list[tuple[str, str]]:
    """Scrapy's headers as (name, value) text pairs, each value of a repeated header its own pair.
    Read as the dict they are (normalised names, a list of bytes each), not through
    ``Headers.items``, which normalises every name again: 13 lookups an exchange."""
    return [
        (name.decode("latin-1"), value.decode("latin-1")) for name, values in dict.items(headers) for value in values
    ]


class WarcRecorder:
    """On with the crawl's WARC policy (PITH_WARC, ``--no-warc``) and its archive."""

    def __init__(self, crawler: Crawler, archive: CrawlArchive) -> None:
        self.crawler = crawler
        self.archive = archive

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> "WarcRecorder":
        archive = crawler.get_extension(CrawlArchive)
        if archive is None or crawl_config(crawler).warc is None:
            raise NotConfigured("PITH_WARC is off")
        return cls(crawler, archive)

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response | Coroutine[Any, Any, Response]:
        room = self._write(Stat.WARC_RESPONSES, scrapy_exchange, request, response)
        return response if room is None else _once(room, response)

    def process_exception(self, request: Request, exception: Exception, spider: Spider | None = None) -> None:
        """No response (refused, timed out, a body cut short): a ``metadata`` record says
        what happened. A request a middleware dropped (robots.txt, off the crawl's
        hosts) was never sent: nothing happened on the wire to keep."""
        if not isinstance(exception, IgnoreRequest):
            self._write(Stat.WARC_FAILURES, failure_of, request, exception)

    def _write(
        self, stat: str, record_of: Callable[[Request, Any], Exchange | FetchFailure], request: Request, outcome: Any
    ) -> Deferred | None:
        """None, or a Deferred that fires once the writer's queue has room again."""
        warc = self.archive.warc
        if warc is None:  # before the archive opened (robots.txt, the signing key)
            self._count(Stat.WARC_UNRECORDED)
            return None
        try:
            record = record_of(request, outcome)
            if isinstance(record, FetchFailure):
                warc.failure(record)
                room = True
            else:
                room = warc.record(record)
        except Exception:  # the crawl goes on without the record; the count says so
            logger.exception("%s: not recorded in the WARC", request.url)
            self._count(Stat.WARC_ERRORS)
            return None
        self._count(stat)
        return None if room else _room(warc)

    def _count(self, stat: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(stat)


def _room(warc: WarcProcess) -> Deferred:
    """Fires in the reactor's thread once ``warc``'s queue has room."""
    from twisted.internet import reactor

    room: Deferred = Deferred()
    warc.when_room(lambda: reactor.callFromThread(room.callback, None))
    return room


async def _once(room: Deferred, response: Response) -> Response:
    """``response``, once the WARC writer has room for more."""
    await maybe_deferred_to_future(room)
    return response


def failure_of(request: Request, exception: Exception) -> FetchFailure:
    """A request that got no response."""
    return FetchFailure(
        url=request.url,
        method=request.method,
        error=f"{type(exception).__name__}: {exception}"[:2000],
        fetched_at=datetime.now(timezone.utc),
    )


def scrapy_exchange(request: Request, response: Response) -> Exchange:
    """The exchange as Scrapy saw it, for the WARC writer."""
    request_headers = _headers(request.headers)
    if not any(name.lower() == "host" for name, _ in request_headers):
        request_headers.insert(0, ("Host", urlparse_cached(request).netloc))  # the HTTP client adds it
    return Exchange(
        url=response.url,
        method=request.method,
        request_headers=request_headers,
        request_body=request.body or b"",
        status=response.status,
        protocol=response.protocol or "HTTP/1.1",
        response_headers=_headers(response.headers),
        body=response.body,
        fetched_at=datetime.now(timezone.utc),
        ip_address=str(response.ip_address) if response.ip_address else None,
    )
