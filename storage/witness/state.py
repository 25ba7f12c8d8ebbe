"""A witness's durable view: the latest checkpoint it cosigned of each log, and the
evidence of what it refused (a checkpoint that forks the log it holds), in one SQLite
file. Each advance checks the old size and writes in one transaction, so two
concurrent requests cannot both move a log."""

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

MAX_SIZE = (1 << 63) - 1  # an SQLite integer; no log comes near it
SCHEMA = """
create table if not exists logs (origin text primary key, size integer not null, root blob not null,
                                 note text not null, cosigned_at integer not null);
create table if not exists evidence (origin text not null, received_at integer not null, reason text not null,
                                     request blob not null);
"""


class StaleOld(Exception):
    """The request's old size is not the size the witness holds (``held``)."""

    def __init__(self, held: int):
        super().__init__(f"the witness holds {held} leaves")
        self.held = held


@dataclass(frozen=True)
class View:
    size: int
    root: bytes
    cosigned_at: int


class WitnessState:
    def __init__(self, path: str | Path):
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("pragma journal_mode=wal")
        self._db.execute("pragma synchronous=full")
        self._db.executescript(SCHEMA)

    def view(self, origin: str) -> View | None:
        row = self._db.execute("select size, root, cosigned_at from logs where origin = ?", (origin,)).fetchone()
        return View(row[0], bytes(row[1]), row[2]) if row else None

    def advance(self, origin: str, old: int, size: int, root: bytes, note: str, at: int) -> None:
        """Move the log from ``old`` leaves to ``size``; StaleOld if it is not at ``old``."""
        self._db.execute("begin immediate")
        try:
            row = self._db.execute("select size from logs where origin = ?", (origin,)).fetchone()
            held = row[0] if row else 0
            if held != old:
                raise StaleOld(held)
            self._db.execute(
                "insert into logs values (?, ?, ?, ?, ?) on conflict(origin) do update set size = excluded.size, "
                "root = excluded.root, note = excluded.note, cosigned_at = excluded.cosigned_at",
                (origin, size, root, note, at),
            )
        except BaseException:
            self._db.execute("rollback")
            raise
        self._db.execute("commit")

    def keep_evidence(self, origin: str, reason: str, request: bytes) -> None:
        self._db.execute("insert into evidence values (?, ?, ?, ?)", (origin, int(time.time()), reason, request))

    def evidence(self) -> list[tuple[str, str, bytes]]:
        rows = self._db.execute("select origin, reason, request from evidence order by rowid").fetchall()
        return [(origin, reason, bytes(request)) for origin, reason, request in rows]

    def close(self) -> None:
        self._db.close()
