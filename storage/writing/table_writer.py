"""Rows of a table to Parquet files. While a run goes on, each row is appended as a JSON
line to the spool file of its partition (a few microseconds on the crawl's thread, and
no pyarrow in a crawl's process before its first commit: ~40 MiB of libraries it does
not need until then); when the run's tables close, each partition's spool is read back
by pyarrow's JSON reader, a block at a time, into Parquet files rolled at row and size
bounds. No row becomes a Python object again, and one partition's row group at most is
held in memory: a crawl touches dozens of partitions (a year of submission each), most
of which never fill a row group."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import orjson

from storage.archive import layout
from storage.archive.stores import MiB, StorageError

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

logger = logging.getLogger(__name__)

# a spool's write buffer: each write it flushes gives up the GIL on the crawl's thread and
# waits to take it back from the upload threads (io's default 8 KiB was one wait a bundle)
SPOOL_BUFFER = 64 * 1024


def memory_pool() -> str:
    """The allocator pyarrow encodes with: ``ARROW_DEFAULT_MEMORY_POOL``, read when
    pyarrow first builds its pool (``pith_archiver.crawl.tuning`` sets it for a crawl)."""
    import pyarrow as pa

    return str(pa.default_memory_pool().backend_name)


@dataclass(frozen=True)
class RollPolicy:
    """When a partition's rows become a row group, and when its file is done. A file is
    finished after the row group that reaches ``max_rows`` or ``max_bytes`` (compressed,
    on disk), and when the run ends: never one file per bundle."""

    max_rows: int = 50_000
    max_bytes: int = 64 * MiB
    row_group_rows: int = 10_000
    # in memory, as pyarrow holds the rows read; it holds a few times that while it
    # encodes them, and ~8 times the JSON it reads at a time: for 6,000 bundles' rows,
    # 64 KiB and 2 MiB took 0.63 s and 30 MiB, 1 MiB and 8 MiB 0.46 s and 63 MiB
    row_group_bytes: int = 2 * MiB
    read_bytes: int = 64 * 1024  # spooled JSON read at a time (a longer line: that line)

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if value < 1:  # a row group or file of nothing would never fill
                raise ValueError(f"RollPolicy.{name} must be at least 1, not {value}")


class RowEncoder:
    """Rows of one table as spool lines: a row's partition directory, and its JSON object
    (times as ISO 8601) without the partition column, which is in the path."""

    def __init__(self, table: str) -> None:
        self.partition = layout.TABLE_PARTITIONS[table]
        self._dirs: dict[tuple[type, object], str] = {}  # partition value: its directory

    def encode(self, row: dict) -> tuple[str, bytes]:
        """The row's partition directory and spool line; TypeError when a value cannot be kept."""
        partition, head = self.head(row)
        return partition, head + b"}\n"

    def head(self, row: dict) -> tuple[str, bytes]:
        """The row's partition directory and its JSON object left open (no closing brace):
        ``close_line`` adds the columns only the archive writer knows."""
        value = row.get(self.partition)
        key = (value.__class__, value)  # True and 1 are equal keys, not one directory
        partition = self._dirs.get(key)
        if partition is None:
            partition = self._dirs[key] = layout.partition_dir(self.partition, value)
        return partition, orjson.dumps({name: cell for name, cell in row.items() if name != self.partition})[:-1]


def close_line(head: bytes, tail: bytes) -> bytes:
    """A spool line of a row ``RowEncoder.head`` left open and ``tail``, more columns as
    an object's members and its closing brace (``orjson.dumps(columns)[1:]``)."""
    return head + (tail if head == b"{" or tail == b"}" else b"," + tail) + b"\n"


