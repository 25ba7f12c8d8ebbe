"""The ``captures`` rows of one WARC file (``capture_row``: Common Crawl's index names),
spooled on disk until the file is stored.

A row is written when its response record is; a bundle's row waits (in memory, a
bounded number of them) for the verdict the pipeline adds a moment later, so that the
row carries ``pith_number``, ``bundle_sha256`` and ``status``. A row that waited too
long, or that no verdict concerns (pages, key documents, errors), is written without.
Memory holds the waiting rows only, however large the file grows.
"""

import json
import logging
import os
import tempfile
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

WAITING_MAX = 4096  # rows waiting for a verdict; past it the oldest is written without
BATCH_ROWS = 10_000  # rows handed to the table writer at once


@dataclass(frozen=True)
class Position:
    """Where a record landed: what the ``captures`` table and a CDXJ line point to."""

    filename: str
    offset: int
    length: int
    record_id: str


def _subset(status: int) -> str:
    """Common Crawl's split of its index: successful captures, and the rest."""
    return "warc" if 200 <= status < 300 or status == 304 else "crawldiagnostics"


def _mime(headers: list[tuple[str, str]]) -> str | None:
    for name, value in headers:
        if name.lower() == "content-type":
            return value.split(";")[0].strip().lower() or None
    return None


def capture_row(
    url: str,
    fetched_at: datetime,
    status: int,
    digest: str | None,
    headers: list[tuple[str, str]],
    position: Position,
    record_type: str,
) -> dict:
    """The ``captures`` row of a response or revisit record (its verdict comes later)."""
    return {
        "url": url,
        "fetch_time": fetched_at,
        "fetch_status": status,
        "content_digest": digest if status != 304 else None,
        "content_mime_type": _mime(headers),
        "warc_filename": position.filename,
        "warc_record_offset": position.offset,
        "warc_record_length": position.length,
        "warc_record_id": position.record_id,
        "warc_record_type": record_type,
        "pith_number": None,
        "bundle_sha256": None,
        "status": None,
        "subset": _subset(status),
    }


class CaptureSpool:
    def __init__(self, spool_dir: str):
        fd, name = tempfile.mkstemp(prefix="captures-", suffix=".jsonl", dir=spool_dir)
        self.path = Path(name)
        self._handle = os.fdopen(fd, "w", encoding="utf-8")
        self._waiting: OrderedDict[str, dict] = OrderedDict()  # by URL: its latest row
        self.rows = 0

    def add(self, row: dict) -> None:
        """A response or revisit record's row, which may still get a verdict."""
        earlier = self._waiting.pop(row["url"], None)
        if earlier is not None:
            self._write(earlier)
        self._waiting[row["url"]] = row
        if len(self._waiting) > WAITING_MAX:
            self._write(self._waiting.popitem(last=False)[1])

    def judge(self, url: str, **verdict: Any) -> str | None:
        """Give the waiting row of ``url`` its verdict and write it; returns its
        record id (None when no row of that URL waits)."""
        row = self._waiting.pop(url, None)
        if row is None:
            return None
        row.update(verdict)
        self._write(row)
        return row["warc_record_id"]

    def close(self) -> None:
        for row in self._waiting.values():
            self._write(row)
        self._waiting.clear()
        self._handle.close()

    def discard(self) -> None:
        self._handle.close()
        self.path.unlink(missing_ok=True)

    def _write(self, row: dict) -> None:
        self._handle.write(json.dumps({**row, "fetch_time": row["fetch_time"].isoformat()}) + "\n")
        self.rows += 1


def read_batches(path: Path) -> Iterator[list[dict]]:
    """The spooled rows, in batches, times typed again."""
    batch: list[dict] = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            row["fetch_time"] = datetime.fromisoformat(row["fetch_time"])
            batch.append(row)
            if len(batch) >= BATCH_ROWS:
                yield batch
                batch = []
    if batch:
        yield batch
