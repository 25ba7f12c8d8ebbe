"""The ``pith`` spider: from seeds, walk a resolver's links to every reachable bundle.

Per record it fetches the bundle (the payload, handed to the pipelines with its exact bytes)
and reads every record it names (graph references, citations, links). The record page, whose
"cited by" links name records the bundle may not, is fetched only when following links, with
no sitemap seed (a sitemap lists every record already), and when the bundle does not itself
name every record citing it. The state document is fetched only for the share of records
PITH_CHECK_STATE asks (it is signed inside the bundle already). A URL template the resolver
redirects is learnt from the first redirect, so later URLs are built final (no redirect hop).

Its mixins (``crawler.spider_mixins``) each own one concern: the sources a record's
bundle is fetched from, a bad copy's or a failed fetch's fallback, the record pages and
alias seeds, the sitemap walk, the state.json check and the cross-check sample.
"""

import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from itertools import islice
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.http import Response
from twisted.python.failure import Failure

from pith.parse import Limits, parse
from pith.reasons import Reason, Rejected
from pith.signing import utc_now

from .. import signals as pith_signals
from ..crawl_config import ARGUMENTS, CrawlConfig
from ..downloading.spread import SourcePool
from ..items import BundleItem
from ..links import ResolverUrls, base_of, learnt_template, mirror_bases, suffixes_in
from ..meta_keys import Meta
from ..scheduling.claims import BUNDLE, record_task
from ..seeds import SeedError
from ..spider_mixins.cross_check import CrossCheck
from ..spider_mixins.fallbacks import BundleFallbacks
from ..spider_mixins.record_pages import RecordPages
from ..spider_mixins.sitemaps import SitemapWalk
from ..spider_mixins.sources import RecordSources
from ..spider_mixins.state_check import StateCheck
from ..stat_keys import Stat
from ..verifying.identity import bound
from ..verifying.verifier import Verifier
from ..verifying.verify_worker import Checked

logger = logging.getLogger(__name__)

SEED_BATCH = 10_000  # seeds read from a seeds file at once
# finish records before opening new ones, so memory and the frontier stay small
# (state.json: 30, record pages and aliases: 10, Change Lists: 6, sitemaps: 5)
PRIORITY = {"mirror_list": 100, "bundle": 20}


