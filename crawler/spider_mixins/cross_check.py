"""Cross-checking (``--cross-check N``, PITH_CROSS_CHECK): the crawler's part.

The sample is the first N bundle requests this worker downloads, one per record (with
seeds named in order and no link following, the first N seeds): ``CrossCheckSample``
marks them (``meta[Meta.CROSS_CHECK]``) and makes them unconditional, so that a
re-crawl has a body to compare even when the record has not changed. When a marked
bundle arrives, the spider (through ``CrossCheck``) fetches the record again from
every other source of the crawl (its ``--mirror`` URLs and the mirrors its resolver's
mirror list names); the split-view pipeline (``pipelines.split_view``) compares the copies once
they are verified. Copies are fetched unconditionally and never followed: their links
were read from the first copy.
"""

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING

import scrapy
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from twisted.python.failure import Failure

from pith.reasons import Reason
from pith.signing import utc_now

from ..crawl_config import crawl_config
from ..downloading.spread import SourcePool
from ..failures import failed_request
from ..items import BundleItem
from ..links import ResolverUrls, base_of
from ..meta_keys import Meta
from ..stat_keys import Stat
from ..verifying.identity import bound
from ..verifying.verifier import Verifier

logger = logging.getLogger(__name__)

PRIORITY = 20  # a bundle's own


class CrossCheckSample:
    """Downloader middleware, before ConditionalRequestMiddleware: marks the first
    PITH_CROSS_CHECK bundle requests to the resolver (the spider sends the first that
    many there, not to the mirrors it spreads the others over; retries and redirects
    keep the mark and are not counted again; a mirror fallback is not marked). Stat: ``pith/cross_check/records``."""

    def __init__(self, size: int, crawler: Crawler) -> None:
        self.left = size
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> "CrossCheckSample":
        size = crawl_config(crawler).cross_check
        if size <= 0:
            raise NotConfigured("PITH_CROSS_CHECK is 0")
        return cls(size, crawler)

    def process_request(self, request: scrapy.Request, spider: scrapy.Spider | None = None) -> None:
        meta = request.meta
        if (
            self.left > 0
            and meta.get(Meta.TEMPLATE) == "bundle_url"
            and meta.get(Meta.TRIED) == [crawl_config(self.crawler).resolver]  # the resolver's: the first copy
            and Meta.CROSS_CHECK not in meta
        ):
            self.left -= 1
            meta[Meta.CROSS_CHECK] = True
            meta[Meta.CONDITIONAL] = False
            self.crawler.stats.inc_value(Stat.CROSS_CHECK_RECORDS)
        return None


class CrossCheck:
    """A mixin of the pith spider (what it needs of it is declared here). Stats: ``pith/cross_check/copies``,
    ``pith/cross_check/failures``, ``pith/cross_check/alone`` (sampled with no other source)."""

    crawler: Crawler
    resolver: ResolverUrls
    verifier: Verifier
    pool: SourcePool
    if TYPE_CHECKING:  # the spider's property

        @property
        def sources(self) -> list[str]: ...

    _stat: Callable[..., None]

    def cross_check_requests(self, response: Response, item: BundleItem) -> Iterator[scrapy.Request]:
        """For a sampled bundle: requests for the record's bundle from every other
        source; marks ``item`` (the first copy) as cross-checked."""
        if not response.meta.get(Meta.CROSS_CHECK):
            return
        item.cross_check = True
        served_by = base_of(response.url)
        others = [base for base in self.sources if base != served_by]
        if not others:
            self._stat(Stat.CROSS_CHECK_ALONE)
            if self.crawler.stats.get_value(Stat.CROSS_CHECK_ALONE) == 1:
                logger.warning("--cross-check: no source but %s to compare records with (give --mirror)", served_by)
        for base in others:
            yield scrapy.Request(
                ResolverUrls(base, self.resolver.templates).url("bundle_url", item.suffix or ""),
                callback=self.parse_copy,
                errback=self.copy_failed,
                priority=PRIORITY,
                dont_filter=True,
                meta={Meta.SUFFIX: item.suffix, Meta.DEPTH: item.depth},
            )

    async def parse_copy(self, response: Response) -> AsyncIterator[BundleItem]:
        meta = response.meta
        self._stat(Stat.CROSS_CHECK_COPIES)
        fetched_at = utc_now()
        checked = await self.verifier.verify(response.body)  # as the first copy was (crawler.verifying.verifier)
        verdict = bound(checked.verdict, meta[Meta.SUFFIX])  # another record's bundle is no copy of this one
        if not verdict.ok:
            self.pool.judged(response.url, verdict.reason if verdict.reason == Reason.WRONG_RECORD else "rejected")
        yield BundleItem(
            url=response.url,
            body=response.body,
            raw_sha256=checked.raw_sha256,
            fetched_at=fetched_at,
            suffix=meta[Meta.SUFFIX],
            depth=meta[Meta.DEPTH],
            cross_check=True,
            answers=False,  # the record's answer is its first copy
            verdict=verdict,
            key_ids=checked.key_ids,
            prepared=checked.prepared,
        )

    def copy_failed(self, failure: Failure) -> None:
        """A source that cannot serve the copy: the record itself was had, so this is
        counted (``pith/cross_check/failures``) and logged, not a failed record."""
        self._stat(Stat.CROSS_CHECK_FAILURES)
        logger.warning("--cross-check: %s failed: %s", failed_request(failure).url, failure.value)
