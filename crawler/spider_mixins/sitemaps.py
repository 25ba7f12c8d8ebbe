"""Walking a resolver's sitemaps: an index's children one at a time, so that the walk
stops fetching as soon as --max-records is reached (a spider mixin of ``pith``)."""

import logging
from collections import deque
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import scrapy
from scrapy.crawler import Crawler
from scrapy.http import Response
from twisted.python.failure import Failure

from ..failures import describe, failed_request
from ..links import ResolverUrls, sitemap_locations, suffixes_in
from ..meta_keys import Meta
from ..scheduling.claims import RecordScheduler
from ..stat_keys import Stat, StatFamily

logger = logging.getLogger(__name__)

PRIORITY = 5  # after every record already found


class SitemapWalk:
    """A mixin of the spider: what it needs of it is declared here."""

    crawler: Crawler
    resolver: ResolverUrls
    state: dict  # kept across a --jobdir resume (Scrapy's SpiderState)
    record_requests: Callable[..., Iterator[scrapy.Request]]
    _stat: Callable[..., None]

    def sitemap_request(self, url: str, seed: bool = True) -> scrapy.Request:
        """A seed sitemap (a task of a shared frontier), or one a sitemap index listed: the
        worker that read the index walks those itself, one by one (``next_sitemap``)."""
        return scrapy.Request(
            url,
            callback=self.parse_sitemap,
            errback=self.sitemap_failed,
            priority=PRIORITY,
            dont_filter=not seed,
            meta={Meta.TASK: f"sitemap:{url}"} if seed else {},
        )

    def parse_sitemap(self, response: Response) -> Iterator[scrapy.Request]:
        records, listed = [], self.state.setdefault("sitemaps_listed", set())
        for location in sitemap_locations(response.body):
            path = urlsplit(location).path
            if path.endswith(".xml"):  # a sitemap index: walk the child on the resolver in use
                child = self.resolver.base + path
                if child not in listed:  # an index listing itself, or a child twice, is walked once
                    listed.add(child)
                    self.sitemap_walk.append(child)
            else:
                records += suffixes_in(path.encode())
        yield from self.record_requests(records, 0)
        yield from self.next_sitemap()

    @property
    def sitemap_walk(self) -> deque:
        """The sitemaps that indexes listed, not yet requested (survives --jobdir resumes)."""
        return self.state.setdefault("sitemap_walk", deque())

    def _records_full(self) -> bool:
        """--max-records reached, as the crawl's scheduler (local or shared) counts it."""
        scheduler = self.crawler.engine.scheduler if self.crawler.engine is not None else None
        return isinstance(scheduler, RecordScheduler) and scheduler.records_full()

    def next_sitemap(self) -> Iterator[scrapy.Request]:
        """The next sitemap of the walk, requested once the one before it is read: the
        walk stops as soon as --max-records is reached instead of fetching every page."""
        if self.sitemap_walk and self._records_full():
            self._stat(Stat.SITEMAPS_SKIPPED_MAX_RECORDS, len(self.sitemap_walk))
            self.sitemap_walk.clear()
        if self.sitemap_walk:
            yield self.sitemap_request(self.sitemap_walk.popleft(), seed=False)

    def sitemap_failed(self, failure: Failure) -> Iterator[scrapy.Request]:
        self._stat(StatFamily.DISCOVERY_FAILURES + "sitemap")
        logger.warning("sitemap %s failed: %s", failed_request(failure).url, describe(failure))
        yield from self.next_sitemap()
