"""What a scheduled re-run asks for: the records that changed, by the listing's dates,
and a check that those dates tell the truth.

A resolver's sitemaps date each record (``<lastmod>``). A record the archive holds is
not asked for again when its listed date is before the day its held version was built,
or is that day but the version was confirmed (fetched, or heard unchanged) after it:
dates may be days only, so a listed day on or after the last confirmation counts as
maybe changed. A record not held, or listed with no date, is asked for as always. Time
from the source and from this machine's clock is bounded both ways
(``crawler.scheduling.listed_time``): a date in the future is no date, and a
confirmation stamped in the future is due.

Dates can lie. Each run also asks again, conditionally, a rotating sample of the held
records (at least 64 or 1%, at most 2% of them or 10, and every record within 100 runs),
and every record not confirmed for ``PITH_RECHECK_AFTER_DAYS``. A held
record the run finds changed is a lie when its listing claimed it unchanged: by its own
date, by the silence of a Change List, or by sitting in a sitemap not read because its
index date had not moved (found when the walk ends: ``spider_idle``). The source's dates
are then distrusted at once, in the same run: ``dates_distrusted`` is sent (the sitemap
walk reads every listing again and asks every record), ``pith/lastmod_distrusted`` is
set, and the distrust is kept in the crawl's state folder for later runs until a run
that asked every record finds no lying date. A lying date may cost requests, never a
record.

Each held record is counted once, by why it was asked (``Asked``) or as not asked, so
that the summary's counts add up to the records held.

The truth is the archive: the held versions are read from the archive writer when the
archive is opened (``archive_opened``); confirmations and the sample's place are kept in
the state folder, saved when the run commits, and count only for the version they
confirmed. Until the archive is opened (``ready``), no record is skipped.
"""

import hashlib
import json
import logging
import sqlite3
from enum import StrEnum
from pathlib import Path
from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import DontCloseSpider, NotConfigured
from scrapy.statscollectors import StatsCollector
from twisted.internet.defer import Deferred

from storage.runtime.page_cache import PAGE_CACHE_KIB

from .. import signals as pith_signals
from ..crawl_config import crawl_config
from ..items import BundleItem
from ..stat_keys import Stat, StatFamily
from .listed_time import DAY, RunClock, changed_since, listed_date

logger = logging.getLogger(__name__)

SAMPLE_FLOOR = 64  # records asked again each run, at least (within SAMPLE_CEILING)
SAMPLE_SHARE = 0.01  # ... or this share of the held records, whichever is larger
SAMPLE_CEILING = 0.02  # ... but never more than this share: a week's budget
SAMPLE_SLACK = 10  # ... or than this many, in an archive so small that 2% is fewer
ROTATION = 100  # runs in which the sample has asked every held record, at most


class Asked(StrEnum):
    """Why a held record was asked in a re-run (the first reason counts)."""

    DATED = "dated"  # its listing dates it changed, gives no date, or a Change List names it
    SAMPLED = "sampled"  # this run's part of the rotating sample
    DUE = "due"  # not confirmed for PITH_RECHECK_AFTER_DAYS (or confirmed in the future)
    SWEPT = "swept"  # the dates are not trusted: every record is asked


ASKED_STATS = {
    Asked.DATED: Stat.ASKED_DATED,
    Asked.SAMPLED: Stat.RECHECK_SAMPLE,
    Asked.DUE: Stat.RECHECK_DUE,
    Asked.SWEPT: Stat.ASKED_SWEPT,
}


def bucket_of(suffix: str) -> int:
    """A record's place in the sample's rotation: stable across runs and machines."""
    return int.from_bytes(hashlib.sha256(suffix.encode()).digest()[:7], "big")


