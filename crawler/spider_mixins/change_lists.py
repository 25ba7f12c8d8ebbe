"""Reading a resolver's ResourceSync Change Lists instead of its sitemaps, in a re-crawl
(a spider mixin of ``pith``, under ``SitemapWalk``).

A resolver that publishes ResourceSync (ANSI/NISO Z39.99) names its Capability List in a
Source Description at ``/.well-known/resourcesync``, and the Capability List names a
Change List (or a Change List Index of them): every record that changed, with when. A
re-crawl into an archive that holds records reads those instead of the sitemaps, and asks
only the records changed after the moment their listing gave when the held version was
last confirmed (``Freshness.wants_change``; the resolver's clock, both), plus the crawl's
sample of held records. A held record the sample finds changed that no Change List
named means the lists lie: the dates are distrusted, the sitemaps read and every record
asked. A resolver with no ResourceSync is walked through its sitemaps as before; so is
one whose documents cannot be read (a warning says why), and so is a first crawl.

The pages of an index that ended before the newest change a finished crawl read
(``Freshness.read_to``, kept in the state folder only when that crawl committed with every
record it asked settled) are not read again. Change List entries are record requests
like any other: claimed, verified, bound to the record asked for, paced.
"""

import logging
import re
from collections.abc import AsyncIterator, Callable, Iterator
from urllib.parse import urlsplit

import scrapy
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.python.failure import Failure

from ..failures import describe, failed_request
from ..links import SITEMAP_ENTRY, ResolverUrls, suffixes_in
from ..scheduling.freshness import Freshness
from ..scheduling.listed_time import DAY
from ..stat_keys import Stat
from .listing_walk import ChangeLists, listing_walk

logger = logging.getLogger(__name__)

WELL_KNOWN = "/.well-known/resourcesync"
PRIORITY = 6  # before the sitemaps they stand in for
FALLBACK = "pith_sitemap"  # meta: the sitemap read when the Change Lists cannot be
IN_INDEX = "pith_change_page"  # meta: a page an index named (never an index itself)
MAX_BYTES = 32 * 1024 * 1024  # a ResourceSync document (a page of 50,000 changes is ~10 MB)
MAX_PAGES = 1_000  # Change Lists an index may have a run read (a hostile index names millions)
MARGIN = DAY  # a page that ended within a day before the newest change read is read again
# a <url> or <sitemap> entry (crawler.links) and the <rs:md .../> that follows it
ENTRY = re.compile(SITEMAP_ENTRY.pattern + rb"\s*(?:<rs:md\b([^>]{0,512})/?>)?")
ATTRIBUTE = re.compile(rb"(\w+)=[\"']([^\"'<>]{0,64})[\"']")
DECLARED = re.compile(rb"<rs:md\b[^>]{0,512}?\bcapability=[\"'](\w+)[\"']")


def entries(body: bytes) -> Iterator[tuple[str, str | None, dict[str, str]]]:
    """Each entry's location, ``<lastmod>`` and ``rs:md`` attributes."""
    for match in ENTRY.finditer(body):
        loc, lastmod, md = match.groups()
        attributes = {k.decode("ascii"): v.decode("ascii", "replace") for k, v in ATTRIBUTE.findall(md or b"")}
        yield loc.decode("utf-8", "replace"), lastmod.decode("ascii", "replace") if lastmod else None, attributes


def declared(body: bytes) -> str | None:
    """The capability a whole ResourceSync document declares before its first entry
    (None: not one, or cut short)."""
    if not body.rstrip().endswith((b"</urlset>", b"</sitemapindex>")):
        return None
    head = body[: body.find(b"<loc>")] if b"<loc>" in body else body
    found = DECLARED.search(head[:65_536])
    return found.group(1).decode("ascii") if found else None


