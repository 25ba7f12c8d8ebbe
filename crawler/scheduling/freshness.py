"""What a scheduled re-crawl asks for: the records that changed, by the listing's dates,
and a check that those dates tell the truth.

A resolver's sitemaps date each record (``<lastmod>``). A record the archive holds is
not asked for again when its listed date is before the day its held version was built,
or is that day but the version was confirmed (fetched, or heard unchanged) after it:
dates may be days only, so a listed day on or after the last confirmation counts as
maybe changed. A record not held, or listed with no date, is asked for as always. Time
from the source and from this machine's clock is bounded both ways
(``crawler.scheduling.listed_time``): a date in the future is no date, and a
confirmation stamped in the future is due.

Dates can lie. Each crawl also asks again, conditionally, a rotating sample of the held
records (at least 64 or 1%, at most 2% of them or 10, and every record within 100 crawls),
and every record not confirmed for ``PITH_RECHECK_AFTER_DAYS``. A held
record the crawl finds changed is a lie when its listing claimed it unchanged: by its own
date, by the silence of a Change List, or by sitting in a sitemap not read because its
index date had not moved (found when the walk ends: ``spider_idle``). The source's dates
are then distrusted at once, in the same crawl: ``dates_distrusted`` is sent (the sitemap
walk reads every listing again and asks every record), ``pith/lastmod_distrusted`` is
set, and the distrust is kept in the crawl's state folder for later crawls until a crawl
that asked every record finds no lying date. A lying date may cost requests, never a
record.

Each held record is counted once, by why it was asked (``Asked``) or as not asked, so
that the summary's counts add up to the records held.

The truth is the archive: the held versions are read from the archive writer when the
archive is opened (``archive_opened``); confirmations and the sample's place are kept in
the state folder, saved when the crawl commits its final run, and count only for the version they
confirmed. Until the archive is opened (``ready``), no record is skipped.
"""

import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider, NotConfigured
from scrapy.statscollectors import StatsCollector
from twisted.internet.defer import Deferred

from .. import signals as pith_signals
from ..crawl_config import crawl_config
from ..items import BundleItem
from ..stat_keys import Stat, StatFamily, read_family
from .held_records import Asked, HeldRecords, sample_size
from .listed_time import DAY, CrawlClock, Listed, changed_since, listed_date

logger = logging.getLogger(__name__)

SETTLED = {"archived", "unchanged"}  # record outcomes after which a crawl's reading of the Change Lists is kept
ASKED_STATS = {
    Asked.DATED: Stat.ASKED_DATED,
    Asked.SAMPLED: Stat.RECHECK_SAMPLE,
    Asked.DUE: Stat.RECHECK_DUE,
    Asked.SWEPT: Stat.ASKED_SWEPT,
}


class HeldVersions(Protocol):
    """What a re-crawl needs of the archive writer (``archive_opened``'s ``writer``)."""

    def held_versions(self) -> Iterator[tuple[str, bytes, int, int]]:
        """``(pith_number, bundle digest, built_at, fetched_at)`` of each record's current
        version, the times in microseconds since the epoch."""
        ...


