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
        (and queued for ``take``), SEEN after that, FULL once ``limit`` records are taken."""
        verdicts = []
        with self.db:
            for suffix in dict.fromkeys(suffixes):
                if self.db.execute("SELECT 1 FROM seen WHERE suffix = ?", (suffix,)).fetchone():
                    verdicts.append((suffix, SEEN))
                elif limit and self.count >= limit:
                    verdicts.append((suffix, FULL))
                else:
                    self.db.execute("INSERT INTO seen VALUES (?, ?)", (suffix, depth))
                    self.db.execute("INSERT INTO waiting (suffix, depth) VALUES (?, ?)", (suffix, depth))
                    self.count += 1
                    self.waiting += 1
                    verdicts.append((suffix, CLAIMED))
        return verdicts

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
