"""Downloader middlewares: polite retries, conditional re-fetching, and requests kept
on the hosts the crawl was given."""

import logging
import random
import sqlite3
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.offsite import OffsiteMiddleware
from scrapy.downloadermiddlewares.retry import RetryMiddleware, get_retry_request
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response
from scrapy.settings import BaseSettings
from scrapy.statscollectors import StatsCollector
from scrapy.utils.asyncio import sleep
from scrapy.utils.httpobj import urlparse_cached

from storage.runtime.page_cache import PAGE_CACHE_KIB

from . import signals as pith_signals
from .crawl_config import crawl_config, is_pith_crawl, pith_crawl_only
from .links import port_of
from .meta_keys import Meta, time_left
from .stat_keys import Stat, StatFamily

logger = logging.getLogger(__name__)

WAITING_BATCH = 256  # validators of archived bundles written to the waiting table at once


def retry_after_seconds(value: bytes | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    text = value.decode("latin-1").strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


class BackoffRetryMiddleware(RetryMiddleware):
    """Scrapy's retries, waiting before each one: the server's Retry-After on 429/503
    when it sends one (capped by PITH_RETRY_AFTER_MAX), else exponential backoff with
    jitter from PITH_RETRY_BACKOFF_BASE up to PITH_RETRY_BACKOFF_MAX seconds; a request
    with a deadline (robots.txt, ``crawler.robots``) waits until then at most."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RetryMiddleware:  # type: ignore[override]  # Scrapy's own for another spider
        """Another spider gets Scrapy's retries, which this project's settings turn off."""
        return super().from_crawler(crawler) if is_pith_crawl(crawler) else RetryMiddleware.from_crawler(crawler)

    def __init__(self, settings: BaseSettings) -> None:
        super().__init__(settings)
        self.backoff_base = settings.getfloat("PITH_RETRY_BACKOFF_BASE")
        self.backoff_max = settings.getfloat("PITH_RETRY_BACKOFF_MAX")
        self.retry_after_max = settings.getfloat("PITH_RETRY_AFTER_MAX")

    async def process_response(  # type: ignore[override]  # Scrapy awaits it
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Request | Response:
        if request.meta.get("dont_retry") or response.status not in self.retry_http_codes:
            return response
        retry = get_retry_request(request, spider=self.crawler.spider, reason=f"HTTP {response.status}")  # type: ignore[arg-type]  # the spider is open
        if retry is None:
            return response
        hinted = retry_after_seconds(response.headers.get(b"Retry-After")) if response.status in (429, 503) else None
        if hinted is not None:
            self.crawler.stats.inc_value(Stat.RETRY_AFTER_HONOURED)
            await self._wait(request, min(hinted, self.retry_after_max))
        else:
            await self._wait(request, self._backoff(request))
        return retry

    async def process_exception(  # type: ignore[override]  # Scrapy awaits it
        self, request: Request, exception: Exception, spider: Spider | None = None
    ) -> Request | Response | None:
        retry = super().process_exception(request, exception)
        if retry is not None:
            await self._wait(request, self._backoff(request))
        return retry

    def _backoff(self, request: Request) -> float:
        attempt = request.meta.get("retry_times", 0)
        return min(self.backoff_max, self.backoff_base * 2**attempt) * random.uniform(0.5, 1.0)  # noqa: S311 - jitter, not a secret

    @staticmethod
    async def _wait(request: Request, seconds: float) -> None:
        """Wait ``seconds``, but never past the request's deadline (``Meta.DEADLINE``)."""
        left = time_left(request)
        seconds = seconds if left is None else min(seconds, left)
        if seconds > 0:
            await sleep(seconds)


class ConditionalRequestMiddleware:
    """Send If-None-Match / If-Modified-Since for documents fetched by an earlier run.

    The validators are a cache of the archive, never a truth of their own: each is
    kept with the run id of the manifest that committed its bundle, and when the
    archive pipeline has read the archive (``archive_opened``) those whose manifest it
    no longer trusts or holds (the archive was deleted, emptied, restored from an older
    copy, replaced, or its key changed) are dropped before the first request, so their
    records are fetched and archived again instead of heard as 304. Until then, or in a
    crawl with no archive, no request is made conditional.

    Validators are remembered only for requests marked ``meta[Meta.CONDITIONAL]``,
    and saved only when the archive run holding their bundle commits: a validator
    saved for a bundle that never reached a manifest would hide it forever. Until its
    bundle is archived (``bundle_archived``) a validator is held in memory; from then
    until its run commits (``interim_committed``, ``archive_committed``) it waits
    on disk, so a crawl of a million records holds no million validators. A rejected
    bundle's are dropped (``bundle_rejected``): a run after its key is pinned, or after
    an upgrade, must fetch it again rather than hear 304.
    """

    def __init__(self, path: Path, stats: StatsCollector | None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(path))
        self.db.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
        self.stats = stats
        self.unbound = self._open_table()
        # this process's own (a private temporary database): the workers of a frontier
        # share the validators, and a killed run's waiting ones were never committed. Never
        # read after a crash either, so one transaction from start to end: no insert pays
        # for a commit of its own
        self.waiting = sqlite3.connect("", isolation_level=None)
        self.waiting.executescript(f"""
            PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-{PAGE_CACHE_KIB};
            CREATE TABLE waiting (url TEXT PRIMARY KEY, etag TEXT, modified TEXT, run TEXT);
            BEGIN;
        """)
        self.pending: dict[str, tuple] = {}  # url -> validators, until its bundle is archived
        self.batch: list[tuple] = []  # archived, on their way to the waiting table
        # any validator kept, once checked against the archive: until then no request is
        # conditional, and a first crawl looks none up
        self.known = False

    def _open_table(self) -> int:
        """Open the validators table; a cache kept before validators named their run
        cannot be checked against the archive and is dropped: how many it held."""
        columns = [row[1] for row in self.db.execute("PRAGMA table_info(validators)")]
        dropped = 0
        if columns and "run" not in columns:
            dropped = self.db.execute("SELECT COUNT(*) FROM validators").fetchone()[0]
            self.db.execute("DROP TABLE validators")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS validators (url TEXT PRIMARY KEY, etag TEXT, modified TEXT, run TEXT)"
        )
        self.db.commit()
        return dropped

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> "ConditionalRequestMiddleware":
        state_dir = crawl_config(crawler).state_dir
        if not state_dir or not crawler.settings.getbool("PITH_CONDITIONAL_REQUESTS"):
            raise NotConfigured
        middleware = cls(Path(state_dir) / "validators.sqlite3", crawler.stats)
        crawler.signals.connect(middleware.check, signal=pith_signals.archive_opened)
        crawler.signals.connect(middleware.archived, signal=pith_signals.bundle_archived)
        crawler.signals.connect(middleware.committed, signal=pith_signals.interim_committed)
        crawler.signals.connect(middleware.save, signal=pith_signals.archive_committed)
        crawler.signals.connect(middleware.forget, signal=pith_signals.bundle_rejected)
        crawler.signals.connect(middleware.close, signal=signals.spider_closed)
        return middleware

    def check(self, committed: frozenset) -> None:
        """Drop the validators of bundles whose manifest the archive does not hold (or
        no longer trusts): ``committed`` are the run ids it does."""
        with self.db:
            self.db.execute("CREATE TEMP TABLE IF NOT EXISTS committed (run TEXT PRIMARY KEY)")
            self.db.execute("DELETE FROM committed")
            self.db.executemany("INSERT INTO committed VALUES (?)", ((run,) for run in committed))
            dropped = self.db.execute("DELETE FROM validators WHERE run NOT IN (SELECT run FROM committed)").rowcount
        dropped += self.unbound
        self.known = self.db.execute("SELECT EXISTS (SELECT 1 FROM validators)").fetchone()[0] == 1
        if dropped and self.stats is not None:
            self.stats.set_value(StatFamily.CACHE_DROPPED + "validators", dropped)
            logger.warning(
                "cache did not match the archive: %d validators dropped (their bundles are fetched again)", dropped
            )

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        if not self.known or not request.meta.get(Meta.CONDITIONAL):
            return None
        row = self.db.execute("SELECT etag, modified FROM validators WHERE url = ?", (request.url,)).fetchone()
        if row:
            etag, modified = row
            if etag:
                request.headers[b"If-None-Match"] = etag
            if modified:
                request.headers[b"If-Modified-Since"] = modified
            if self.stats is not None:
                self.stats.inc_value(Stat.CONDITIONAL_REQUESTS)
        return None

    def process_response(self, request: Request, response: Response, spider: Spider | None = None) -> Response:
        if request.meta.get(Meta.CONDITIONAL) and response.status == 200:
            etag = response.headers.get(b"ETag")
            modified = response.headers.get(b"Last-Modified")
            if etag or modified:
                self.pending[request.url] = (etag and etag.decode("latin-1"), modified and modified.decode("latin-1"))
        return response

    def forget(self, url: str) -> None:
        self.pending.pop(url, None)

    def archived(self, url: str, run_id: str) -> None:
        """The bundle fetched from ``url`` is in ``run``: its validators wait for it
        (on disk, WAITING_BATCH at a time: one statement per bundle on Scrapy's thread
        would hand the GIL to the upload threads and wait to get it back, each time)."""
        validators = self.pending.pop(url, None)
        if validators is not None:
            self.batch.append((url, *validators, run_id))
            if len(self.batch) >= WAITING_BATCH:
                self._flush()

    def _flush(self) -> None:
        self.waiting.executemany("INSERT OR REPLACE INTO waiting VALUES (?, ?, ?, ?)", self.batch)
        self.batch.clear()

    def committed(self, run_id: str) -> None:
        """An interim commit committed ``run``: keep the validators of its bundles."""
        self._keep("WHERE run = ?", (run_id,))

    def save(self) -> None:
        """The crawl's final commit: keep the validators of every archived bundle."""
        self._keep("", ())

    def _keep(self, where: str, args: tuple) -> None:
        self._flush()
        rows = self.waiting.execute(f"SELECT url, etag, modified, run FROM waiting {where}", args)  # noqa: S608 - a constant clause, values bound
        self.db.executemany("INSERT OR REPLACE INTO validators VALUES (?, ?, ?, ?)", rows)
        self.db.commit()
        kept = self.waiting.execute(f"DELETE FROM waiting {where}", args).rowcount  # noqa: S608 - a constant clause, values bound
        logger.debug("saved validators for %d documents", kept)

    def close(self, spider: Spider | None = None, reason: str | None = None) -> None:
        self.db.close()
        self.waiting.close()


class JsonCharsetMiddleware:
    """Declare UTF-8 on JSON responses that name no charset (RFC 8259: JSON is UTF-8).

    Without it, Scrapy's decompression middleware copies ``response.encoding`` on every
    compressed response, which for a charset-less ``application/json`` body runs a full
    charset detection: milliseconds per bundle, more than verifying it. It sits just
    before HttpCompressionMiddleware in the response path and never touches the body.
    """

    JSON_TYPES = (b"application/json", b"application/ld+json")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> "JsonCharsetMiddleware":
        pith_crawl_only(crawler)
        return cls()

    def process_response(self, request: Request, response: Response, spider: Spider | None = None) -> Response:
        content_type = response.headers.get(b"Content-Type") or b""
        if content_type.split(b";")[0].strip().lower() in self.JSON_TYPES and b"charset" not in content_type.lower():
            response.headers[b"Content-Type"] = content_type + b"; charset=utf-8"
        return response


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
