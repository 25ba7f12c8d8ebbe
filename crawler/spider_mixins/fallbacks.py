"""A record whose copy was bad or whose fetch failed: its request again from a source not
tried yet, or, when none is left, the record failed (a spider mixin of ``pith``)."""

import logging
from collections.abc import Callable, Iterator
from typing import Any

import scrapy
from scrapy.exceptions import DownloadCancelledError
from scrapy.settings import BaseSettings
from twisted.python.failure import Failure

from pith.reasons import Reason
from pith.signing import utc_now

from ..downloading.spread import SourcePool
from ..failures import describe, failed_request, forbidden_by_robots
from ..items import BundleItem, FetchFailureItem
from ..links import ResolverUrls
from ..meta_keys import Meta
from ..stat_keys import Stat, StatFamily

logger = logging.getLogger(__name__)


class BundleFallbacks:
    """A mixin of the spider: what it needs of it is declared here."""

    settings: BaseSettings
    resolver: ResolverUrls
    pool: SourcePool
    aliases: dict[str, str]  # suffix -> the alias seed the resolver resolved to it
    bundle_request: Callable[..., scrapy.Request]
    page_wanted: Callable[..., bool]
    page_request: Callable[..., scrapy.Request]
    settled: Callable[..., None]
    _stat: Callable[..., None]

    def copy_refused(self, meta: dict, reason: str) -> scrapy.Request | None:
        """A rejected copy: counted against its source; when a mirror served it (or
        any source served another record), the record's request again from a source
        not tried yet (None when there is none)."""
        base = meta[Meta.TRIED][-1]
        wrong = reason == Reason.WRONG_RECORD
        self.pool.judged(base, Reason.WRONG_RECORD if wrong else "rejected")
        if base == self.resolver.base and not wrong:
            return None
        other = self.pool.pick(meta[Meta.TRIED])
        if other is None:
            return None
        self._stat(Stat.MIRROR_REFETCHES)
        logger.info("%s served a rejected copy (%s); fetching %s from %s", base, reason, meta[Meta.SUFFIX], other)
        return self.bundle_request(other, meta[Meta.SUFFIX], meta[Meta.DEPTH], meta[Meta.TRIED])

    def bad_copy(self, meta: dict, item: BundleItem, retry: scrapy.Request | None) -> Iterator[Any]:
        """A copy refused (``copy_refused``) or of another record: kept as evidence, not
        as the record's answer; the record is had from another source (``retry``), or failed."""
        item.answers = False
        yield item
        if retry is not None:
            yield retry
        else:
            yield from self.record_failed(meta, item.url, Reason.WRONG_RECORD, item.verdict.detail)

    def bundle_failed(self, failure: Failure) -> Iterator[Any]:
        request = failed_request(failure)
        meta = request.meta
        self.pool.done(meta[Meta.TRIED][-1])
        forbidden = forbidden_by_robots(failure)  # a policy of that source, not a bad copy
        if not forbidden:
            self.pool.judged(meta[Meta.TRIED][-1], "failed")  # a timeout or refused connection counts as a bad copy
        other = self.pool.pick(meta[Meta.TRIED])
        if forbidden and other is None:  # every source tried forbids it
            self._stat(Stat.ROBOTS_FORBIDDEN)
            self.settled(meta[Meta.SUFFIX], "forbidden")
            return
        if other is not None:
            self._stat(Stat.MIRROR_FALLBACKS)
            logger.info("bundle %s failed (%s); trying %s", request.url, describe(failure), other)
            yield self.bundle_request(other, meta[Meta.SUFFIX], meta[Meta.DEPTH], meta[Meta.TRIED])
            return
        # Scrapy cancels a download that passes DOWNLOAD_MAXSIZE, and ignores one that inflates past it
        too_large = failure.check(DownloadCancelledError) or "DOWNLOAD_MAXSIZE" in str(failure.value)
        reason = Reason.TOO_LARGE if too_large else Reason.FETCH_FAILED
        limit = self.settings.getint("DOWNLOAD_MAXSIZE")
        detail = f"body larger than the {limit}-byte limit" if too_large else describe(failure)
        yield from self.record_failed(meta, request.url, reason, detail)

    def record_failed(self, meta: dict, url: str, reason: Reason, detail: str) -> Iterator[Any]:
        """No source gave the record: its failure, and its page when that may name more records."""
        self.aliases.pop(meta[Meta.SUFFIX], None)
        self._stat(StatFamily.BUNDLE_FAILURES + reason)
        yield FetchFailureItem(
            url=url, fetched_at=utc_now(), suffix=meta.get(Meta.SUFFIX), reason=reason, detail=detail
        )
        if self.page_wanted(meta[Meta.DEPTH]):  # the records beyond it are still reachable
            yield self.page_request(meta[Meta.SUFFIX], meta[Meta.DEPTH], meta[Meta.TASK], bundle_failed=True)
