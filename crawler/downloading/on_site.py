"""Requests kept on the hosts (and ports) the crawl was given, whatever their meta says."""

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.offsite import OffsiteMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.httpobj import urlparse_cached

from ..crawl_config import is_pith_crawl
from ..links import port_of


class OnSiteMiddleware(OffsiteMiddleware):
    """Scrapy's offsite filter without its passes for ``dont_filter`` requests and for
    ``meta["allow_offsite"]``.

    The spider sets dont_filter on record requests (records are deduplicated by
    suffix) and a redirect inherits it, so under Scrapy's rule a resolver could send
    the crawl to any host it names: a cloud metadata address, a service on the
    crawler's own network, whose answer would then be stored in quarantine. Only the
    hosts of the crawl (``allowed_domains``) are fetched, whatever a request's meta
    says: the spider never needs another, and meta is the one part of a request an
    outsider could hope to shape. Requests are filtered as they are downloaded, not as
    they are scheduled, so that a redirect dropped here reaches its errback and is
    recorded as the record's failure instead of vanishing."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> OffsiteMiddleware:  # type: ignore[override]  # Scrapy's own for another spider
        """Another spider gets Scrapy's offsite filter, which this project's settings turn off."""
        return super().from_crawler(crawler) if is_pith_crawl(crawler) else OffsiteMiddleware.from_crawler(crawler)

    def request_scheduled(self, request: Request, spider: Spider | None = None) -> None:
        return None

    def should_follow(self, request: Request, spider: Spider) -> bool:
        """On a crawl host, and on its port (Scrapy compares host names only)."""
        if not super().should_follow(request, spider):
            return False
        allows_port = getattr(spider, "allows_port", None)
        parts = urlparse_cached(request)
        return allows_port is None or allows_port(parts.hostname, port_of(parts))

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        spider = self.crawler.spider
        if spider is not None and not self.should_follow(request, spider):
            self.stats.inc_value("offsite/filtered")
            raise IgnoreRequest(f"Filtered offsite request to {urlparse_cached(request).netloc!r}")
