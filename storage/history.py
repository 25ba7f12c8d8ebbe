"""Append-only history per record.

A record's bundle may only grow: a new version must carry every event of the version
archived as current, and must not be built before it. One that does not (a fork, or a
rollback to older events) is kept as evidence but never becomes current.

The current version of a record is, among its ``records`` rows with
``accepted_as_current`` true (or missing, in files written before the column), the
one with the greatest ``(built_at, fetched_at)``; a null ``built_at`` sorts first.
Readers of the archive apply the same rule (docs/ARCHIVE.md).
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timezone

logger = logging.getLogger(__name__)

RECORD_COLUMNS = ("pith_number", "bundle_sha256", "built_at", "fetched_at", "accepted_as_current")
EVENT_COLUMNS = ("pith_number", "bundle_sha256", "event_id")
_EARLIEST = datetime.min.replace(tzinfo=timezone.utc)


def event_digest(event_id: str) -> bytes:
    """``sha256:<hex>`` as its 32 bytes (a verified event's id always has that form)."""
    return bytes.fromhex(event_id[7:])


@dataclass(slots=True)
class Version:
    """A record's current version: what the next version is judged against."""
    bundle: bytes                  # bundle_sha256 as 32 bytes
    built_at: datetime             # _EARLIEST when the bundle gave none
    fetched_at: datetime
    events: frozenset[bytes]       # its event ids, as digests

    @property
    def order(self) -> tuple[datetime, datetime]:
        return self.built_at, self.fetched_at


class History:
    """Every archived bundle version, and each record's current version with its
    event ids: about a hundred bytes per version plus 40 per event of current ones."""

    def __init__(self):
        self._versions: set[bytes] = set()
        self._current: dict[str, Version] = {}

    @classmethod
    def from_tables(cls, records, events) -> "History":
        """From ``records`` rows (RECORD_COLUMNS; ``accepted_as_current`` may be
        absent), then ``events`` rows (EVENT_COLUMNS), each an iterable of pyarrow
        tables or record batches; only the current versions' events are kept."""
        history = cls()
        history.absorb(records, events)
        return history

    def absorb(self, records, events) -> None:
        """Add committed rows (as in ``from_tables``): what other writers committed
        since this history was read."""
        offered = set()
        for table in records:
            accepted = (table.column("accepted_as_current").to_pylist() if "accepted_as_current" in table.column_names
                        else [None] * table.num_rows)
            for number, bundle, built, fetched, current in zip(
                    *(table.column(name).to_pylist() for name in RECORD_COLUMNS[:4]), accepted):
                self._versions.add(bytes.fromhex(bundle))
                if current is not False and self._offer(number, Version(bytes.fromhex(bundle), built or _EARLIEST,
                                                                        fetched, frozenset())):
                    offered.add(number)
        found: dict[str, set[bytes]] = {}
        for table in events:
            for number, bundle, event_id in zip(*(table.column(name).to_pylist() for name in EVENT_COLUMNS)):
                version = self._current.get(number) if number in offered else None
                if version is not None and version.bundle.hex() == bundle:
                    found.setdefault(number, set()).add(event_digest(event_id))
        for number, ids in found.items():
            self._current[number].events = frozenset(ids)
        logger.info("history: %d bundle versions, %d records", len(self._versions), len(self._current))

    def _offer(self, number: str, version: Version) -> bool:
        known = self._current.get(number)
        if known is None or (version.bundle != known.bundle and version.order > known.order):
            self._current[number] = version
            return True
        return False

    def archived(self, bundle_sha256: str) -> bool:
        return bytes.fromhex(bundle_sha256) in self._versions

    def current(self, pith_number: str) -> Version | None:
        return self._current.get(pith_number)

    def objection(self, pith_number: str, bundle_sha256: str, events: frozenset[bytes],
                  built_at: datetime | None, fetched_at: datetime) -> str | None:
        """Why this version of the record may not be its current one (it is not
        append-only), or None when it may (or already is)."""
        current = self._current.get(pith_number)
        if current is None or current.bundle.hex() == bundle_sha256:
            return None
        missing = len(current.events - events)
        if missing:
            return (f"lacks {missing} of the {len(current.events)} events of the current version "
                    f"{current.bundle.hex()}")
        if (built_at or _EARLIEST, fetched_at) < current.order:
            return f"built before the current version {current.bundle.hex()}"
        return None

    def add(self, pith_number: str, bundle_sha256: str, events: frozenset[bytes], built_at: datetime | None,
            fetched_at: datetime, current: bool) -> None:
        """A version archived by this run; ``current`` when it passed ``objection``."""
        self._versions.add(bytes.fromhex(bundle_sha256))
        if current:
            self._current[pith_number] = Version(bytes.fromhex(bundle_sha256), built_at or _EARLIEST,
                                                 fetched_at, events)