def sample_size(held: int) -> int:
    """How many held records a run asks again: a week's budget, and every record within
    ``ROTATION`` runs."""
    size = min(max(SAMPLE_FLOOR, int(held * SAMPLE_SHARE)), max(SAMPLE_SLACK, int(held * SAMPLE_CEILING)))
    return min(held, max(size, -(-held // ROTATION)))


class Freshness:
    """Extension: which held records a run asks for, and whether their dates lie."""

    crawler: Crawler

    def __init__(self, state_dir: Path, source: str, recheck_after_days: float, stats: StatsCollector) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.state_path = state_dir / "freshness.json"
        self.source = source
        self.recheck_after = int(recheck_after_days * DAY)
        self.stats = stats
        self.clock = RunClock()
        self.rerun = self.state_path.exists()  # a run before this one committed here
        self.state: dict[str, Any] = self._read_state()
        self.distrusted = source in self.state["distrusted"]
        self.swept = self.distrusted  # a run that asks every record: it may clear the distrust
        self.lies = 0
        self.listing_read = False  # a sitemap or Change List was read: its silence is a claim
        self.listings_cached = True  # how far the listings were read still matches the archive
        self.reason: str | None = None  # why the crawl ended
        self.saved = False  # the run committed, and its state was saved
        self.bounded = False  # --max-records: a run that may not ask every record
        self.held_count = 0  # records the archive holds (once it is opened)
        self.sample_to = self.state["sample_from"]  # the bucket this run's sample ended at
        self.ready: Deferred = Deferred()
        self.db = sqlite3.connect(str(state_dir / "confirmed.sqlite3"))
        self.db.executescript(f"""
            PRAGMA cache_size=-{PAGE_CACHE_KIB};
            CREATE TABLE IF NOT EXISTS confirmed (suffix TEXT PRIMARY KEY, bundle BLOB, at INTEGER, listed TEXT)
                WITHOUT ROWID;
            CREATE TEMP TABLE held (suffix TEXT PRIMARY KEY, bundle BLOB, built INTEGER, confirmed INTEGER,
                                    listed TEXT, bucket INTEGER, unchanged INTEGER, renewed INTEGER DEFAULT 0,
                                    asked TEXT)
                WITHOUT ROWID;
            CREATE TEMP TABLE listed (suffix TEXT PRIMARY KEY, lastmod TEXT) WITHOUT ROWID;
        """)

    def _read_state(self) -> dict[str, Any]:
        try:
            state = json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            state = {}
        state = state if isinstance(state, dict) else {}
        for key, empty in (("distrusted", {}), ("sample_from", -1), ("sitemaps", {})):
            if not isinstance(state.get(key), type(empty)):
                state[key] = empty
        return state

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> "Freshness":
        config = crawl_config(crawler)
        settings = crawler.settings
        if not config.state_dir or not settings.get("PITH_ARCHIVE") or not settings.getbool("PITH_LISTED_DATES"):
            raise NotConfigured
        assert crawler.stats is not None  # noqa: S101 - made before the extensions
        freshness = cls(Path(config.state_dir), config.resolver, config.recheck_after_days, crawler.stats)
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
    def opened(self, writer: Any = None, committed: frozenset = frozenset()) -> None:
        """Read the held versions (one pass over the archive's history) and the
        confirmations that still name them. How far the listings were read is a cache of
        the archive: kept only while the archive holds the run that read them."""
        run = self.state.get("run")
        if run is not None and run not in committed:
            self.state["sitemaps"], self.listings_cached = {}, False
            self.stats.set_value(StatFamily.CACHE_DROPPED + "listings", 1)
            logger.warning("cache did not match the archive: the listings are read whole again")
        if writer is not None:
            rows = (
                (number.rpartition(":")[2], bundle, built, fetched, bucket_of(number.rpartition(":")[2]) >> 1)
                for number, bundle, built, fetched in writer.held_versions()
            )
            self.db.executemany(
                "INSERT OR REPLACE INTO held (suffix, bundle, built, confirmed, bucket) VALUES (?, ?, ?, ?, ?)", rows
            )
            self.db.execute(  # the later of fetched and confirmed; a confirmation in the future is due, and
                # a fetch stamped in the future (by a run whose clock was fast) counts until one is confirmed since
                "UPDATE held SET listed = c.listed, confirmed = CASE WHEN c.at > :now OR confirmed > :now THEN c.at "
                "ELSE MAX(confirmed, c.at) END "
                "FROM confirmed AS c WHERE c.suffix = held.suffix AND c.bundle = held.bundle",
                {"now": self.clock.now},
            )
        self.held_count = self.db.execute("SELECT COUNT(*) FROM held").fetchone()[0]
        if self.distrusted and self.held_count:
            logger.warning(
                "dates not trusted: %s listed changed records with old dates before; every record is asked again",
                self.source,
            )
            self.stats.set_value(Stat.LASTMOD_DISTRUSTED, 1)
        if not self.ready.called:
            self.ready.callback(None)

    def sample(self) -> list[str]:
        """The held records this run asks again whatever their dates: the next
        ``sample_size`` of the rotation (the held records in the order of their bucket,
        from where the last sample ended), and those not confirmed for
        ``PITH_RECHECK_AFTER_DAYS`` (or confirmed later than the clock now: by a run
        whose clock was fast)."""
        if not self.held_count or self.distrusted:
            return []
        size, start = sample_size(self.held_count), self.state["sample_from"]
        part = self.db.execute(
            "SELECT suffix, bucket FROM held WHERE bucket > ? ORDER BY bucket LIMIT ?", (start, size)
        )
        rotation = part.fetchall()
        if len(rotation) < size:  # round again from the start
            more = self.db.execute("SELECT suffix, bucket FROM held ORDER BY bucket LIMIT ?", (size - len(rotation),))
            rotation += [row for row in more.fetchall() if row[1] <= start]
        self.sample_to = rotation[-1][1] if rotation else start
        self.db.executemany(
            "UPDATE held SET asked = COALESCE(asked, ?) WHERE suffix = ?", ((Asked.SAMPLED, s) for s, _ in rotation)
        )
        now = self.clock.now
        due = self.db.execute(
            "UPDATE held SET asked = ? WHERE (confirmed IS NULL OR confirmed < ? OR confirmed > ?) AND asked IS NULL "
            "RETURNING suffix",
            (Asked.DUE, now - self.recheck_after, now),
        ).fetchall()
        logger.info(
            "asking again %d records of %d held (the rotating sample) and %d not confirmed for %.0f days",
            len(rotation),
            self.held_count,
            len(due),
            self.recheck_after / DAY,
        )
        return [suffix for suffix, _ in rotation] + [suffix for (suffix,) in due]

    def _asked(self, suffix: str, unchanged: bool | None, why: Asked | None) -> bool:
        """Note what the listing said of a held record and why it is asked (None: it is
        not); whether the sample found it changed already (``renewed``)."""
        row = self.db.execute(
            "UPDATE held SET unchanged = COALESCE(?, unchanged), asked = COALESCE(asked, ?) WHERE suffix = ? "
            "RETURNING renewed",
            (unchanged, why, suffix),
        ).fetchone()
        return bool(row and row[0])

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
        if listed is not None:
            self.db.execute("INSERT OR REPLACE INTO listed VALUES (?, ?)", (suffix, lastmod))
        row = self.db.execute("SELECT built, listed FROM held WHERE suffix = ?", (suffix,)).fetchone()
        if row is None:
            return True  # not held: new to the archive
        built, listed_then = self._then(*row)
        if listed is None:  # no date (or one in the future): as a run without dates
            changed = True
        else:
            changed = lastmod != listed_then if listed_then is not None else changed_since(listed, (built, False))
        if changed:
            self._asked(suffix, False, Asked.DATED)
            return True
        if self._asked(suffix, True, Asked.SWEPT if self.distrusted else None):  # the sample found it changed
            self._lied(suffix)
            self._asked(suffix, None, Asked.SWEPT)  # the lie distrusts the dates: it is asked
        return self.distrusted

    def wants_change(self, suffix: str, moment: str | None) -> bool:
        """Whether a Change List's entry must be asked: the record is not held, or the
        change's moment (the resolver's clock) is after the held version was built and
        after the date its listing gave when that version was last confirmed. The newest
        moment named is kept as its listed date, as a sitemap's."""
        self.listing_read = True
        listed = self.clock.credible(moment)
        row = self.db.execute("SELECT built, listed FROM held WHERE suffix = ?", (suffix,)).fetchone()
        if row is None:
            return True
        kept = self.db.execute("SELECT lastmod FROM listed WHERE suffix = ?", (suffix,)).fetchone()
        if listed is not None and (kept is None or listed[0] > (listed_date(kept[0]) or (0, False))[0]):
            self.db.execute("INSERT OR REPLACE INTO listed VALUES (?, ?)", (suffix, moment))
        built, listed_then = self._then(*row)
        then = listed_date(listed_then)
        changed = listed is None or (
            changed_since(listed, (built, False)) and (then is None or changed_since(listed, then))
        )
        if changed:
            self._asked(suffix, False, Asked.DATED)
        return changed

    def changes_read(self) -> int:
        """Every Change List was read: the held records they did not name changed, by
        their word. Those the sample found changed are lies. How many records it skips."""
        self.listing_read = True
        self.db.execute("UPDATE held SET unchanged = 1 WHERE unchanged IS NULL")
        for (suffix,) in self.db.execute("SELECT suffix FROM held WHERE unchanged = 1 AND renewed = 1").fetchall():
            self._lied(suffix)
        return self.db.execute("SELECT COUNT(*) FROM held WHERE unchanged = 1 AND asked IS NULL").fetchone()[0]

    def held(self, suffix: str) -> bool:
        """Whether the archive holds the record: a link to it in a re-run walking the
        sitemaps is left to them, which date it."""
        return (
            self.ready.called
            and self.db.execute("SELECT 1 FROM held WHERE suffix = ?", (suffix,)).fetchone() is not None
        )

    # --- what the run found -----------------------------------------------------------
    def settled(self, suffix: str | None, outcome: str) -> None:
        if outcome == "unchanged" and suffix:
            self._confirm(suffix, None)

    def item_scraped(self, item: Any) -> None:
        if not isinstance(item, BundleItem) or not item.answers or not item.verdict.ok or not item.suffix:
            return
        sha = item.verdict.bundle_sha256
        digest = bytes.fromhex(sha) if sha else None
        row = self.db.execute("SELECT bundle, unchanged FROM held WHERE suffix = ?", (item.suffix,)).fetchone()
        if row is not None and digest is not None and digest != row[0]:
            # a newer version: a lie when this run's listing dated it unchanged (or, not
            # read yet, when it does: ``wants``; never listed: when the walk ends, ``idle``)
            self.db.execute("UPDATE held SET renewed = 1 WHERE suffix = ?", (item.suffix,))
            if row[1]:
                self._lied(item.suffix)
        self._confirm(item.suffix, digest)

    def idle(self) -> None:
        """The walk ended: a held record found changed that no listing read in this run
        dated (its sitemap skipped because the index date did not move, or not listed
        at all) was claimed unchanged by that silence, and is a lie like a dated one.
        Every listing is then read again before the crawl may close."""
        if self.distrusted or self.bounded or not self.listing_read or not self.ready.called:
            return
        silent = self.db.execute(
            "UPDATE held SET unchanged = 1 WHERE renewed = 1 AND unchanged IS NULL RETURNING suffix"
        ).fetchall()
        for (suffix,) in sorted(silent):
            self._lied(suffix)
        if silent:
            raise DontCloseSpider

    def _confirm(self, suffix: str, bundle: bytes | None) -> None:
        """Confirmed now: the version fetched (``bundle``), or the held one (a 304)."""
        if bundle is None:
            row = self.db.execute("SELECT bundle FROM held WHERE suffix = ?", (suffix,)).fetchone()
            if row is None:
                return
            bundle = row[0]
        self.db.execute(
            "INSERT OR REPLACE INTO confirmed "
            "VALUES (?, ?, ?, (SELECT listed FROM held WHERE suffix = ? AND bundle = ?))",
            (suffix, bundle, self.clock.now, suffix, bundle),
        )

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

    def reads_sitemap(self, url: str, lastmod: str | None) -> bool:
        """Whether an index's child is read: not when the date the index gives it is
        the one it had when a committed run read it (never while the dates are
        distrusted, nor for a date in the future). The date is kept when it is read."""
        dated = lastmod if self.clock.credible(lastmod) is not None else None
        if not self.distrusted and self.ready.called and dated is not None and self.state["sitemaps"].get(url) == dated:
            self.listing_read = True
            return False
        self.state.setdefault("read", {})[url] = dated
        return True

    def _count(self) -> None:
        """Each held record once: not asked, or asked for its first reason; and the
        dates refused as in the future."""
        if self.clock.future_dates:
            self.stats.set_value(Stat.FUTURE_DATES, self.clock.future_dates)
        if not self.listing_read or not self.held_count:
            return
        counts = dict(self.db.execute("SELECT asked, COUNT(*) FROM held GROUP BY asked").fetchall())
        self.stats.set_value(Stat.RECORDS_HELD, self.held_count)
        self.stats.set_value(Stat.SKIPPED_BY_DATE, counts.get(None, 0))
        for why, key in ASKED_STATS.items():
            self.stats.set_value(key, counts.get(why, 0))

    def committed(self, run_id: str | None = None, **_: Any) -> None:
        """The run committed: keep its confirmations, the sitemaps it read, the rotation's
        next place and what it found of the dates. A record confirmed in this run keeps
        the date its listing gave it: the next run asks it only when that date moves."""
        if self.reason is None:
            self._count()
        self.db.execute(
            "UPDATE confirmed SET listed = l.lastmod FROM listed AS l WHERE l.suffix = confirmed.suffix AND at >= ?",
            (self.clock.now,),
        )
        self.db.commit()
        self.db.close()
        self.state["sitemaps"].update(self.state.pop("read", {}))
        self.state["run"] = str(run_id) if run_id is not None else None
        if not self.distrusted:  # the next run's sample follows this one's
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
        """The state, with what this run found of the dates: distrusted when one lied,
        trusted again after a run that asked every record and found none lying."""
        if self.lies:
            self.state["distrusted"][self.source] = {"lies": self.lies}
        elif self.swept and self.reason == "finished" and not self.bounded:
            self.state["distrusted"].pop(self.source, None)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, sort_keys=True))
        tmp.replace(self.state_path)
