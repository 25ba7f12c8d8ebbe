"""Record pages and alias seeds: a record's page names the records citing it, which its
bundle may not (fetched only when following links with no sitemap seed, and when the
bundle does not name every citer); an alias seed (a DOI, say) is resolved by the
resolver's redirect to a record page (a spider mixin of ``pith``)."""

import logging
from collections.abc import Callable, Iterator

import scrapy
from scrapy.http import Response
from twisted.python.failure import Failure

from pith.numbers import SUFFIX_RE

from ..crawl_config import CrawlConfig
from ..failures import describe, failed_request
from ..links import ResolverUrls, suffixes_in
from ..meta_keys import Meta
from ..seeds import alias_path
from ..stat_keys import Stat

logger = logging.getLogger(__name__)

PRIORITY = 10  # after a record's bundle (20): a record is finished before new ones are opened


class RecordPages:
    """A mixin of the spider: what it needs of it is declared here."""

    config: CrawlConfig
    resolver: ResolverUrls
    pages: bool  # record pages may name more records: following links, with no sitemap seed
    aliases: dict[str, str]  # suffix -> the alias seed the resolver resolved to it
    record_requests: Callable[..., Iterator[scrapy.Request]]
    records_in: Callable[..., Iterator[scrapy.Request]]
    learn_redirect: Callable[[Response, str], None]
    _stat: Callable[..., None]

    def alias_request(self, alias: str, depth: int) -> scrapy.Request:
        return scrapy.Request(
            self.resolver.base + alias_path(alias),
            callback=self.parse_page,
            priority=PRIORITY,
            errback=self.alias_failed,
            meta={Meta.DEPTH: depth, Meta.ALIAS: alias, Meta.TASK: f"alias:{alias}"},
        )

    def page_wanted(self, depth: int, names_every_citer: bool = False) -> bool:
        """Whether a record's page could name records its bundle does not (the bundle
        ``names_every_citer`` when it was read and its citations are complete)."""
        return self.pages and (self.config.max_depth < 0 or depth < self.config.max_depth) and not names_every_citer

    def page_request(self, suffix: str, depth: int, task: str, bundle_failed: bool = False) -> scrapy.Request:
        """``bundle_failed``: the record's bundle failed already, and the record is
        counted once against --max-failures, not again when its page fails too."""
        return scrapy.Request(
            self.resolver.url("record_url", suffix),
            callback=self.parse_page,
            priority=PRIORITY,
            errback=self.page_failed,
            dont_filter=True,
            meta={
                Meta.DEPTH: depth,
                Meta.TASK: task,
                Meta.TEMPLATE: "record_url",
                Meta.BUNDLE_FAILED: bundle_failed,
            },
        )

    def parse_page(self, response: Response) -> Iterator[scrapy.Request]:
        depth = response.meta.get(Meta.DEPTH, 0)
        suffix = next((s for s in suffixes_in(response.url.encode()) if SUFFIX_RE.match(s)), None)
        if Meta.ALIAS in response.meta:
            # an alias seed: the redirect landed on the record page
            if suffix is None:
                found = suffixes_in(response.body)
                suffix = found[0] if len(found) == 1 else None
            if suffix is None:
                self._stat(Stat.SEEDS_UNRESOLVED)
                logger.warning("alias %s did not lead to a record page", response.meta[Meta.ALIAS])
                return
            self.aliases[suffix] = response.meta[Meta.ALIAS]  # its bundle must carry it
            yield from self.record_requests([suffix], depth)
        else:
            self._stat(Stat.PAGES_FETCHED)
            if suffix is not None:
                self.learn_redirect(response, suffix)
        yield from self.records_in(response.body, depth + 1, suffix)

    def page_failed(self, failure: Failure) -> None:
        self._stat(
            Stat.PAGE_FAILURES_AFTER_BUNDLE
            if failed_request(failure).meta.get(Meta.BUNDLE_FAILED)
            else Stat.PAGE_FAILURES
        )
        logger.info("record page %s failed: %s", failed_request(failure).url, describe(failure))

    def alias_failed(self, failure: Failure) -> None:
        self._stat(Stat.SEEDS_UNRESOLVED)
        logger.warning(
            "alias %s could not be resolved: %s", failed_request(failure).meta.get(Meta.ALIAS), describe(failure)
        )
