"""The records an archive holds, as one re-crawl sees them: each current version (when it
was built, when this machine last confirmed it, the date its listing gave then), what
this crawl's listings say of it, whether the crawl found it changed, and why it was asked.

One SQLite file in the state folder keeps the confirmations across crawls
(``confirmed``: a record's version, when it was confirmed, the date its listing gave);
the rest lives in temporary tables for the crawl. Every statement a re-crawl needs is here,
so ``crawler.scheduling.freshness`` decides and this module only remembers.
"""

import hashlib
import sqlite3
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path

from storage.runtime.page_cache import PAGE_CACHE_KIB

SAMPLE_FLOOR = 64  # records asked again each crawl, at least (within SAMPLE_CEILING)
SAMPLE_SHARE = 0.01  # ... or this share of the held records, whichever is larger
SAMPLE_CEILING = 0.02  # ... but never more than this share: a week's budget
SAMPLE_SLACK = 10  # ... or than this many, in an archive so small that 2% is fewer
ROTATION = 100  # crawls in which the sample has asked every held record, at most


class Asked(StrEnum):
    """Why a held record was asked in a re-crawl (the first reason counts)."""

    DATED = "dated"  # its listing dates it changed, gives no date, or a Change List names it
    SAMPLED = "sampled"  # this crawl's part of the rotating sample
    DUE = "due"  # not confirmed for PITH_RECHECK_AFTER_DAYS (or confirmed in the future)
    SWEPT = "swept"  # the dates are not trusted: every record is asked


def bucket_of(suffix: str) -> int:
    """A record's place in the sample's rotation: stable across crawls and machines."""
    return int.from_bytes(hashlib.sha256(suffix.encode()).digest()[:7], "big") >> 1


