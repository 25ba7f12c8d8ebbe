"""Walking a resolver's sitemaps: an index's children one at a time, so that the walk
stops fetching as soon as --max-records is reached (a spider mixin of ``pith``).

In a scheduled re-crawl the listing's dates decide what is asked (crawler.scheduling.freshness):
an index's child whose date did not move since a committed crawl read it is not read, a
held record dated unchanged is not asked, the crawl's recheck sample is asked with the
first sitemap, and when the dates are found lying every sitemap is read again.

A sitemap may be gzipped (``.xml.gz``, or any body that starts with gzip's magic number):
it is decompressed up to the protocol's 50 MB; one cut short, corrupt or larger is named
in a warning, counted (``pith/sitemaps_unreadable``) and its records are not read."""

import logging
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from urllib.parse import urlsplit

import scrapy
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.python.failure import Failure

from ..failures import describe, failed_request
from ..links import ResolverUrls, sitemap_entries, suffixes_in
from ..meta_keys import Meta
from ..scheduling.claims import RecordScheduler
from ..seeds import SeedList
from ..stat_keys import Stat, StatFamily
from .change_lists import ChangeListWalk
from .listing_walk import listing_walk

logger = logging.getLogger(__name__)

PRIORITY = 5  # after every record already found
SITEMAP_SUFFIXES = (".xml", ".xml.gz")  # an index's entry naming a sitemap, not a record
GZIP_MAGIC = b"\x1f\x8b"
MAX_SITEMAP_BYTES = 50 * 1024 * 1024  # decompressed, as the sitemap protocol bounds a sitemap


class UnreadableSitemap(ValueError):
    """A gzipped sitemap that cannot be read whole within the cap."""


def sitemap_body(body: bytes, cap: int = MAX_SITEMAP_BYTES) -> bytes:
    """A sitemap's XML: the body, or it decompressed when gzipped, never past ``cap``
    bytes held (a small file may inflate to gigabytes)."""
    if not body.startswith(GZIP_MAGIC):
        return body
    inflater = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
    try:
        xml = inflater.decompress(body, cap + 1)
    except zlib.error as exc:
        raise UnreadableSitemap(f"not gzip ({exc})") from None
    if len(xml) > cap:
        raise UnreadableSitemap(f"larger than {cap // (1024 * 1024)} MB decompressed")
    if not inflater.eof:
        raise UnreadableSitemap("gzip cut short")
    return xml


class SitemapWalk(ChangeListWalk):
    """A mixin of the spider: what it needs of it is declared here."""

    crawler: Crawler
    resolver: ResolverUrls
    seeds: SeedList
    state: dict  # kept across a --jobdir resume (Scrapy's SpiderState): the crawl's ListingWalk
    record_requests: Callable[..., Iterator[scrapy.Request]]
    _stat: Callable[..., None]

    def sitemap_request(self, url: str, seed: bool = True) -> scrapy.Request:
        """A seed sitemap (a task of a shared frontier), or one a sitemap index listed: the
        worker that read the index walks those itself, one by one (``next_sitemap``). A
        seed in a re-crawl of one machine starts from the resolver's Change Lists."""
        if seed and self.may_read_change_lists():
            return self.listing_request(url)
        return self.plain_sitemap_request(url, seed)

    def plain_sitemap_request(self, url: str, seed: bool = True) -> scrapy.Request:
        return scrapy.Request(
            url,
            callback=self.parse_sitemap,
            errback=self.sitemap_failed,
            priority=PRIORITY,
            dont_filter=not seed,
            meta={Meta.TASK: f"sitemap:{url}"} if seed else {},
        )

    async def parse_sitemap(self, response: Response) -> AsyncIterator[scrapy.Request]:
        freshness = self.freshness
        if freshness is not None:
            await maybe_deferred_to_future(freshness.ready)  # the archive's held versions read
        walk = listing_walk(self.state)
        walk.sitemaps_read.add(response.url)
        try:
            body = sitemap_body(response.body)
        except UnreadableSitemap as exc:
            logger.warning("sitemap %s not read: %s", response.url, exc)
            self._stat(StatFamily.DISCOVERY_FAILURES + "sitemap_unreadable")
            body = b""
        records, listed = [], walk.sitemaps_listed
        for location, lastmod in sitemap_entries(body):
            path = urlsplit(location).path
            if path.endswith(SITEMAP_SUFFIXES):  # a sitemap index: walk the child on the resolver in use
                child = self.resolver.base + path
                if child not in listed:  # an index listing itself, or a child twice, is walked once
                    listed.add(child)
                    if freshness is not None and not freshness.reads_sitemap(child, lastmod):
                        self._stat(Stat.SITEMAPS_UNCHANGED)
                        continue
                    walk.sitemap_walk.append(child)
            else:
                records += [s for s in suffixes_in(path.encode()) if freshness is None or freshness.wants(s, lastmod)]
        if freshness is not None and not walk.sample_asked:
            walk.sample_asked = True  # once a crawl, a resumed one too
            records += freshness.sample()
        for request in self.record_requests(records, 0):
            yield request
        for request in self.next_sitemap():
            yield request

    def not_left_to_sitemaps(self, suffixes: list[str]) -> list[str]:
        """Of the records a bundle links to, those to ask now: in a re-crawl walking the
        sitemaps, a held record is asked when its sitemap dates it changed."""
        freshness = self.freshness if self.seeds.any_sitemap else None
        return suffixes if freshness is None else [s for s in suffixes if not freshness.held(s)]

    def reread_sitemaps(self, base: str) -> None:
        """The dates were found lying: read every sitemap again (its records not asked
        yet are asked now; those asked already are claimed, not asked twice)."""
        walk = listing_walk(self.state)
        read = walk.sitemaps_read | walk.sitemaps_listed
        if not read and walk.sitemap_seed is not None:  # the Change Lists were read instead
            read = {walk.sitemap_seed}
        pending = set(walk.sitemap_walk)
        for url in sorted(read - pending):
            self.crawler.engine.crawl(self.plain_sitemap_request(url, seed=False))

    def _records_full(self) -> bool:
        """--max-records reached, as the crawl's scheduler (local or shared) counts it."""
        scheduler = self.crawler.engine.scheduler if self.crawler.engine is not None else None
        return isinstance(scheduler, RecordScheduler) and scheduler.records_full()

    def next_sitemap(self) -> Iterator[scrapy.Request]:
        """The next sitemap of the walk, requested once the one before it is read: the
        walk stops as soon as --max-records is reached instead of fetching every page."""
        pending = listing_walk(self.state).sitemap_walk
        if pending and self._records_full():
            self._stat(Stat.SITEMAPS_SKIPPED_MAX_RECORDS, len(pending))
            pending.clear()
        if pending:
            yield self.plain_sitemap_request(pending.popleft(), seed=False)

    def sitemap_failed(self, failure: Failure) -> Iterator[scrapy.Request]:
        self._stat(StatFamily.DISCOVERY_FAILURES + "sitemap")
        logger.warning("sitemap %s failed: %s", failed_request(failure).url, describe(failure))
        yield from self.next_sitemap()
