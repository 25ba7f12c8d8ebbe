"""Cross-checking (``--cross-check N``, PITH_CROSS_CHECK): the spider's part.

The first N records whose bundle a source serves in full in this run (the resolver,
or a mirror it fell back to) are the sample: each is fetched again from every other
source of the crawl (its ``--mirror`` URLs and the mirrors its manifest lists), so
that the split-view pipeline (``pipelines.split_view``) can compare the copies once
they are verified. The sample is the first N per worker, in the order the bundles
arrive: with seeds named in order and no link following, the first N seeds. A
record found unchanged (HTTP 304 to a conditional request) has no body to compare
and is not sampled. Copies are fetched unconditionally and never followed: their
links were read from the first copy.
"""

import logging

import scrapy

from pith.parse import parse
from pith.reasons import Rejected
from pith.signing import utc_now
from .items import BundleItem
from .links import Resolver, base_of

logger = logging.getLogger(__name__)

PRIORITY = 20  # a bundle's own


class CrossCheck:
    """A mixin for the pith spider, which provides ``crawler``, ``sources``,
    ``resolver``, ``limits`` and ``_stat``; it sets ``cross_check_left`` from PITH_CROSS_CHECK."""

    cross_check_left = 0

    def cross_check_requests(self, response, item: BundleItem):
        """Requests for the record's bundle from every other source, while the sample
        has room; marks ``item`` (the first copy) as cross-checked."""
        if self.cross_check_left <= 0:
            return
        self.cross_check_left -= 1
        item.cross_check = True
        self._stat("cross_check/records")
        served_by = base_of(response.url)
        others = [base for base in self.sources if base != served_by]
        if not others and self.crawler.stats.get_value("pith/cross_check/records") == 1:
            logger.warning("--cross-check: no source but %s to compare records with (give --mirror)", served_by)
        for base in others:
            yield scrapy.Request(
                Resolver(base, self.resolver.templates).url("bundle_url", item.suffix), callback=self.parse_copy,
                errback=self.copy_failed, priority=PRIORITY, dont_filter=True,
                meta={"pith_suffix": item.suffix, "pith_depth": item.depth})

    def parse_copy(self, response):
        meta = response.meta
        self._stat("cross_check/copies")
        item = BundleItem(url=response.url, body=response.body, fetched_at=utc_now(), suffix=meta["pith_suffix"],
                          depth=meta["pith_depth"], cross_check=True)
        try:
            item.document = parse(response.body, self.limits)
        except Rejected as rejected:
            item.parse_error = (rejected.reason, rejected.path, rejected.detail)
        yield item

    def copy_failed(self, failure):
        """A source that cannot serve the copy: the record itself was had, so this is
        counted (``pith/cross_check/failures``) and logged, not a failed record."""
        self._stat("cross_check/failures")
        logger.warning("--cross-check: %s failed: %s", failure.request.url, failure.value)
