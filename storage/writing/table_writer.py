"""Rows of a table to Parquet files. While a run goes on, each row is appended to its
table's spool file as a JSON line (a few microseconds on the crawl's thread, and no
pyarrow in a crawl's process before its first commit: ~30 MiB of libraries it does not
need until then); when the run's tables close, the lines are read back into Parquet
files, one open file per partition, rolled at row and size bounds, with the rows
buffered by all of a run's tables held to one memory budget."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import orjson

from storage.archive import layout
from storage.archive.stores import MiB

if TYPE_CHECKING:
    import pyarrow.parquet as pq

    from storage.archive.tables import TableSpec

logger = logging.getLogger(__name__)


def memory_pool() -> str:
    """The allocator pyarrow encodes with: ``ARROW_DEFAULT_MEMORY_POOL``, read when
    pyarrow first builds its pool (``pith_archiver.tuning`` sets it for a crawl)."""
    import pyarrow as pa

    return str(pa.default_memory_pool().backend_name)


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
    """The buffered rows of every partition of a run's tables, held to one limit while
    they are written as Parquet. A crawl touches dozens of partitions (a year of
    submission each, an event type, a fetch date) and most never fill a row group:
    without a shared limit each buffers up to ``row_group_bytes``. Over the limit, the
    largest buffer is written out as a (smaller) row group."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self._files: list[_ParquetFiles] = []

    @property
    def writers(self) -> tuple[_ParquetFiles, ...]:
        """The tables being written whose buffers this budget holds."""
        return tuple(self._files)

    def join(self, files: _ParquetFiles) -> None:
        self._files.append(files)

    def leave(self, files: _ParquetFiles) -> None:
        """Written tables hold no rows."""
        if files in self._files:
            self._files.remove(files)

    def charge(self, size: int) -> None:
        self.used += size
        while self.used > self.limit:
            files, part = max(
                ((files, part) for files in self._files for part in files.parts.values()),
                key=lambda pair: pair[1].buffer_bytes,
            )
            if not part.buffer:
                break
            files.write_group(part, self)


_OBJECT_BYTES = 56  # a small Python object and the dict slot that holds it


def _approx_size(line: bytes, row: dict) -> int:
    """What a buffered row costs in memory, roughly: the text of its spool line plus a
    Python object per value."""
    return len(line) + _OBJECT_BYTES * len(row)


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
    """Rows of one table: spooled as JSON lines while the run goes on (``add``, or
    ``encode`` then ``append``), written as Parquet files when it closes (``close``).
    A finished file is handed to ``emit(path, spool_file, rows)``, which stores it and
    then owns (deletes) it."""

    def __init__(
        self,
        table: str,
        run_id: str,
        emit: Callable[[str, Path, int], None],
        policy: RollPolicy = RollPolicy(),
        spool_dir: str | Path | None = None,
        budget: RowBudget | None = None,
    ) -> None:
        """``budget`` is shared with the run's other tables (default: this one's own)."""
        self.table = table
        self.run_id = layout.check_run_id(run_id)
        self.policy = policy
        self._budget = budget or RowBudget(policy.buffer_bytes)
        self._emit = emit
        self._spool_dir = Path(spool_dir or tempfile.gettempdir())
        self._lines: BinaryIO | None = None
        self._lines_path: Path | None = None
        self._sealed = False
        self._parquet: _ParquetFiles | None = None

    @staticmethod
    def encode(row: dict) -> bytes:
        """A row as its spool line (times as ISO 8601); TypeError when a value cannot be kept."""
        return orjson.dumps(row) + b"\n"

    def append(self, line: bytes) -> None:
        """Spool a line ``encode`` made."""
        if self._sealed:
            raise ValueError(f"table {self.table} of run {self.run_id} is closed")
        if self._lines is None:
            fd, name = tempfile.mkstemp(prefix=f"{self.table}-", suffix=".jsonl", dir=self._spool_dir)
            self._lines, self._lines_path = os.fdopen(fd, "wb"), Path(name)
        self._lines.write(line)

    def add(self, row: dict) -> None:
        self.append(self.encode(row))

    def seal(self) -> None:
        """Take no more rows (under the lock the adds hold: ``close`` may then run outside it)."""
        self._sealed = True
        if self._lines is not None:
            self._lines.close()

    def close(self) -> None:
        """Write the spooled rows as Parquet files and hand over every file."""
        self.seal()
        if self._lines_path is None:
            return
        from storage.archive.tables import TABLES  # pyarrow: a crawl imports it when it first commits

        parquet = self._parquet = _ParquetFiles(
            TABLES[self.table], self.run_id, self._emit, self.policy, self._spool_dir
        )
        self._budget.join(parquet)
        try:
            with open(self._lines_path, "rb") as lines:
                for line in lines:
                    row = orjson.loads(line)
                    parquet.add(row, _approx_size(line, row), self._budget)
            parquet.close(self._budget)
        finally:
            self.discard()  # what a failure left half written, and the spooled lines either way

    def discard(self) -> None:
        """Drop the spooled rows and open files unstored (an aborted run)."""
        self.seal()
        if self._parquet is not None:
            self._budget.used -= sum(part.buffer_bytes for part in self._parquet.parts.values())
            self._parquet.discard()
            self._budget.leave(self._parquet)
            self._parquet = None
        if self._lines_path is not None:
            self._lines_path.unlink(missing_ok=True)
            self._lines_path = None