@dataclass
class _Spool:
    """One partition's spooled rows: its JSON lines on disk, and the longest of them."""

    path: Path
    handle: BinaryIO
    longest: int = 0


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
    ) -> None:
        self.table = table
        self.run_id = layout.check_run_id(run_id)
        self.policy = policy
        self.encoder = RowEncoder(table)
        self._emit = emit
        self._spool_dir = Path(spool_dir or tempfile.gettempdir())
        self._spools: dict[str, _Spool] = {}  # partition directory: its spool, in the order first seen
        self._sealed = False
        self._seq = 0  # the run's files of this table, numbered

    def encode(self, row: dict) -> tuple[str, bytes]:
        """A row as its partition directory and its spool line (``RowEncoder.encode``)."""
        return self.encoder.encode(row)

    def append(self, encoded: tuple[str, bytes]) -> None:
        """Spool a row ``encode`` made."""
        if self._sealed:
            raise ValueError(f"table {self.table} of run {self.run_id} is closed")
        partition, line = encoded
        spool = self._spools.get(partition)
        if spool is None:
            fd, name = tempfile.mkstemp(prefix=f"{self.table}-", suffix=".jsonl", dir=self._spool_dir)
            spool = self._spools[partition] = _Spool(Path(name), os.fdopen(fd, "wb", SPOOL_BUFFER))
        spool.handle.write(line)
        spool.longest = max(spool.longest, len(line))

    def add(self, row: dict) -> None:
        self.append(self.encode(row))

    def seal(self) -> None:
        """Take no more rows (under the lock the adds hold: ``close`` may then run outside it)."""
        self._sealed = True
        for spool in self._spools.values():
            spool.handle.close()

    def close(self) -> None:
        """Write the spooled rows as Parquet files and hand over every file."""
        self.seal()
        if not self._spools:
            return
        import pyarrow as pa

        from storage.archive.tables import TABLES  # pyarrow: a crawl imports it when it first commits

        schema = TABLES[self.table].schema
        try:
            for partition, spool in self._spools.items():
                self._write(partition, spool, schema)
        except (pa.ArrowException, OSError) as exc:  # a row that does not fit the schema; the spool's disk
            raise StorageError(f"table {self.table} of run {self.run_id} cannot be written: {exc}") from exc
        finally:
            self.discard()  # the spooled lines, written or not

    def discard(self) -> None:
        """Drop the spooled rows unstored (an aborted run)."""
        self.seal()
        for spool in self._spools.values():
            spool.path.unlink(missing_ok=True)
        self._spools.clear()

    def _write(self, partition: str, spool: _Spool, schema: pa.Schema) -> None:
        """One partition's spooled rows as Parquet files, a row group at a time."""
        import pyarrow as pa
        import pyarrow.json as pj

        policy = self.policy
        reader = pj.open_json(
            spool.path,
            read_options=pj.ReadOptions(use_threads=False, block_size=max(policy.read_bytes, spool.longest + 1)),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error"),
        )
        part: _Part | None = None
        group: list[pa.RecordBatch] = []
        rows = size = 0
        try:
            for batch in reader:
                while batch.num_rows:
                    if part is None:
                        part = self._open(schema)
                    wanted = min(policy.row_group_rows, policy.max_rows - part.rows)
                    piece = batch.slice(0, wanted - rows)
                    batch = batch.slice(piece.num_rows)
                    group.append(piece)
                    rows, size = rows + piece.num_rows, size + piece.nbytes
                    if rows >= wanted or size >= policy.row_group_bytes:
                        part.write(pa.Table.from_batches(group).cast(schema))  # the non-nullable columns checked
                        group, rows, size = [], 0, 0
                        if part.rows >= policy.max_rows or part.handle.tell() >= policy.max_bytes:
                            self._finish(partition, part)
                            part = None
            if group and part is not None:
                part.write(pa.Table.from_batches(group).cast(schema))
            if part is not None:
                self._finish(partition, part)
                part = None
        finally:
            if part is not None:
                part.discard()  # what a failure left half written

    def _open(self, schema: pa.Schema) -> _Part:
        import pyarrow.parquet as pq

        fd, name = tempfile.mkstemp(prefix=f"{self.table}-", suffix=".parquet", dir=self._spool_dir)
        handle = os.fdopen(fd, "wb")
        return _Part(Path(name), handle, pq.ParquetWriter(handle, schema, compression="zstd"))

    def _finish(self, partition: str, part: _Part) -> None:
        part.writer.close()
        part.handle.close()
        path = layout.table_part(self.table, partition, self.run_id, self._seq)
        self._seq += 1
        logger.debug("%s: %d rows, %d bytes", path, part.rows, part.path.stat().st_size)
        self._emit(path, part.path, part.rows)


@dataclass
class _Part:
    """A partition's Parquet file being written in the spool folder."""

    path: Path
    handle: BinaryIO
    writer: pq.ParquetWriter
    rows: int = 0

    def write(self, table: pa.Table) -> None:
        """``table``'s rows as one row group."""
        self.writer.write_table(table, row_group_size=table.num_rows)
        self.rows += table.num_rows

    def discard(self) -> None:
        self.writer.close()
        self.handle.close()
        self.path.unlink(missing_ok=True)
