"""The records a single-process crawl has taken, kept on disk so memory stays flat.

One row per record suffix (with the link depth it was found at) in SQLite, and a
queue of the records taken but not yet requested, from which the local scheduler
(``crawler.scheduling.local_scheduler``) takes a few each time Scrapy's engine has room, so
neither the seen-set nor the crawl's frontier grows in memory with the records found.
The database is in the job directory with ``--jobdir``, so a resumed crawl knows what
it took and what still waits, else a temporary one that SQLite deletes when it closes.
Its page cache is bounded, so a million records cost disk, not memory. A crawl sharing
a Redis frontier keeps both in Redis instead (``crawler.frontier``).
"""

import logging
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from scrapy.settings import BaseSettings
from scrapy.utils.job import job_dir

from storage.runtime.page_cache import PAGE_CACHE_KIB

from .claims import CLAIMED, FULL, SEEN

logger = logging.getLogger(__name__)

FILE_NAME = "pith-seen.sqlite3"  # in the job directory
BATCH = 500  # records looked up or added in one statement (SQLite binds up to 32,766 values)


class SeenStore:
    """The records taken (``seen``) and those taken but not yet requested (``waiting``)."""

    def __init__(self, path: str = ""):
        """``path`` "" is a private temporary database, removed when closed."""
        self.path = path
        self.db: Any = None  # a sqlite3.Connection once open
        self.count = 0
        self.waiting = 0

    @classmethod
    def for_job(cls, settings: BaseSettings) -> "SeenStore":
        """In the job directory with ``--jobdir`` (a resumed crawl knows what it took),
        else a temporary database."""
        jobdir = job_dir(settings)
        return cls(str(Path(jobdir) / FILE_NAME) if jobdir else "")

    def open(self) -> int:
        """Open (or create) the database; how many records were taken before (a resumed job)."""
        self.db = sqlite3.connect(self.path)
        self.db.execute("PRAGMA synchronous=OFF")  # a killed crawl resets its jobdir (crawler.scheduling.jobdir)
        self.db.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
        self.db.execute("CREATE TABLE IF NOT EXISTS seen (suffix TEXT PRIMARY KEY, depth INTEGER) WITHOUT ROWID")
        self.db.execute("CREATE TABLE IF NOT EXISTS waiting (seq INTEGER PRIMARY KEY, suffix TEXT, depth INTEGER)")
        self.count = self.db.execute("SELECT COUNT(*) FROM seen").fetchone()[0]
        self.waiting = self.db.execute("SELECT COUNT(*) FROM waiting").fetchone()[0]
        if self.count:
            logger.info("resuming: %d records were taken before, %d wait", self.count, self.waiting)
        return self.count

    def claim(self, suffixes: Iterable[str], depth: int, limit: int = 0) -> list[tuple[str, str]]:
        """``(suffix, verdict)`` for each suffix once, in order: CLAIMED the first time
        (and queued for ``take``), SEEN after that, FULL once ``limit`` records are taken.
        A few statements for the lot, not three a record: each statement on Scrapy's
        thread hands the GIL to the crawl's other threads and waits to get it back."""
        named = list(dict.fromkeys(suffixes))
        verdicts: list[tuple[str, str]] = []
        claimed: list[tuple[str, int]] = []
        with self.db:
            seen = self._seen(named)
            for suffix in named:
                if suffix in seen:
                    verdicts.append((suffix, SEEN))
                elif limit and self.count + len(claimed) >= limit:
                    verdicts.append((suffix, FULL))
                else:
                    claimed.append((suffix, depth))
                    verdicts.append((suffix, CLAIMED))
            self._insert("seen (suffix, depth)", claimed)
            self._insert("waiting (suffix, depth)", claimed)
        self.count += len(claimed)
        self.waiting += len(claimed)
        return verdicts

    def _seen(self, suffixes: list[str]) -> set[str]:
        """Those of ``suffixes`` taken before, BATCH a statement."""
        seen: set[str] = set()
        for start in range(0, len(suffixes), BATCH):
            batch = suffixes[start : start + BATCH]
            marks = ", ".join("?" * len(batch))
            rows = self.db.execute(f"SELECT suffix FROM seen WHERE suffix IN ({marks})", batch)  # noqa: S608 - placeholders only, values bound
            seen.update(suffix for (suffix,) in rows)
        return seen

    def _insert(self, into: str, rows: list[tuple[str, int]]) -> None:
        """``rows`` into ``into`` (a table and its two columns), BATCH a statement: one
        statement of many rows, since ``executemany`` gives up the GIL for every row."""
        for start in range(0, len(rows), BATCH):
            batch = rows[start : start + BATCH]
            values = ", ".join(["(?, ?)"] * len(batch))
            self.db.execute(f"INSERT INTO {into} VALUES {values}", [value for row in batch for value in row])  # noqa: S608 - constant names, values bound

    def take(self, most: int) -> list[tuple[str, int]]:
        """Up to ``most`` claimed records not yet requested, ``(suffix, depth)`` each, the
        first claimed first."""
        with self.db:
            rows = self.db.execute("SELECT seq, suffix, depth FROM waiting ORDER BY seq LIMIT ?", (most,)).fetchall()
            if rows:
                self.db.execute("DELETE FROM waiting WHERE seq <= ?", (rows[-1][0],))
        self.waiting -= len(rows)
        return [(suffix, depth) for _, suffix, depth in rows]

    def put_back(self, records: Iterable[tuple[str, int]]) -> None:
        """Records taken but never requested wait again (a crawl closing before it got to
        them), first in line."""
        records = list(records)
        if not records:
            return
        with self.db:
            first = self.db.execute("SELECT COALESCE(MIN(seq), 1) FROM waiting").fetchone()[0]
            self.db.executemany(
                "INSERT INTO waiting VALUES (?, ?, ?)",
                [(first - len(records) + index, suffix, depth) for index, (suffix, depth) in enumerate(records)],
            )
        self.waiting += len(records)

    def __len__(self) -> int:
        return self.count

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
