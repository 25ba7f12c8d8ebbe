"""Rows of a table to Parquet files: spooled locally, one open file per partition,
rolled at row and size bounds, with the rows buffered by all of a run's tables held
to one memory budget."""

import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from storage.archive import layout
from storage.archive.stores import MiB
from storage.archive.tables import TableSpec

logger = logging.getLogger(__name__)


def memory_pool() -> str:
    """The allocator pyarrow encodes with: ``ARROW_DEFAULT_MEMORY_POOL``, read when
    pyarrow first builds its pool (``pith_archiver.tuning`` sets it for a crawl)."""
    return pa.default_memory_pool().backend_name


@dataclass(frozen=True)
class RollPolicy:
    """When a partition's buffered rows become a row group, and when its file is done.
    A file is finished after the row group that reaches ``max_rows`` or ``max_bytes``
    (compressed, on disk), and when the run ends: never one file per bundle."""

    max_rows: int = 50_000
    max_bytes: int = 64 * MiB
    row_group_rows: int = 10_000
    row_group_bytes: int = 8 * MiB  # in memory, estimated from the buffered values
    # all partitions of all tables sharing a RowBudget (16 MiB held ~25 MiB more at a
    # 10k-record crawl's peak: bench/RESULTS.md)
    buffer_bytes: int = 4 * MiB


class RowBudget:
    """The buffered rows of every partition of a run's tables, held to one limit. A
    crawl touches dozens of partitions (a year of submission each, an event type, a
    fetch date) and most never fill a row group: without a shared limit each buffers
    up to ``row_group_bytes`` until the run ends, and memory grows with the crawl.
    Over the limit, the largest buffer is written out as a (smaller) row group."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self._writers: list["TableWriter"] = []

    @property
    def writers(self) -> tuple["TableWriter", ...]:
        """The open writers whose buffers this budget holds."""
        return tuple(self._writers)

    def join(self, writer: "TableWriter") -> None:
        self._writers.append(writer)

    def leave(self, writer: "TableWriter") -> None:
        """A closed writer holds no rows (a crawl's interim commits close theirs as they go)."""
        if writer in self._writers:
            self._writers.remove(writer)

    def charge(self, size: int) -> None:
        self.used += size
        while self.used > self.limit:
            writer, part = max(
                ((w, part) for w in self._writers for part in w._parts.values()), key=lambda pair: pair[1].buffer_bytes
            )
            if not part.buffer:
                break
            writer._write_group(part)


_OBJECT_BYTES = 56  # a small Python object and the dict slot that holds it


def _approx_size(row: dict) -> int:
    """What a buffered row costs in memory, roughly: its text plus a Python object per value."""
    size = 0
    for value in row.values():
        if isinstance(value, str):
            size += _OBJECT_BYTES + len(value)
        elif isinstance(value, list):
            size += _OBJECT_BYTES + sum(_OBJECT_BYTES + len(v) for v in value if isinstance(v, str))
        else:
            size += _OBJECT_BYTES
    return size


@dataclass
class _Part:
    """One partition's open spool file and its not yet written rows."""

    spool: Path
    handle: BinaryIO
    writer: pq.ParquetWriter
    rows_in_file: int = 0
    buffer: list = field(default_factory=list)
    buffer_bytes: int = 0


class TableWriter:
    """Rows of one table to Parquet files: one open spool file per partition, at most
    one row group of rows in memory per partition. A finished file is handed to
    ``emit(path, spool_file, rows)``, which stores it and then owns (deletes) it."""

    def __init__(
        self,
        spec: TableSpec,
        run_id: str,
        emit: Callable[[str, Path, int], None],
        policy: RollPolicy = RollPolicy(),
        spool_dir: str | Path | None = None,
        budget: RowBudget | None = None,
    ) -> None:
        """``budget`` is shared with the run's other tables (default: this one's own)."""
        self.spec = spec
        self.run_id = layout.check_run_id(run_id)
        self.policy = policy
        self._budget = budget or RowBudget(policy.buffer_bytes)
        self._budget.join(self)
        self._schema = spec.schema
        self._emit = emit
        self._spool_dir = Path(spool_dir or tempfile.gettempdir())
        self._parts: dict[str, _Part] = {}
        self._seq = 0

    def add(self, row: dict) -> None:
        row = dict(row)
        partition = layout.partition_dir(self.spec.partition, row.pop(self.spec.partition))
        part = self._parts.get(partition) or self._open(partition)
        size = _approx_size(row)
        part.buffer.append(row)
        part.buffer_bytes += size
        wanted = min(self.policy.row_group_rows, self.policy.max_rows - part.rows_in_file)
        if len(part.buffer) >= wanted or part.buffer_bytes >= self.policy.row_group_bytes:
            self._write_group(part)
            if part.rows_in_file >= self.policy.max_rows or part.handle.tell() >= self.policy.max_bytes:
                self._finish(partition)
        self._budget.charge(size)

    def close(self) -> None:
        """Write what is buffered and hand over every open file."""
        for partition in list(self._parts):
            self._finish(partition)
        self._budget.leave(self)

    def discard(self) -> None:
        """Drop open files unstored (an aborted run)."""
        for part in self._parts.values():
            self._budget.used -= part.buffer_bytes
            part.writer.close()
            part.handle.close()
            part.spool.unlink(missing_ok=True)
        self._parts.clear()
        self._budget.leave(self)

    def _open(self, partition: str) -> _Part:
        fd, name = tempfile.mkstemp(prefix=f"{self.spec.name}-", suffix=".parquet", dir=self._spool_dir)
        handle = os.fdopen(fd, "wb")
        writer = pq.ParquetWriter(handle, self._schema, compression="zstd")
        part = self._parts[partition] = _Part(Path(name), handle, writer)
        return part

    def _write_group(self, part: _Part) -> None:
        if part.buffer:
            part.writer.write_table(
                pa.Table.from_pylist(part.buffer, schema=self._schema), row_group_size=len(part.buffer)
            )
            part.rows_in_file += len(part.buffer)
            self._budget.used -= part.buffer_bytes
            part.buffer, part.buffer_bytes = [], 0

    def _finish(self, partition: str) -> None:
        part = self._parts.pop(partition)
        self._write_group(part)
        part.writer.close()
        part.handle.close()
        path = layout.table_part(self.spec.name, partition, self.run_id, self._seq)
        self._seq += 1
        logger.debug("%s: %d rows, %d bytes", path, part.rows_in_file, part.spool.stat().st_size)
        self._emit(path, part.spool, part.rows_in_file)
