"""Append-only history per record.

A record's bundle may only grow: a new version must carry every event of the version
archived as current, and must not be built before it. One that does not (a fork, or a
rollback to older events) is kept as evidence but never becomes current.

The current version of a record is, among its ``records`` rows with
``accepted_as_current`` true (or missing, in files written before the column), the
one with the greatest ``(built_at, fetched_at)``; a null ``built_at`` sorts first.
Readers of the archive apply the same rule (docs/ARCHIVE.md).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from pith.reasons import Reason
from pith.split_view import Equivocation
from storage.runtime.page_cache import PAGE_CACHE_KIB

if TYPE_CHECKING:
    import pyarrow as pa

    from pith.verdict import Verdict

logger = logging.getLogger(__name__)

RECORD_COLUMNS = ("pith_number", "bundle_sha256", "built_at", "fetched_at", "accepted_as_current")
EVENT_COLUMNS = ("pith_number", "bundle_sha256", "event_id")
_EARLIEST = datetime.min.replace(tzinfo=timezone.utc)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)
_DIGEST = 32  # bytes of an event digest


def event_digest(event_id: str) -> bytes:
    """``sha256:<hex>`` as its 32 bytes (a verified event's id always has that form)."""
    return bytes.fromhex(event_id[7:])


@dataclass(slots=True)
class CurrentVersion:
    """A record's current version: what the next version is judged against."""

    bundle: bytes  # bundle_sha256 as 32 bytes
    built_at: datetime  # _EARLIEST when the bundle gave none
    fetched_at: datetime
    events: frozenset[bytes]  # its event ids, as digests

    @property
    def order(self) -> tuple[datetime, datetime]:
        return self.built_at, self.fetched_at


class _Sieve:
    """A Bloom filter of the keys a history holds (records' numbers, versions'
    digests): a key it never held is answered without asking the database. Each
    statement a crawl makes on Scrapy's thread hands the GIL to the upload threads and
    waits to get it back; on a first crawl, every look-up is of a record never seen.
    A fixed MiB: ~0 false hits at 10,000 records, 15% at a million (each a statement)."""

    _BITS = 1 << 23
    _MASK = _BITS - 1

    def __init__(self) -> None:
        self._bits = bytearray(self._BITS >> 3)

    def _spots(self, key: str | bytes) -> tuple[int, int, int]:
        mixed = hash(key)  # SipHash, keyed per process: a false hit costs a statement, never a wrong answer
        first, step = mixed & self._MASK, (mixed >> 32) | 1
        return first, (first + step) & self._MASK, (first + 2 * step) & self._MASK

    def add(self, key: str | bytes) -> None:
        for spot in self._spots(key):
            self._bits[spot >> 3] |= 1 << (spot & 7)

    def __contains__(self, key: str | bytes) -> bool:
        return all(self._bits[spot >> 3] >> (spot & 7) & 1 for spot in self._spots(key))


class History:
    """Every archived bundle version, and each record's current version with its event
    ids, in a temporary SQLite database (SQLite removes it when it is closed): its page
    cache is bounded, so a crawl of the whole registry holds the history on disk, not in
    memory. A record is one row, its current version's event digests one blob of 32
    bytes each. The database is private, never read after a crash, so it runs in one
    transaction from start to end: no statement pays for a commit of its own (a commit
    per statement was most of the writer's SQLite time).

    A crawl's look-ups and adds are one per bundle, on Scrapy's thread, where each
    statement costs a wait for the GIL: the versions a run adds wait in memory and are
    written ``_BATCH`` at a time, in two statements, and a look-up asks the database
    only what the waiting versions and the sieve cannot answer. Callers serialize their
    calls (the archive writer's lock)."""

    _BATCH = 128  # rows of 5 values: a statement within SQLite's oldest limit, 999 values

    def __init__(self) -> None:
        self.db = sqlite3.connect("", check_same_thread=False, isolation_level=None)
        self.db.executescript(f"""
            PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-{PAGE_CACHE_KIB};
            CREATE TABLE versions (bundle BLOB PRIMARY KEY) WITHOUT ROWID;
            CREATE TABLE current (number TEXT PRIMARY KEY, bundle BLOB, built_at INTEGER, fetched_at INTEGER,
                                  fresh INTEGER, events BLOB) WITHOUT ROWID;
            CREATE TRIGGER current_is_a_version AFTER INSERT ON current
                BEGIN INSERT OR IGNORE INTO versions VALUES (NEW.bundle); END;
        """)  # noqa: S608 - a constant integer, no outside text
        self.db.execute("BEGIN")
        self._sieve = _Sieve()
        self._waiting_current: dict[str, CurrentVersion] = {}  # by record: the latest made current
        self._waiting_versions: set[bytes] = set()  # every version added, current or not

    @classmethod
    def from_tables(cls, records: Iterable[pa.RecordBatch], events: Iterable[pa.RecordBatch]) -> "History":
        """From ``records`` rows (RECORD_COLUMNS; ``accepted_as_current`` may be
        absent), then ``events`` rows (EVENT_COLUMNS), each an iterable of pyarrow
        tables or record batches; only the current versions' events are kept."""
        history = cls()
        history.absorb(records, events)
        return history

    def absorb(self, records: Iterable[pa.RecordBatch], events: Iterable[pa.RecordBatch]) -> None:
        """Add committed rows (as in ``from_tables``): what other writers committed
        since this history was read."""
        self._write_waiting()
        for table in records:
            accepted = (
                table.column("accepted_as_current").to_pylist()
                if "accepted_as_current" in table.column_names
                else [None] * table.num_rows
            )
            for number, bundle, built, fetched, current in zip(
                *(table.column(name).to_pylist() for name in RECORD_COLUMNS[:4]), accepted
            ):
                digest = bytes.fromhex(bundle)
                self._sieve.add(digest)
                self.db.execute("INSERT OR IGNORE INTO versions VALUES (?)", (digest,))
                if current is not False:
                    self._offer(number, CurrentVersion(digest, built or _EARLIEST, fetched, frozenset()))
        for table in events:  # the events of the versions just made current (``fresh``)
            for number, bundle, event_id in zip(*(table.column(name).to_pylist() for name in EVENT_COLUMNS)):
                self.db.execute(
                    # || works on text, which keeps a blob's bytes as they are: cast back to a blob
                    "UPDATE current SET events = CAST(events || ? AS BLOB) WHERE number = ? AND bundle = ? AND fresh",
                    (event_digest(event_id), number, bytes.fromhex(bundle)),
                )
        self.db.execute("UPDATE current SET fresh = 0 WHERE fresh")
        logger.info("history: %d bundle versions, %d records", self._count("versions"), self._count("current"))

    def _count(self, table: str) -> int:
        count: int = self.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]  # noqa: S608 - table names from this module only
        return count

    def _offer(self, number: str, version: CurrentVersion) -> None:
        known = self.current(number)
        if known is None or (version.bundle != known.bundle and version.order > known.order):
            self._sieve.add(number)
            self.db.execute("INSERT OR REPLACE INTO current VALUES (?, ?, ?, ?, 1, ?)", _current_row(number, version))

    def _write_waiting(self) -> None:
        """Write the versions added since the last write, in two statements (one of
        each kind): the versions, then the current version of each record."""
        if self._waiting_versions:
            versions = list(self._waiting_versions)
            self.db.execute(
                f"INSERT OR IGNORE INTO versions VALUES {', '.join(['(?)'] * len(versions))}",  # noqa: S608 - placeholders only
                versions,
            )
        if self._waiting_current:
            rows = [
                value for number, version in self._waiting_current.items() for value in _current_row(number, version)
            ]
            self.db.execute(
                "INSERT OR REPLACE INTO current VALUES "  # noqa: S608 - placeholders only
                + ", ".join(["(?, ?, ?, ?, 0, ?)"] * len(self._waiting_current)),
                rows,
            )
        self._waiting_versions.clear()
        self._waiting_current.clear()

    def close(self) -> None:
        """Remove the database (SQLite deletes a temporary one when it closes)."""
        self.db.close()

    def archived(self, bundle_sha256: str) -> bool:
        self._write_waiting()
        return (
            self.db.execute("SELECT 1 FROM versions WHERE bundle = ?", (bytes.fromhex(bundle_sha256),)).fetchone()
            is not None
        )

    def current(self, pith_number: str) -> CurrentVersion | None:
        self._write_waiting()
        row = self.db.execute(
            "SELECT bundle, built_at, fetched_at, events FROM current WHERE number = ?", (pith_number,)
        ).fetchone()
        return None if row is None else _version(*row)

    def current_bundles(self) -> Iterator[tuple[str, str]]:
        """``(pith_number, bundle_sha256)`` of every record's current version, by Pith number."""
        self._write_waiting()
        for number, bundle in self.db.execute("SELECT number, bundle FROM current ORDER BY number"):
            yield number, bundle.hex()

    def current_dates(self) -> Iterator[tuple[str, bytes, int, int]]:
        """``(pith_number, bundle digest, built_at, fetched_at)`` of every record's current
        version, the times in microseconds since the epoch (``built_at`` the earliest
        time when the bundle gave none): what a scheduled re-crawl asks again by."""
        self._write_waiting()
        yield from self.db.execute("SELECT number, bundle, built_at, fetched_at FROM current")

    def look_up(self, pith_number: str, bundle_sha256: str) -> tuple[bool, CurrentVersion | None]:
        """Whether this bundle version is archived, and the record's current version:
        what a new version is judged by. The database is asked (in one statement) only
        what the waiting versions do not answer and the sieve does not rule out."""
        digest = bytes.fromhex(bundle_sha256)
        archived = digest in self._waiting_versions
        current = self._waiting_current.get(pith_number)
        if (current is None and pith_number in self._sieve) or (not archived and digest in self._sieve):
            stored, *row = self.db.execute(
                "SELECT EXISTS (SELECT 1 FROM versions WHERE bundle = ?), bundle, built_at, fetched_at, events "
                "FROM (SELECT 1) LEFT JOIN current ON number = ?",
                (digest, pith_number),
            ).fetchone()
            archived = archived or stored == 1
            if current is None and row[0] is not None:
                current = _version(*row)
        return archived, current

    def add(
        self,
        pith_number: str,
        bundle_sha256: str,
        events: frozenset[bytes],
        built_at: datetime | None,
        fetched_at: datetime,
        current: bool,
    ) -> None:
        """A version archived by this run; ``current`` when it passed ``objection_to``."""
        digest = bytes.fromhex(bundle_sha256)
        self._sieve.add(digest)
        self._waiting_versions.add(digest)
        if current:
            self._sieve.add(pith_number)
            self._waiting_current[pith_number] = CurrentVersion(digest, built_at or _EARLIEST, fetched_at, events)
        if len(self._waiting_versions) >= self._BATCH:
            self._write_waiting()