def sample_size(held: int) -> int:
    """How many held records a crawl asks again: a week's budget, and every record within
    ``ROTATION`` crawls."""
    size = min(max(SAMPLE_FLOOR, int(held * SAMPLE_SHARE)), max(SAMPLE_SLACK, int(held * SAMPLE_CEILING)))
    return min(held, max(size, -(-held // ROTATION)))


class HeldRecords:
    """One crawl's view of the held records (``load`` first), over ``path``."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(str(path))
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

    def load(self, versions: Iterable[tuple[str, bytes, int, int]], now: int) -> int:
        """Take each record's current version (``held_versions``) and the confirmation
        that still names it; how many records are held. A confirmation stamped after
        ``now`` is kept as it is (due), and a fetch stamped after ``now`` (by a crawl whose
        clock was fast) counts only until a confirmation since."""
        rows = (
            (number.rpartition(":")[2], bundle, built, fetched, bucket_of(number.rpartition(":")[2]))
            for number, bundle, built, fetched in versions
        )
        self.db.executemany(
            "INSERT OR REPLACE INTO held (suffix, bundle, built, confirmed, bucket) VALUES (?, ?, ?, ?, ?)", rows
        )
        self.db.execute(
            "UPDATE held SET listed = c.listed, confirmed = CASE WHEN c.at > :now OR confirmed > :now THEN c.at "
            "ELSE MAX(confirmed, c.at) END "
            "FROM confirmed AS c WHERE c.suffix = held.suffix AND c.bundle = held.bundle",
            {"now": now},
        )
        return self.db.execute("SELECT COUNT(*) FROM held").fetchone()[0]

    def version(self, suffix: str) -> tuple[int, str | None] | None:
        """A held record's build time and the date its listing gave when it was last
        confirmed (None: not held)."""
        return self.db.execute("SELECT built, listed FROM held WHERE suffix = ?", (suffix,)).fetchone()

    def holds(self, suffix: str) -> bool:
        return self.db.execute("SELECT 1 FROM held WHERE suffix = ?", (suffix,)).fetchone() is not None

    def listed(self, suffix: str, lastmod: str) -> None:
        """The date this crawl's listing gives a record, kept when the crawl confirms it."""
        self.db.execute("INSERT OR REPLACE INTO listed VALUES (?, ?)", (suffix, lastmod))

    def listed_now(self, suffix: str) -> str | None:
        row = self.db.execute("SELECT lastmod FROM listed WHERE suffix = ?", (suffix,)).fetchone()
        return row[0] if row else None

    def asked(self, suffix: str, unchanged: bool | None, why: Asked | None) -> bool:
        """Note what the listing said of a held record and why it is asked (None: it is
        not; the first reason counts); whether the crawl found it changed already."""
        row = self.db.execute(
            "UPDATE held SET unchanged = COALESCE(?, unchanged), asked = COALESCE(asked, ?) WHERE suffix = ? "
            "RETURNING renewed",
            (unchanged, why, suffix),
        ).fetchone()
        return bool(row and row[0])

    def rotation(self, start: int, size: int) -> list[tuple[str, int]]:
        """The next ``size`` held records by bucket after ``start``, round again from the
        first when the last is passed; each asked as sampled."""
        rows = self.db.execute(
            "SELECT suffix, bucket FROM held WHERE bucket > ? ORDER BY bucket LIMIT ?", (start, size)
        ).fetchall()
        if len(rows) < size:
            more = self.db.execute("SELECT suffix, bucket FROM held ORDER BY bucket LIMIT ?", (size - len(rows),))
            rows += [row for row in more.fetchall() if row[1] <= start]
        self.db.executemany(
            "UPDATE held SET asked = COALESCE(asked, ?) WHERE suffix = ?", ((Asked.SAMPLED, s) for s, _ in rows)
        )
        return rows

    def due(self, before: int, now: int) -> list[str]:
        """The records not asked yet whose confirmation is older than ``before``, missing,
        or later than ``now``; each asked as due."""
        rows = self.db.execute(
            "UPDATE held SET asked = ? WHERE (confirmed IS NULL OR confirmed < ? OR confirmed > ?) AND asked IS NULL "
            "RETURNING suffix",
            (Asked.DUE, before, now),
        ).fetchall()
        return [suffix for (suffix,) in rows]

    def renewed(self, suffix: str, digest: bytes) -> bool | None:
        """The crawl found a record's version ``digest``: when it is a newer one than held,
        whether its listing dated it unchanged (None: not held, or the same version)."""
        row = self.db.execute("SELECT bundle, unchanged FROM held WHERE suffix = ?", (suffix,)).fetchone()
        if row is None or digest == row[0]:
            return None
        self.db.execute("UPDATE held SET renewed = 1 WHERE suffix = ?", (suffix,))
        return bool(row[1])

    def silent(self) -> list[str]:
        """The records no listing dated whose change the crawl found: claimed unchanged by
        that silence, and marked so."""
        rows = self.db.execute("UPDATE held SET unchanged = 1 WHERE renewed = 1 AND unchanged IS NULL RETURNING suffix")
        return sorted(suffix for (suffix,) in rows.fetchall())

    def unnamed(self) -> tuple[list[str], int]:
        """Every Change List read: the records they did not name are claimed unchanged.
        Those found changed, and how many are not asked."""
        self.db.execute("UPDATE held SET unchanged = 1 WHERE unchanged IS NULL")
        lies = self.db.execute("SELECT suffix FROM held WHERE unchanged = 1 AND renewed = 1").fetchall()
        skipped = self.db.execute("SELECT COUNT(*) FROM held WHERE unchanged = 1 AND asked IS NULL").fetchone()[0]
        return [suffix for (suffix,) in lies], skipped

    def confirm(self, suffix: str, bundle: bytes | None, now: int) -> None:
        """Confirmed ``now``: the version fetched (``bundle``), or the held one (a 304)."""
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

    def counts(self) -> dict[Asked | None, int]:
        """Held records by why they were asked (None: not asked)."""
        rows = self.db.execute("SELECT asked, COUNT(*) FROM held GROUP BY asked").fetchall()
        return {(Asked(why) if why else None): count for why, count in rows}

    def keep(self, since: int) -> None:
        """Save the crawl's confirmations, each with the date this crawl's listing gave it
        (the next crawl asks it only when that date moves), and close."""
        self.db.execute(
            "UPDATE confirmed SET listed = l.lastmod FROM listed AS l WHERE l.suffix = confirmed.suffix AND at >= ?",
            (since,),
        )
        self.db.commit()
        self.db.close()