class Freshness:
    """Extension: which held records a crawl asks for, and whether their dates lie.

    The spider's listing walks use it through ``crawler.get_extension``: ``ready``,
    ``clock``, ``may_trust_listings``, ``wants``/``reads_sitemap``/``sample`` for the
    sitemaps, ``wants_change``/``read_to``/``changes_read`` for the Change Lists, and
    ``held`` for links."""

    crawler: Crawler

    def __init__(self, state_dir: Path, source: str, recheck_after: timedelta, stats: StatsCollector) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.state_path = state_dir / "freshness.json"
        self.source = source
        self.recheck_after = recheck_after // timedelta(microseconds=1)  # the clock's unit
        self.stats = stats
        self.clock = CrawlClock()
        self.recrawl = self.state_path.exists()  # a crawl before this one committed here
        self.state: dict[str, Any] = self._read_state()
        self.distrusted = source in self.state["distrusted"]
        self.swept = self.distrusted  # a crawl that asks every record: it may clear the distrust
        self.lies = 0
        self.listing_read = False  # a sitemap or Change List was read: its silence is a claim
        self.change_lists_read = False  # every Change List was read this crawl
        self.newest_change: str | None = None  # the newest change they named (the resolver's clock)
        self.reason: str | None = None  # why the crawl ended
        self.saved = False  # the crawl's final run committed, and its state was saved
        self.bounded = False  # --max-records: a crawl that may not ask every record
        self.held_count = 0  # records the archive holds (once it is opened)
        self.sample_to = self.state["sample_from"]  # the bucket this crawl's sample ended at
        self.ready: Deferred = Deferred()
        self.records = HeldRecords(state_dir / "confirmed.sqlite3")

    def _read_state(self) -> dict[str, Any]:
        try:
            state = json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            state = {}
        state = state if isinstance(state, dict) else {}
        for key, empty in (("distrusted", {}), ("sample_from", -1), ("sitemaps", {}), ("read_to", {})):
            if not isinstance(state.get(key), type(empty)):
                state[key] = empty
        return state

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> "Freshness":
        config = crawl_config(crawler)
        settings = crawler.settings
        if not config.state_dir or config.store is None or not settings.getbool("PITH_LISTED_DATES"):
            raise NotConfigured
        assert crawler.stats is not None  # noqa: S101 - made before the extensions
        freshness = cls(Path(config.state_dir), config.resolver, config.recheck_after, crawler.stats)
        freshness.crawler = crawler
        freshness.bounded = config.max_records > 0
        crawler.signals.connect(freshness.opened, signal=pith_signals.archive_opened)
        crawler.signals.connect(freshness.settled, signal=pith_signals.record_settled)
        crawler.signals.connect(freshness.item_scraped, signal=signals.item_scraped)
        crawler.signals.connect(freshness.idle, signal=signals.spider_idle)
        crawler.signals.connect(freshness.committed, signal=pith_signals.archive_committed)
        crawler.signals.connect(freshness.closed, signal=signals.spider_closed)
        return freshness

    # --- the archive's held versions ------------------------------------------------
    def opened(self, writer: HeldVersions | None = None, committed: frozenset = frozenset()) -> None:
        """Read the held versions (one pass over the archive's history) and the
        confirmations that still name them. How far the listings were read is a cache of
        the archive: kept only while the archive holds the run that read them."""
        run = self.state.get("run")
        if run is not None and run not in committed:
            self.state["sitemaps"], self.state["read_to"] = {}, {}
            self.stats.set_value(StatFamily.CACHE_DROPPED + "listings", 1)
            logger.warning("cache did not match the archive: the listings are read whole again")
        if writer is not None:
            self.held_count = self.records.load(writer.held_versions(), self.clock.now)
        if self.distrusted and self.held_count:
            logger.warning(
                "dates not trusted: %s listed changed records with old dates before; every record is asked again",
                self.source,
            )
            self.stats.set_value(Stat.LASTMOD_DISTRUSTED, 1)
        if not self.ready.called:
            self.ready.callback(None)

    def may_trust_listings(self) -> bool:
        """Whether the listings alone may say what changed (the Change Lists read instead
        of the sitemaps): a re-crawl (a crawl committed here before), and, once the archive
        is open, one that holds records whose source's dates are trusted."""
        return self.recrawl and (not self.ready.called or (self.held_count > 0 and not self.distrusted))

    def sample(self) -> list[str]:
        """The held records this crawl asks again whatever their dates: the next
        ``sample_size`` of the rotation (the held records in the order of their bucket,
        from where the last sample ended), and those not confirmed for
        ``PITH_RECHECK_AFTER_DAYS`` (or confirmed later than the clock now: by a crawl
        whose clock was fast)."""
        if not self.held_count or self.distrusted:
            return []
        rotation = self.records.rotation(self.state["sample_from"], sample_size(self.held_count))
        self.sample_to = rotation[-1][1] if rotation else self.sample_to
        due = self.records.due(self.clock.now - self.recheck_after, self.clock.now)
        logger.info(
            "asking again %d records of %d held (the rotating sample) and %d not confirmed for %.0f days",
            len(rotation),
            self.held_count,
            len(due),
            self.recheck_after / DAY,
        )
        return [suffix for suffix, _ in rotation] + due

    def _then(self, built: int, listed_then: str | None) -> tuple[int, str | None]:
        """A held version's build time and the date its listing gave when it was last
        confirmed, each dropped when later than the clock allows (a future build time
        compares as none, so the record is asked)."""
        fresh = self.clock.bounded((built, False)) is not None
        return (built if fresh else 0), (listed_then if self.clock.bounded(listed_date(listed_then)) else None)

    def wants(self, suffix: str, lastmod: str | None) -> bool:
        """Whether a listed record must be asked for (see the module): the date its
        listing gives it moved since the held version was confirmed, or (never
        confirmed with a date) it is not before the day that version was built."""
        if not self.ready.called:
            return True
        self.listing_read = True
        listed = self.clock.credible(lastmod)
        if listed is not None and lastmod is not None:
            self.records.listed(suffix, lastmod)
        version = self.records.version(suffix)
        if version is None:
            return True  # not held: new to the archive
        built, listed_then = self._then(*version)
        if listed is None:  # no date (or one in the future): as a crawl without dates
            changed = True
        else:
            changed = lastmod != listed_then if listed_then is not None else changed_since(listed, (built, False))
        if changed:
            self.records.asked(suffix, False, Asked.DATED)
            return True
        if self.records.asked(suffix, True, Asked.SWEPT if self.distrusted else None):  # the sample found it changed
            self._lied(suffix)
            self.records.asked(suffix, None, Asked.SWEPT)  # the lie distrusts the dates: it is asked
        return self.distrusted

    def read_to(self) -> Listed | None:
        """The newest change this resolver's Change Lists named in the last finished crawl
        (None: read every page; so too a position later than the clock allows)."""
        return self.clock.bounded(listed_date(self.state["read_to"].get(self.source)))

    def wants_change(self, suffix: str, *dates: str | None) -> bool:
        """Whether a Change List's entry must be asked: the record is not held, or the
        change's moment (the later of ``dates``, its ``datetime`` and ``lastmod``: the
        resolver's clock) is after the held version was built and after the date its
        listing gave when that version was last confirmed. The newest moment named is
        kept as its listed date, as a sitemap's."""
        self.listing_read = True
        moment = self.clock.newest(*dates)
        self.newest_change = self.clock.newest(moment, self.newest_change)
        listed = listed_date(moment)
        version = self.records.version(suffix)
        if version is None:
            return True
        kept = listed_date(self.records.listed_now(suffix))
        if listed is not None and moment is not None and (kept is None or listed[0] > kept[0]):
            self.records.listed(suffix, moment)
        built, listed_then = self._then(*version)
        then = listed_date(listed_then)
        changed = listed is None or (
            changed_since(listed, (built, False)) and (then is None or changed_since(listed, then))
        )
        if changed:
            self.records.asked(suffix, False, Asked.DATED)
        return changed

    def changes_read(self) -> int:
        """Every Change List was read: the held records they did not name changed, by
        their word. Those the sample found changed are lies. How many records it skips."""
        self.listing_read = self.change_lists_read = True
        lies, skipped = self.records.unnamed()
        for suffix in lies:
            self._lied(suffix)
        return skipped

    def held(self, suffix: str) -> bool:
        """Whether the archive holds the record: a link to it in a re-crawl walking the
        sitemaps is left to them, which date it."""
        return self.ready.called and self.records.holds(suffix)

    def reads_sitemap(self, url: str, lastmod: str | None) -> bool:
        """Whether an index's child is read: not when the date the index gives it is
        the one it had when a crawl read it and committed (never while the dates are
        distrusted, nor for a date in the future). The date is kept when it is read."""
        dated = lastmod if self.clock.credible(lastmod) is not None else None
        if not self.distrusted and self.ready.called and dated is not None and self.state["sitemaps"].get(url) == dated:
            self.listing_read = True
            return False
        self.state.setdefault("read", {})[url] = dated
        return True

    # --- what the crawl found ---------------------------------------------------------
    def settled(self, suffix: str | None, outcome: str) -> None:
        if outcome == "unchanged" and suffix:
            self.records.confirm(suffix, None, self.clock.now)

    def item_scraped(self, item: Any) -> None:
        if not isinstance(item, BundleItem) or not item.answers or not item.verdict.ok or not item.suffix:
            return
        sha = item.verdict.bundle_sha256
        digest = bytes.fromhex(sha) if sha else None
        # a newer version: a lie when this crawl's listing dated it unchanged (or, not
        # read yet, when it does: ``wants``; never listed: when the walk ends, ``idle``)
        if digest is not None and self.records.renewed(item.suffix, digest):
            self._lied(item.suffix)
        self.records.confirm(item.suffix, digest, self.clock.now)

    def idle(self) -> None:
        """The walk ended: a held record found changed that no listing read in this crawl
        dated (its sitemap skipped because the index date did not move, or not listed
        at all) was claimed unchanged by that silence, and is a lie like a dated one.
        Every listing is then read again before the crawl may close."""
        if self.distrusted or self.bounded or not self.listing_read or not self.ready.called:
            return
        silent = self.records.silent()
        for suffix in silent:
            self._lied(suffix)
        if silent:
            raise DontCloseSpider

    def _lied(self, suffix: str) -> None:
        self.lies += 1
        self.stats.inc_value(Stat.LASTMOD_LIES)
        if self.distrusted:
            return
        self.distrusted = True
        self.stats.set_value(Stat.LASTMOD_DISTRUSTED, 1)
        logger.warning(
            "dates not trusted: %s changed although %s listed it unchanged; every record is asked again",
            suffix,
            self.source,
        )
        self.crawler.signals.send_catch_log(pith_signals.dates_distrusted, base=self.source)

    def _count(self) -> None:
        """Each held record once: not asked, or asked for its first reason; and the
        dates refused as in the future."""
        if self.clock.future_dates:
            self.stats.set_value(Stat.FUTURE_DATES, self.clock.future_dates)
        if not self.listing_read or not self.held_count:
            return
        counts = self.records.counts()
        self.stats.set_value(Stat.RECORDS_HELD, self.held_count)
        self.stats.set_value(Stat.SKIPPED_BY_DATE, counts.get(None, 0))
        for why, key in ASKED_STATS.items():
            self.stats.set_value(key, counts.get(why, 0))

    def committed(self, run_id: str | None = None, **_: Any) -> None:
        """The crawl committed its final run: keep its confirmations, the sitemaps it read, the rotation's
        next place and what it found of the dates."""
        if self.reason is None:
            self._count()
        self.records.keep(since=self.clock.now)
        self.state["sitemaps"].update(self.state.pop("read", {}))
        self.state["run"] = str(run_id) if run_id is not None else None
        if not self.distrusted:  # the next crawl's sample follows this one's
            self.state["sample_from"] = self.sample_to
        self.saved = True
        self._save()

    def closed(self, reason: str | None = None) -> None:
        """The crawl ended: why (its commit may come before or after)."""
        if not self.saved:
            self._count()
        self.reason = reason
        if not self.ready.called:
            self.ready.callback(None)
        if self.saved:
            self._save()

    def _save(self) -> None:
        """The state, with what this crawl found of the dates: distrusted when one lied,
        trusted again after a crawl that asked every record and found none lying; and how
        far the Change Lists were read, once a finished crawl settled every record."""
        finished = self.reason == "finished" and not self.bounded
        if self.lies:
            self.state["distrusted"][self.source] = {"lies": self.lies}
        elif self.swept and finished:
            self.state["distrusted"].pop(self.source, None)
        settled = set(read_family(self.stats.get_stats(), StatFamily.RECORDS)) <= SETTLED
        if self.change_lists_read and self.newest_change and finished and settled:
            self.state["read_to"][self.source] = self.newest_change
        save_json(self.state_path, self.state)


def save_json(path: Path, value: Any) -> None:
    """Write a state file whole or not at all (a crash mid-write leaves the last one)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value, sort_keys=True))
    tmp.replace(path)