class PithSpider(CrossCheck, SitemapWalk, StateCheck, RecordSources, RecordPages, BundleFallbacks, scrapy.Spider):
    name = "pith"
    custom_settings = {}
    unspread = 0  # record bundle requests still to send to the resolver: the --cross-check sample
    verifier: Verifier  # parses and verifies each bundle, off the reactor

    def __init__(self, config: CrawlConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config = config  # the crawl's, which every component reads (crawler.crawl_config)
        self.seeds = config.seeds
        self.resolver = ResolverUrls(config.resolver)  # learns the layout of /pith-mirrors.json
        self.mirrors = list(config.mirrors)  # grows with the registry's mirrors (--mirrors-from-registry)
        self.allow_hosts = set(config.allow_hosts)
        hosts = {self.resolver.host, *(urlsplit(m).hostname for m in self.mirrors), *self.allow_hosts}
        self.allowed_domains = sorted(h for h in hosts if h)
        self.state = {}  # replaced by the saved one when a --jobdir crawl resumes (SpiderState)
        # record pages add the records citing one; a sitemap names every record already
        self.pages = config.follow and not self.seeds.any_sitemap
        self.check_state = config.check_state
        self.unspread = config.cross_check
        self.pool = SourcePool(self.sources)  # the sources bundle requests are spread over (crawler.downloading.spread)
        self.aliases: dict[str, str] = {}  # suffix -> the alias seed the resolver resolved to it

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> "PithSpider":
        """The spider of the crawl ``config`` describes, or (``scrapy crawl pith -a``,
        Scrapyd) of the config built from the settings and the spider arguments."""
        config = kwargs.pop("config", None)
        if config is None:
            arguments = {name: kwargs.pop(name) for name in ARGUMENTS & kwargs.keys()}
            try:
                config = CrawlConfig.from_settings(crawler.settings, arguments)
            except SeedError as exc:
                raise ValueError(str(exc)) from None
        spider = super().from_crawler(crawler, *args, config=config, **kwargs)
        spider.limits = Limits()  # the one size rule verify and the audit apply too, whatever DOWNLOAD_MAXSIZE says
        spider.verifier = Verifier.for_crawl(crawler, config.keyring)
        crawler.signals.connect(spider.count_sources, signal=signals.spider_opened)
        crawler.signals.connect(spider.version_refused, signal=pith_signals.version_refused)
        crawler.signals.connect(spider.reread_sitemaps, signal=pith_signals.dates_distrusted)
        return spider

    def _stat(self, key: str, count: int = 1) -> None:
        self.crawler.stats.inc_value(key, count)

    def closed(self, reason: str) -> None:
        """Requests per record whose bundle was fetched or found unchanged: the cost of
        the crawl to the resolver (robots.txt, sitemaps, pages, retries, redirects)."""
        stats = self.crawler.stats
        records = stats.get_value(Stat.BUNDLES_FETCHED, 0) + stats.get_value(Stat.NOT_MODIFIED, 0)
        requests = stats.get_value("downloader/request_count", 0)
        if records:
            stats.set_value(Stat.REQUESTS_PER_RECORD, round(requests / records, 3))

    # --- start -------------------------------------------------------------------
    async def start(self) -> AsyncIterator[scrapy.Request]:
        yield scrapy.Request(
            self.resolver.base + "/pith-mirrors.json",
            callback=self.parse_mirror_list,
            errback=self.mirror_list_unavailable,
            priority=PRIORITY["mirror_list"],
            dont_filter=True,
            meta={"dont_retry": False},
        )

    def parse_mirror_list(self, response: Response) -> Iterator[scrapy.Request]:
        try:
            document = parse(response.body, self.limits).data
            mirror_list = document if isinstance(document, dict) else {}
        except Rejected as rejected:
            logger.warning("mirror list %s unusable (%s); using the default URL layout", response.url, rejected)
            mirror_list = {}
        self.resolver = self.resolver.with_mirror_list(mirror_list)
        for base in mirror_bases(mirror_list) if self.config.mirrors_from_registry else ():
            parts = urlsplit(base)
            if parts.scheme in ("http", "https") and parts.hostname:  # as --resolver and --mirror are checked
                self.add_mirror(base)
        if self.config.mirrors_from_registry:
            logger.info("spreading bundle requests over %d sources: %s", len(self.sources), ", ".join(self.sources))
        yield from self.records_in(response.body, depth=0)
        yield from self.seed_requests()

    def mirror_list_unavailable(self, failure: Failure) -> Iterator[scrapy.Request]:
        logger.info("no mirror list at %s; using the default URL layout", self.resolver.base)
        yield from self.seed_requests()

    def seed_requests(self) -> Iterator[scrapy.Request]:
        """Requests for the seeds, read SEED_BATCH at a time (one claim each)."""
        seeds = iter(self.seeds)
        while batch := list(islice(seeds, SEED_BATCH)):
            yield from self.record_requests([seed.value for seed in batch if seed.kind == "suffix"], depth=0)
            for seed in batch:
                if seed.kind == "alias":
                    yield self.alias_request(seed.value, 0)
                elif seed.kind == "sitemap":
                    yield self.sitemap_request(seed.value or self.resolver.base + "/sitemap.xml")

    # --- records -------------------------------------------------------------------
    def record_requests(self, suffixes: Iterable[str], depth: int) -> Iterator[scrapy.Request]:
        """A request opening each record named: the scheduler claims it (once a record,
        within --max-records) and asks ``record_request`` for the one it sends, whose
        source is picked then (so this one names the resolver, and picks nothing)."""
        for suffix in suffixes:
            request = self.bundle_request(self.resolver.base, suffix, depth)
            request.meta[Meta.OPENS_RECORD] = True
            yield request

    def record_request(self, suffix: str, depth: int) -> scrapy.Request:
        """A record's work starts from its bundle, from the source picked now; from
        here on the record must end accounted for (crawler.extensions.record_ledger)."""
        self.crawler.signals.send_catch_log(pith_signals.record_opened, suffix=suffix)
        return self.bundle_request(self.source(), suffix, depth)

    def settled(self, suffix: str, outcome: str) -> None:
        """A record ended without an item saying how (unchanged, or forbidden by robots.txt)."""
        self.crawler.signals.send_catch_log(pith_signals.record_settled, suffix=suffix, outcome=outcome)

    def task_request(self, task: dict) -> scrapy.Request:
        """This worker's own request for a task of a shared frontier (checked, of
        ``crawler.frontier.serializer.KINDS``): a task names what to fetch, the builders
        here say how."""
        kind = task["kind"]
        if kind in ("bundle", "page"):  # a record's work starts from its bundle, whatever part the task named
            return self.record_request(task["suffix"], task["depth"])
        if kind == "alias":
            return self.alias_request(task["alias"], task["depth"])
        return self.sitemap_request(task["base"] + task["path"])

    def records_in(self, body: bytes, depth: int, own: str | None = None) -> Iterator[scrapy.Request]:
        """Requests opening the records ``body`` names but its ``own``, which is open already."""
        if not self.config.follow or (0 <= self.config.max_depth < depth):
            return
        yield from self.record_requests(self.not_left_to_sitemaps([s for s in suffixes_in(body) if s != own]), depth)

    def bundle_request(self, base: str, suffix: str, depth: int, tried: Iterable[str] = ()) -> scrapy.Request:
        resolver = ResolverUrls(base, self.resolver.templates)
        # dont_filter: records are claimed by suffix (the scheduler); the URL dupefilter
        # would also swallow a redirect loop's second visit silently instead of naming it
        return scrapy.Request(
            resolver.url("bundle_url", suffix),
            callback=self.parse_bundle,
            errback=self.bundle_failed,
            priority=PRIORITY["bundle"],
            dont_filter=True,
            meta={
                Meta.SUFFIX: suffix,
                Meta.DEPTH: depth,
                Meta.CONDITIONAL: True,
                Meta.TRIED: [*tried, base],
                "handle_httpstatus_list": [304],
                Meta.TASK: record_task(BUNDLE, suffix),
                Meta.TEMPLATE: "bundle_url",
                # a mirror that fails falls back to the resolver at once: retrying a
                # slow or broken mirror multiplies its cost (crawler.downloading.spread)
                "dont_retry": base != self.resolver.base and self.resolver.base not in tried,
            },
        )

    def learn_redirect(self, response: Response, suffix: str) -> None:
        """A URL this spider built from a template was redirected: build the final one
        directly from now on (a static file server redirects ``/pith/<ID>`` to
        ``/pith/<ID>/``, for instance), so the hop is paid once, not per record."""
        kind = response.meta.get(Meta.TEMPLATE)
        first = (response.meta.get("redirect_urls") or [None])[0]
        if (
            kind is None
            or first is None
            or base_of(first) != self.resolver.base
            or first != self.resolver.url(kind, suffix)
        ):
            return
        template = learnt_template(response.url, self.resolver.base, suffix)
        if template is not None and template != dict(self.resolver.templates)[kind]:
            self.resolver = self.resolver.with_template(kind, template)
            self._stat(Stat.REDIRECTS_LEARNT)
            logger.info("%s redirects to %s: building %s URLs as %s", first, response.url, kind, template)

    # --- bundles -----------------------------------------------------------------
    async def parse_bundle(self, response: Response) -> AsyncIterator[Any]:
        meta = response.meta
        suffix, depth = meta[Meta.SUFFIX], meta[Meta.DEPTH]
        self.learn_redirect(response, suffix)
        if response.status == 304:
            for request in self.bundle_unchanged(meta):
                yield request
            return
        self._stat(Stat.BUNDLES_FETCHED)
        fetched_at = utc_now()
        checked = await self.check_bundle(response.body, suffix, meta[Meta.TRIED][-1])
        # another record's bundle answers nothing (crawler.verifying.identity)
        verdict = bound(checked.verdict, suffix, self.aliases.get(suffix))
        bundle = verdict.bundle  # taken first: the archive pipeline drops it from the verdict once stored (if read)
        item = BundleItem(
            url=response.url,
            body=response.body,
            raw_sha256=checked.raw_sha256,
            fetched_at=fetched_at,
            suffix=suffix,
            depth=depth,
            verdict=verdict,
            key_ids=checked.key_ids,
            prepared=checked.prepared,
            stored=checked.stored,
        )
        retry = None if verdict.ok else self.copy_refused(meta, verdict.reason)
        if retry is None:
            self.aliases.pop(suffix, None)  # the record's last copy
        if verdict.ok:
            self.pool.served(meta[Meta.TRIED][-1])
        elif retry is not None or verdict.reason == Reason.WRONG_RECORD:
            for output in self.bad_copy(meta, item, retry):
                yield output
            return
        for output in self.bundle_read(response, item, checked, bundle):
            yield output

    def bundle_unchanged(self, meta: dict) -> Iterator[scrapy.Request]:
        """A 304: the record is settled unchanged; its page is asked when it may name
        records (the links are in the body not sent again)."""
        self.pool.done(meta[Meta.TRIED][-1])
        self.pool.unchanged(meta[Meta.TRIED][-1])
        self._stat(Stat.NOT_MODIFIED)
        self.settled(meta[Meta.SUFFIX], "unchanged")
        self.aliases.pop(meta[Meta.SUFFIX], None)
        if self.page_wanted(meta[Meta.DEPTH]):
            yield self.page_request(meta[Meta.SUFFIX], meta[Meta.DEPTH], meta[Meta.TASK])

    async def check_bundle(self, body: bytes, suffix: str, source: str) -> Checked:
        """The bundle parsed and verified off the reactor (crawler.verifying.verifier), its
        parsed tree kept only where it is read (an alias to check, a state.json or a
        cross-check to compare)."""
        try:
            tree = suffix in self.aliases or self.config.check_state > 0 or self.config.cross_check > 0
            return await self.verifier.verify(body, tree)
        finally:  # outstanding until judged: a source is not given more while its copies await their verdict
            self.pool.done(source)

    def bundle_read(self, response: Response, item: BundleItem, checked: Checked, bundle: dict | None) -> Iterator[Any]:
        """The item of a copy that answers for its record, then what it leads to: when it
        parsed, its copies from the other sources (a cross-check), its state.json, the
        records it names; and its record's page, when that may name more."""
        meta = response.meta
        suffix, depth = meta[Meta.SUFFIX], meta[Meta.DEPTH]
        if not checked.parsed:
            yield item
            if self.page_wanted(depth):
                yield self.page_request(suffix, depth, meta[Meta.TASK])
            return
        copies = list(self.cross_check_requests(response, item))  # marks the item: before it is yielded
        yield item
        yield from copies
        yield from self.state_requests(response, suffix, bundle)
        yield from self.records_in(response.body, depth + 1, suffix)
        if self.page_wanted(depth, checked.names_every_citer):
            yield self.page_request(suffix, depth, meta[Meta.TASK])