class _ParquetFiles:
    """One table's Parquet files being written: one open spool file per partition, at
    most one row group of rows in memory per partition."""

    def __init__(
        self,
        spec: TableSpec,
        run_id: str,
        emit: Callable[[str, Path, int], None],
        policy: RollPolicy,
        spool_dir: Path,
    ) -> None:
        import pyarrow as pa

        self.spec = spec
        self.run_id = run_id
        self.policy = policy
        self.parts: dict[str, _Part] = {}
        self._schema = spec.schema
        # times are spooled as ISO 8601 text (always with their offset): pyarrow parses
        # them when a row group is built, not Python row by row
        self._spooled = pa.schema(
            [field.with_type(pa.string()) if pa.types.is_timestamp(field.type) else field for field in self._schema],
            metadata=self._schema.metadata,
        )
        self._dirs: dict[tuple[type, object], str] = {}  # partition value: its directory
        self._emit = emit
        self._spool_dir = spool_dir
        self._seq = 0

    def add(self, row: dict, size: int, budget: RowBudget) -> None:
        """Buffer a spooled ``row`` that holds ``size`` bytes of memory."""
        value = row.pop(self.spec.partition)
        key = (value.__class__, value)  # True and 1 are equal keys, not one directory
        partition = self._dirs.get(key)
        if partition is None:
            partition = self._dirs[key] = layout.partition_dir(self.spec.partition, value)
        part = self.parts.get(partition) or self._open(partition)
        part.buffer.append(row)
        part.buffer_bytes += size
        wanted = min(self.policy.row_group_rows, self.policy.max_rows - part.rows_in_file)
        if len(part.buffer) >= wanted or part.buffer_bytes >= self.policy.row_group_bytes:
            self.write_group(part, budget)
            if part.rows_in_file >= self.policy.max_rows or part.handle.tell() >= self.policy.max_bytes:
                self._finish(partition, budget)
        budget.charge(size)

    def close(self, budget: RowBudget) -> None:
        for partition in list(self.parts):
            self._finish(partition, budget)

    def discard(self) -> None:
        for part in self.parts.values():
            part.writer.close()
            part.handle.close()
            part.spool.unlink(missing_ok=True)
        self.parts.clear()

    def _open(self, partition: str) -> _Part:
        import pyarrow.parquet as pq

        fd, name = tempfile.mkstemp(prefix=f"{self.spec.name}-", suffix=".parquet", dir=self._spool_dir)
        handle = os.fdopen(fd, "wb")
        writer = pq.ParquetWriter(handle, self._schema, compression="zstd")
        part = self.parts[partition] = _Part(Path(name), handle, writer)
        return part

    def write_group(self, part: _Part, budget: RowBudget) -> None:
        import pyarrow as pa

        if part.buffer:
            table = pa.Table.from_pylist(part.buffer, schema=self._spooled).cast(self._schema)
            part.writer.write_table(table, row_group_size=len(part.buffer))
            part.rows_in_file += len(part.buffer)
            budget.used -= part.buffer_bytes
            part.buffer, part.buffer_bytes = [], 0

    def _finish(self, partition: str, budget: RowBudget) -> None:
        part = self.parts.pop(partition)
        self.write_group(part, budget)
        part.writer.close()
        part.handle.close()
        path = layout.table_part(self.spec.name, partition, self.run_id, self._seq)
        self._seq += 1
        logger.debug("%s: %d rows, %d bytes", path, part.rows_in_file, part.spool.stat().st_size)
        self._emit(path, part.spool, part.rows_in_file)
