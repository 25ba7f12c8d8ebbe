"""Conditional re-fetching: the validators of documents an earlier crawl archived, sent
again so that an unchanged document costs a 304."""

import logging
import sqlite3
from pathlib import Path

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector

from storage.runtime.page_cache import PAGE_CACHE_KIB

from .. import signals as pith_signals
from ..crawl_config import crawl_config
from ..meta_keys import Meta
from ..stat_keys import Stat, StatFamily

logger = logging.getLogger(__name__)

WAITING_BATCH = 256  # validators of archived bundles written to the waiting table at once


class ConditionalRequestMiddleware:
    """Send If-None-Match / If-Modified-Since for documents fetched by an earlier crawl.

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
    bundle's are dropped (``bundle_rejected``): a crawl after its key is pinned, or after
    an upgrade, must fetch it again rather than hear 304.
    """

    def __init__(self, path: Path, stats: StatsCollector | None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(path))
        self.db.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
        self.stats = stats
        self.unbound = self._open_table()
        # this process's own (a private temporary database): the workers of a frontier
        # share the validators, and a killed crawl's waiting ones were never committed. Never
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