def objection_to(
    current: CurrentVersion | None,
    bundle_sha256: str,
    events: frozenset[bytes],
    built_at: datetime | None,
    fetched_at: datetime,
) -> str | None:
    """Why a version may not follow ``current`` (the record's current version, None
    when it has none), or None when it may (or is that version)."""
    if current is None or current.bundle.hex() == bundle_sha256:
        return None
    missing = len(current.events - events)
    if missing:
        return f"lacks {missing} of the {len(current.events)} events of the current version {current.bundle.hex()}"
    if (built_at or _EARLIEST, fetched_at) < current.order:
        return f"built before the current version {current.bundle.hex()}"
    return None


@dataclass(frozen=True, slots=True)
class Judgement:
    """How a version stands against its record's current version (``judge``)."""

    objection: str | None = None  # why it may not become current (None: it may)
    forked: bool = False  # objected to, and it holds events the current version lacks
    equivocation: Equivocation | None = None  # the copy it forks from, when it is a split view

    @property
    def relation(self) -> str | None:
        """Why it may not become current: it is "forked" or "stale" (older); None when it may."""
        if self.objection is None:
            return None
        return "forked" if self.forked else "stale"

    def verdict(self, verdict: Verdict) -> Verdict:
        """``verdict`` as the archive records it: reason ``equivocation`` for a split
        view, ``not_append_only`` for a version that may not become current."""
        if self.equivocation is not None:
            return replace(verdict, reason=Reason.EQUIVOCATION, path="events", detail=self.equivocation.detail)
        if self.objection is not None:
            return replace(verdict, reason=Reason.NOT_APPEND_ONLY, path="events", detail=self.objection)
        return verdict


