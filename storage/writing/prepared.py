"""A verified bundle version as the archive writer takes it (``prepare``): its table rows
and what its history is judged by, worked out from the verdict alone. The rows are
spool lines left open for the few columns only the writer knows (the run, the fetch,
whether the version became current).

Preparing needs the parsed bundle; what it gives does not. A process that verified a
bundle can prepare it and hand over a few encoded lines: unpickling the parsed bundle
instead cost a sync's parent process more than all of its rows did.
"""

from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import cast

import orjson

from pith.verdict import Verdict
from storage.archive.history import Judgement, event_digest
from storage.archive.rows import alias_rows, event_rows, record_row, timestamp, verification_row, verified_bundle
from storage.transparency.attestations import Stored
from storage.writing.table_writer import RowEncoder, close_line

TableLine = tuple[str, tuple[str, bytes]]  # a table's name, and a row's partition and spool line
_ENCODERS = {table: RowEncoder(table) for table in ("records", "events", "aliases", "verifications")}
_UNSET = datetime.min.replace(tzinfo=timezone.utc)  # the writer's columns, left out
RECORD_COLUMNS = ("source_url", "fetched_at", "accepted_as_current", "run_id")  # the writer's


@dataclass(frozen=True, slots=True)
class Prepared:
    """A verified version, prepared (``prepare``)."""

    verdict: Verdict  # without its parsed bundle
    raw_sha256: str
    size: int
    events: frozenset[bytes]  # its events' digests
    built_at: datetime | None
    record: tuple[str, bytes]  # its ``records`` row, left open for RECORD_COLUMNS
    rows: tuple[tuple[str, str, bytes], ...]  # (table, partition, line) of its events and aliases, open for run_id

    @property
    def version(self) -> tuple[str, str, frozenset[bytes], datetime | None]:
        """What the history judges it by: its record, bundle digest, events and when it was built."""
        return cast(str, self.verdict.pith_number), cast(str, self.verdict.bundle_sha256), self.events, self.built_at

    def stored(self, raw_path: str) -> Stored:
        """What its storage attestation says, once stored at ``raw_path``."""
        number, bundle, canonical = self.verdict.pith_number, self.verdict.bundle_sha256, self.verdict.canonical_sha256
        return Stored(cast(str, number), cast(str, bundle), cast(str, canonical), raw_path, self.raw_sha256, self.size)

    def parts(self) -> list:
        """What a process that prepared it sends of it, as JSON values (never pickle
        between a crawl and its workers): all but the verdict and the digest, which the
        answer carries already (``from_parts``)."""
        built_at = None if self.built_at is None else self.built_at.isoformat()
        rows = [[table, partition, line.decode()] for table, partition, line in self.rows]
        events = [event.hex() for event in self.events]
        return [self.size, events, built_at, self.record[0], self.record[1].decode(), rows]

    @classmethod
    def from_parts(cls, parts: list, verdict: Verdict, raw_sha256: str) -> "Prepared":
        size, events, built_at, partition, record, rows = parts
        return cls(
            verdict=verdict,
            raw_sha256=raw_sha256,
            size=size,
            events=frozenset(bytes.fromhex(event) for event in events),
            built_at=None if built_at is None else datetime.fromisoformat(built_at),
            record=(partition, record.encode()),
            rows=tuple((table, row_partition, line.encode()) for table, row_partition, line in rows),
        )

    def lines(
        self, run_id: str, judged: Judgement, url: str, fetched_at: datetime, raw_path: str | None
    ) -> list[TableLine]:
        """Its lines in the run ``run_id``, as ``judged`` against the record's current
        version: its ``verifications`` row and, unless it was archived before
        (``raw_path`` None), its ``records``, ``events`` and ``aliases`` rows."""
        verification = verification_row(
            judged.verdict(self.verdict),
            url=url,
            raw_sha256=self.raw_sha256,
            size=self.size,
            raw_path=raw_path,
            fetched_at=fetched_at,
            run_id=run_id,
            duplicate=raw_path is None,
            equivocation=judged.equivocation,
        )
        lines: list[TableLine] = [("verifications", _ENCODERS["verifications"].encode(verification))]
        if raw_path is None:
            return lines
        current = judged.objection is None
        record = {"source_url": url, "fetched_at": verification["fetched_at"], "accepted_as_current": current}
        partition, head = self.record
        lines.append(("records", (partition, close_line(head, orjson.dumps({**record, "run_id": run_id})[1:]))))
        tail = orjson.dumps({"run_id": run_id})[1:]
        lines += [(table, (partition, close_line(head, tail))) for table, partition, head in self.rows]
        return lines


def prepare(verdict: Verdict, raw_sha256: str, size: int) -> Prepared:
    """``verdict``, a verified one of bytes of ``size`` hashing to ``raw_sha256``, prepared."""
    if not verdict.ok or None in (verdict.pith_number, verdict.bundle_sha256, verdict.canonical_sha256):
        raise ValueError("only a verified verdict, which names its record and hashes, is prepared")
    bundle = verified_bundle(verdict)
    record = record_row(verdict, raw_sha256=raw_sha256, url=None, fetched_at=_UNSET, run_id="")
    for name in RECORD_COLUMNS:
        del record[name]
    rows = [("events", row) for row in event_rows(verdict, run_id="")]
    rows += [("aliases", row) for row in alias_rows(verdict, run_id="")]
    for _, row in rows:
        del row["run_id"]
    return Prepared(
        verdict=replace(verdict, bundle=None),
        raw_sha256=raw_sha256,
        size=size,
        events=frozenset(event_digest(event["event_id"]) for event in bundle["events"]),
        built_at=timestamp(bundle.get("built_at")),
        record=_ENCODERS["records"].head(record),
        rows=tuple((table, *_ENCODERS[table].head(row)) for table, row in rows),
    )
