"""Which source could not be reached, and why, where the summary reads it.

A crawl that fetched nothing must say in its last line which host failed and how
(a refused connection, a name that does not resolve, a timeout), not only in the log
file. Every download error that retries did not overcome is kept by source:
``pith/unreachable/<host:port>``, the cause last seen there.
"""

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.exceptions import DownloadCancelledError, IgnoreRequest
from scrapy.statscollectors import StatsCollector
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import CancelledError

from ..crawl_config import pith_crawl_only
from ..failures import cause
from ..stat_keys import StatFamily

# a policy (robots.txt, the crawl's hosts), a body past DOWNLOAD_MAXSIZE, a request the
# crawl dropped as it stopped: the source was reached, or never tried
NOT_UNREACHABLE = (IgnoreRequest, DownloadCancelledError, CancelledError)


class UnreachableSources:
    """Downloader middleware, just outside the retries: it sees the error they gave up on."""

    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> "UnreachableSources":
        pith_crawl_only(crawler)
        return cls(crawler.stats)

    def process_exception(self, request: Request, exception: Exception, spider: Spider | None = None) -> None:
        if not isinstance(exception, NOT_UNREACHABLE):
            self.stats.set_value(StatFamily.UNREACHABLE + urlparse_cached(request).netloc, cause(exception))