_MAY_FOLLOW = Judgement()


def judge(
    current: CurrentVersion | None,
    bundle_sha256: str,
    events: frozenset[bytes],
    built_at: datetime | None,
    fetched_at: datetime,
    url: str,
    equivocation: Equivocation | None = None,
    forks_are_split_views: bool = False,
) -> Judgement:
    """Whether a version fetched from ``url`` may follow ``current`` (``objection_to``),
    whether it forks from it, and the split view it shows: ``equivocation`` when the
    caller found one, or, when ``forks_are_split_views`` (a mirror's copy), a fork."""
    objection = objection_to(current, bundle_sha256, events, built_at, fetched_at)
    if current is None or objection is None:
        return _MAY_FOLLOW if equivocation is None else Judgement(equivocation=equivocation)
    forked = bool(events - current.events)
    if forked and forks_are_split_views and equivocation is None:
        equivocation = Equivocation(
            None,
            current.bundle.hex(),
            f"{url} serves a history of the record that forks from the archive's current version "
            f"{current.bundle.hex()}: it {objection}",
        )
    return Judgement(objection, forked, equivocation)


def _current_row(number: str, version: CurrentVersion) -> tuple[str, bytes, int, int, bytes]:
    """A ``current`` row but its ``fresh`` flag."""
    return number, version.bundle, _micros(version.built_at), _micros(version.fetched_at), b"".join(version.events)


def _version(bundle: bytes, built_at: int, fetched_at: int, events: bytes) -> CurrentVersion:
    digests = frozenset(events[at : at + _DIGEST] for at in range(0, len(events), _DIGEST))
    return CurrentVersion(bundle, _from_micros(built_at), _from_micros(fetched_at), digests)


def _micros(when: datetime) -> int:
    """A time as whole microseconds since the epoch (exact, and ordered as the times)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return (when - _EPOCH) // _MICROSECOND


def _from_micros(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)