class ChangeListWalk:
    """A mixin of the spider: what it needs of it is declared here."""

    crawler: Crawler
    resolver: ResolverUrls
    state: dict
    record_requests: Callable[..., Iterator[scrapy.Request]]
    plain_sitemap_request: Callable[..., scrapy.Request]
    _stat: Callable[..., None]

    @property
    def freshness(self) -> Freshness | None:
        """The crawl's judge of what changed, when it has one (an archive, a state folder)."""
        return self.crawler.get_extension(Freshness) if self.crawler.extensions is not None else None

    def may_read_change_lists(self) -> bool:
        """Whether a sitemap seed starts from the Change Lists: a re-crawl of one machine
        (a first crawl, known to be one once the archive is open, reads the sitemaps)."""
        freshness = self.freshness
        if freshness is None or self.crawler.settings.get("PITH_FRONTIER"):
            return False
        return freshness.may_trust_listings()

    def listing_request(self, sitemap: str) -> scrapy.Request:
        """The request a sitemap seed starts with: the resolver's Source Description
        (its sitemap read instead when the Change Lists cannot be); once a crawl."""
        walk = listing_walk(self.state)
        if walk.sitemap_seed is not None:  # another sitemap seed, or a resumed crawl: read as it is
            return self.plain_sitemap_request(sitemap)
        walk.sitemap_seed = sitemap
        return self._document(self.resolver.base + WELL_KNOWN, self.parse_source_description, sitemap)

    def _document(self, url: str, callback: Callable, sitemap: str, in_index: bool = False) -> scrapy.Request:
        meta = {FALLBACK: sitemap, IN_INDEX: in_index, "dont_retry": True, "download_maxsize": MAX_BYTES}
        return scrapy.Request(
            url, callback=callback, errback=self.change_lists_unread, priority=PRIORITY, dont_filter=True, meta=meta
        )

    def _on_site(self, url: str) -> str | None:
        """A URL an entry names, on the resolver in use (None: another site's)."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or parts.netloc != urlsplit(self.resolver.base).netloc:
            return None
        return self.resolver.base + parts.path

    def _abandon(self, sitemap: str, why: str) -> Iterator[scrapy.Request]:
        """The Change Lists cannot be read: the sitemaps are, once."""
        walk = listing_walk(self.state)
        if walk.change_lists is ChangeLists.ABANDONED:
            return
        walk.change_lists = ChangeLists.ABANDONED
        logger.warning("ResourceSync Change Lists of %s not read (%s): reading the sitemaps", self.resolver.base, why)
        self._stat(Stat.CHANGE_LISTS_UNREAD)
        yield self.plain_sitemap_request(sitemap)

    def _follow(self, response: Response, capability: str, callback: Callable) -> Iterator[scrapy.Request]:
        """The document a Source Description or Capability List names for ``capability``."""
        sitemap = response.meta[FALLBACK]
        if declared(response.body) is None:
            yield from self._abandon(sitemap, f"{response.url} is not a ResourceSync document")
            return
        found = (loc for loc, _, md in entries(response.body) if md.get("capability") == capability)
        url = self._on_site(next(found, ""))
        if url is None:
            yield from self._abandon(sitemap, f"{response.url} names no {capability} on {self.resolver.base}")
            return
        yield self._document(url, callback, sitemap)

    async def parse_source_description(self, response: Response) -> AsyncIterator[scrapy.Request]:
        freshness = self.freshness
        if freshness is not None:
            await maybe_deferred_to_future(freshness.ready)
        if freshness is None or not freshness.may_trust_listings():
            yield self.plain_sitemap_request(response.meta[FALLBACK])  # a first crawl, or dates not trusted
            return
        listing_walk(self.state).change_lists = ChangeLists.READING
        for request in self._follow(response, "capabilitylist", self.parse_capability_list):
            yield request

    def parse_capability_list(self, response: Response) -> Iterator[scrapy.Request]:
        yield from self._follow(response, "changelist", self.parse_change_list)

    def parse_change_list(self, response: Response) -> Iterator[scrapy.Request]:
        if listing_walk(self.state).change_lists is ChangeLists.ABANDONED:
            return
        sitemap = response.meta[FALLBACK]
        if declared(response.body) != "changelist":
            yield from self._abandon(sitemap, f"{response.url} is not a Change List")
        elif b"<sitemapindex" not in response.body[:4096]:
            yield from self._changes_in(response)
        elif response.meta[IN_INDEX]:
            yield from self._abandon(sitemap, f"{response.url}, a page of an index, is an index")
        else:
            yield from self._index(response, sitemap)

    def _index(self, response: Response, sitemap: str) -> Iterator[scrapy.Request]:
        """A Change List Index: its pages that may name changes since the last crawl read them."""
        freshness = self.freshness
        assert freshness is not None  # noqa: S101 - read only with one
        since = freshness.read_to()
        pages = []
        for loc, _, md in entries(response.body):
            until = freshness.clock.credible(md.get("until"))
            if (url := self._on_site(loc)) and (since is None or until is None or until[0] >= since[0] - MARGIN):
                pages.append(url)
            if len(pages) > MAX_PAGES:
                yield from self._abandon(sitemap, f"its index names more than {MAX_PAGES} Change Lists to read")
                return
        listing_walk(self.state).change_pages = len(pages)
        if not pages:
            yield from self._changes_read()
        for url in pages:
            yield self._document(url, self.parse_change_list, sitemap, in_index=True)

    def _changes_in(self, response: Response) -> Iterator[scrapy.Request]:
        """A Change List: the records it names changed since the archive's version."""
        freshness = self.freshness
        assert freshness is not None  # noqa: S101 - read only with one
        changed, ignored = [], 0
        for loc, lastmod, md in entries(response.body):
            url = self._on_site(loc)
            suffixes = suffixes_in(urlsplit(url).path.encode()) if url else []
            if len(suffixes) != 1 or md.get("change") == "deleted":  # another site's, no record, or a deletion
                ignored += 1
                continue
            if freshness.wants_change(suffixes[0], md.get("datetime"), lastmod):
                changed.append(suffixes[0])
        if ignored:
            logger.info("%s: %d entries name no record on %s, or a deletion", response.url, ignored, self.resolver.base)
            self._stat(Stat.CHANGES_IGNORED, ignored)
        self._stat(Stat.CHANGE_LISTS_READ)
        yield from self.record_requests(changed, 0)
        walk = listing_walk(self.state)
        walk.change_pages -= 1
        if walk.change_pages <= 0:
            yield from self._changes_read()

    def _changes_read(self) -> Iterator[scrapy.Request]:
        """Every Change List read: the sample, and what they did not name is skipped."""
        freshness = self.freshness
        assert freshness is not None  # noqa: S101 - read only with one
        walk = listing_walk(self.state)
        walk.change_lists = ChangeLists.READ
        walk.sample_asked = True  # not asked again by a sitemap read after a lie
        sample = freshness.sample()
        skipped = freshness.changes_read()
        logger.info("Change Lists read: %d held records they do not name as changed are not asked", skipped)
        yield from self.record_requests(sample, 0)

    def change_lists_unread(self, failure: Failure) -> Iterator[scrapy.Request]:
        request = failed_request(failure)
        if request.url == self.resolver.base + WELL_KNOWN:  # most resolvers publish none
            logger.info("no ResourceSync at %s (%s): reading the sitemaps", self.resolver.base, describe(failure))
            yield self.plain_sitemap_request(request.meta[FALLBACK])
        elif listing_walk(self.state).change_lists is not ChangeLists.ABANDONED:
            yield from self._abandon(request.meta[FALLBACK], f"{request.url}: {describe(failure)}")
