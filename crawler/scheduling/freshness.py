"""What a scheduled re-run asks for: the records that changed, by the listing's dates,
and a check that those dates tell the truth.

A resolver's sitemaps date each record (``<lastmod>``). A record the archive holds is
not asked for again when its listed date is before the day its held version was built,
or is that day but the version was confirmed (fetched, or heard unchanged) after it:
dates may be days only, so a listed day on or after the last confirmation counts as
maybe changed. A record not held, or listed with no date, is asked for as always.

Dates can lie. Each run also asks again, conditionally, a rotating sample of the held
records (at least 64 or 1%, at most 2% of them or 10, so every record is asked within
about 100 runs), and every record not confirmed for ``PITH_RECHECK_AFTER_DAYS``. When one
of those turns out changed although its date said it was not, the source's dates are
distrusted: ``dates_distrusted`` is sent (the sitemap walk reads its listings again and
asks every record), ``pith/lastmod_distrusted`` is set, and the distrust is kept in the
crawl's state folder for later runs until a run that asked every record finds no lying
date. A lying date may cost requests, never a record.

The truth is the archive: the held versions are read from the archive writer when the
archive is opened (``archive_opened``); confirmations and the sample's place are kept in
the state folder, saved when the run commits, and count only for the version they
confirmed. Until the archive is opened (``ready``), no record is skipped.
"""

import hashlib
import json
import logging
import sqlite3
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.statscollectors import StatsCollector
from twisted.internet.defer import Deferred

from storage.runtime.page_cache import PAGE_CACHE_KIB

from .. import signals as pith_signals
from ..crawl_config import crawl_config
from ..items import BundleItem
from ..stat_keys import Stat

logger = logging.getLogger(__name__)

SAMPLE_FLOOR = 64  # records asked again each run, at least (within SAMPLE_CEILING)
SAMPLE_SHARE = 0.01  # ... or this share of the held records, whichever is larger
SAMPLE_CEILING = 0.02  # ... but never more than this share: a week's budget
SAMPLE_SLACK = 10  # ... or than this many, in an archive so small that 2% is fewer
ROTATION = 100  # runs in which the sample has asked every held record, at most
_DAY_MICROS = 86_400_000_000


def _micros(when: datetime) -> int:
    return int(when.timestamp() * 1_000_000)


def listed_date(text: str | None) -> tuple[int, bool] | None:
    """A W3C datetime (``2026-05-24``, ``2026-05-24T10:00:00Z``) as microseconds since
    the epoch, and whether it is a day only; None when absent or unreadable."""
    if not text:
        return None
    text = text.strip()
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return _micros(datetime(day.year, day.month, day.day, tzinfo=timezone.utc)), True
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return _micros(when if when.tzinfo else when.replace(tzinfo=timezone.utc)), False


def changed_since(listed: tuple[int, bool], then: tuple[int, bool]) -> bool:
    """Whether a listed date (``listed_date``) is after ``then``; when either is a day
    only, the same day counts as maybe changed."""
    when, day_only = listed
    reference, reference_day_only = then
    return when >= reference - reference % _DAY_MICROS if day_only or reference_day_only else when > reference


def bucket_of(suffix: str) -> int:
    """A record's place in the sample's rotation: stable across runs and machines."""
    return int.from_bytes(hashlib.sha256(suffix.encode()).digest()[:7], "big")


def sample_buckets(held: int) -> int:
    """In how many parts the held records are asked again, one part a run."""
    size = min(max(SAMPLE_FLOOR, int(held * SAMPLE_SHARE)), max(SAMPLE_SLACK, int(held * SAMPLE_CEILING)))
    return max(1, min(ROTATION, held // max(1, size)))


class Freshness:
    """Extension: which held records a run asks for, and whether their dates lie."""

    crawler: Crawler

    def __init__(self, state_dir: Path, source: str, recheck_after_days: float, stats: StatsCollector) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.state_path = state_dir / "freshness.json"
        self.source = source
        self.recheck_after = int(recheck_after_days * _DAY_MICROS)
        self.stats = stats
        self.rerun = self.state_path.exists()  # a run before this one committed here
        self.state: dict[str, Any] = self._read_state()
        self.distrusted = source in self.state["distrusted"]
        self.swept = self.distrusted  # a run that asks every record: it may clear the distrust
        self.lies = 0
        self.reason: str | None = None  # why the crawl ended
        self.saved = False  # the run committed, and its state was saved
        self.bounded = False  # --max-records: a run that may not ask every record
        self.held_count = 0  # records the archive holds (once it is opened)
        self.ready: Deferred = Deferred()
        self.db = sqlite3.connect(str(state_dir / "confirmed.sqlite3"))
        self.db.executescript(f"""
            PRAGMA cache_size=-{PAGE_CACHE_KIB};
            CREATE TABLE IF NOT EXISTS confirmed (suffix TEXT PRIMARY KEY, bundle BLOB, at INTEGER, listed TEXT)
                WITHOUT ROWID;
            CREATE TEMP TABLE held (suffix TEXT PRIMARY KEY, bundle BLOB, built INTEGER, confirmed INTEGER,
                                    listed TEXT, bucket INTEGER, unchanged INTEGER, renewed INTEGER DEFAULT 0)
                WITHOUT ROWID;
            CREATE TEMP TABLE listed (suffix TEXT PRIMARY KEY, lastmod TEXT) WITHOUT ROWID;
        """)
        self.started = _micros(datetime.now(timezone.utc))

    def _read_state(self) -> dict[str, Any]:
        try:
            state = json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            state = {}
        state = state if isinstance(state, dict) else {}
        for key, empty in (("distrusted", {}), ("cursor", 0), ("sitemaps", {})):
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
        crawler.signals.connect(freshness.committed, signal=pith_signals.archive_committed)
        crawler.signals.connect(freshness.closed, signal=signals.spider_closed)
        return freshness

    # --- the archive's held versions ------------------------------------------------
    def opened(self, writer: Any = None) -> None:
        """Read the held versions (one pass over the archive's history) and the
        confirmations that still name them."""
        if writer is not None:
            rows = (
                (number.rpartition(":")[2], bundle, built, fetched, bucket_of(number.rpartition(":")[2]) >> 1)
                for number, bundle, built, fetched in writer.held_versions()
            )
            self.db.executemany(
                "INSERT OR REPLACE INTO held (suffix, bundle, built, confirmed, bucket) VALUES (?, ?, ?, ?, ?)", rows
            )
            self.db.execute(
                "UPDATE held SET confirmed = MAX(confirmed, c.at), listed = c.listed FROM confirmed AS c "
                "WHERE c.suffix = held.suffix AND c.bundle = held.bundle"
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
        """The held records this run asks again whatever their dates: this run's part of
        the rotation, and those not confirmed for ``PITH_RECHECK_AFTER_DAYS``."""
        if not self.held_count or self.distrusted:
            return []
        parts = sample_buckets(self.held_count)
        part = self.state["cursor"] % parts
        due = _micros(datetime.now(timezone.utc)) - self.recheck_after
        rows = self.db.execute(
            "SELECT suffix, bucket % ? = ? FROM held WHERE bucket % ? = ? OR confirmed < ?",
            (parts, part, parts, part, due),
        ).fetchall()
        stale = sum(1 for _, in_part in rows if not in_part)
        self.stats.set_value(Stat.RECHECK_SAMPLE, len(rows) - stale)
        self.stats.set_value(Stat.RECHECK_DUE, stale)
        logger.info(
            "asking again %d records of %d held (part %d of %d) and %d not confirmed for %.0f days",
            len(rows) - stale,
            self.held_count,
            part + 1,
            parts,
            stale,
            self.recheck_after / _DAY_MICROS,
        )
        return [suffix for suffix, _ in rows]

    def wants(self, suffix: str, lastmod: str | None) -> bool:
        """Whether a listed record must be asked for (see the module): the date its
        listing gives it moved since the held version was confirmed, or (never
        confirmed with a date) it is not before the day that version was built."""
        if not self.ready.called:
            return True
        if lastmod is not None:
            self.db.execute("INSERT OR REPLACE INTO listed VALUES (?, ?)", (suffix, lastmod))
        row = self.db.execute("SELECT built, listed FROM held WHERE suffix = ?", (suffix,)).fetchone()
        listed = listed_date(lastmod)
        if row is None or listed is None:
            return True  # not held (new to the archive), or no date: as a run without dates
        built, listed_then = row
        changed = lastmod != listed_then if listed_then is not None else changed_since(listed, (built, False))
        renewed = self.db.execute(
            "UPDATE held SET unchanged = ? WHERE suffix = ? RETURNING renewed", (not changed, suffix)
        ).fetchone()[0]
        if changed:
            return True
        if renewed:  # asked already this run (the sample), and found changed
            self._lied(suffix)
        if self.distrusted:
            return True
        self.stats.inc_value(Stat.SKIPPED_BY_DATE)
        return False

    def wants_change(self, suffix: str, moment: str | None) -> bool:
        """Whether a Change List's entry must be asked: the record is not held, or the
        change's moment (the resolver's clock) is after the held version was built and
        after the date its listing gave when that version was last confirmed. The newest
        moment named is kept as its listed date, as a sitemap's."""
        listed = listed_date(moment)
        row = self.db.execute("SELECT built, listed FROM held WHERE suffix = ?", (suffix,)).fetchone()
        if row is None:
            return True
        kept = self.db.execute("SELECT lastmod FROM listed WHERE suffix = ?", (suffix,)).fetchone()
        if listed is not None and (kept is None or listed[0] > (listed_date(kept[0]) or (0, False))[0]):
            self.db.execute("INSERT OR REPLACE INTO listed VALUES (?, ?)", (suffix, moment))
        built, listed_then = row
        then = listed_date(listed_then)
        changed = listed is None or (
            changed_since(listed, (built, False)) and (then is None or changed_since(listed, then))
        )
        if changed:
            self.db.execute("UPDATE held SET unchanged = 0 WHERE suffix = ?", (suffix,))
        return changed

    def changes_read(self) -> int:
        """Every Change List was read: the held records they did not name changed, by
        their word. Those the sample found changed are lies. How many records it skips."""
        self.db.execute("UPDATE held SET unchanged = 1 WHERE unchanged IS NULL")
        for (suffix,) in self.db.execute("SELECT suffix FROM held WHERE unchanged = 1 AND renewed = 1").fetchall():
            self._lied(suffix)
        skipped = self.db.execute("SELECT COUNT(*) FROM held WHERE unchanged = 1").fetchone()[0]
        if not self.distrusted:
            self.stats.inc_value(Stat.SKIPPED_BY_DATE, skipped)
        return skipped

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
            # read yet, when it does: ``wants``)
            self.db.execute("UPDATE held SET renewed = 1 WHERE suffix = ?", (item.suffix,))
            if row[1]:
                self._lied(item.suffix)
        self._confirm(item.suffix, digest)

    def _confirm(self, suffix: str, bundle: bytes | None) -> None:
        """Confirmed now: the version fetched (``bundle``), or the held one (a 304)."""
        now = _micros(datetime.now(timezone.utc))
        if bundle is None:
            row = self.db.execute("SELECT bundle FROM held WHERE suffix = ?", (suffix,)).fetchone()
            if row is None:
                return
            bundle = row[0]
        self.db.execute(
            "INSERT OR REPLACE INTO confirmed "
            "VALUES (?, ?, ?, (SELECT listed FROM held WHERE suffix = ? AND bundle = ?))",
            (suffix, bundle, now, suffix, bundle),
        )

    def _lied(self, suffix: str) -> None:
        self.lies += 1
        self.stats.inc_value(Stat.LASTMOD_LIES)
        if self.distrusted:
            return
        self.distrusted = True
        self.stats.set_value(Stat.LASTMOD_DISTRUSTED, 1)
        self.stats.set_value(Stat.SKIPPED_BY_DATE, 0)  # the sitemaps are read again: every record is asked
        logger.warning(
            "dates not trusted: %s changed although %s listed it unchanged; every record is asked again",
            suffix,
            self.source,
        )
        self.crawler.signals.send_catch_log(pith_signals.dates_distrusted, base=self.source)

    def remember_sitemap(self, url: str, lastmod: str | None) -> None:
        """A sitemap read, with the date its index gave it (kept when the run commits)."""
        self.state.setdefault("read", {})[url] = lastmod

    def sitemap_unchanged(self, url: str, lastmod: str | None) -> bool:
        """Whether an index's child need not be read: the date the index gives it is the
        one it had when a committed run read it (never while the dates are distrusted)."""
        return (
            not self.distrusted
            and self.ready.called
            and lastmod is not None
            and self.state["sitemaps"].get(url) == lastmod
        )

    def committed(self, **_: Any) -> None:
        """The run committed: keep its confirmations, the sitemaps it read, the rotation's
        next place and what it found of the dates. A record confirmed in this run keeps
        the date its listing gave it: the next run asks it only when that date moves."""
        self.db.execute(
            "UPDATE confirmed SET listed = l.lastmod FROM listed AS l WHERE l.suffix = confirmed.suffix AND at >= ?",
            (self.started,),
        )
        self.db.commit()
        self.db.close()
        self.state["sitemaps"].update(self.state.pop("read", {}))
        self.state["cursor"] = self.state["cursor"] + (1 if not self.distrusted else 0)
        self.saved = True
        self._save()

    def closed(self, reason: str | None = None) -> None:
        """The crawl ended: why (its commit may come before or after)."""
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
