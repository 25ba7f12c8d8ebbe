"""Checking a stored WARC file record by record, as ``warcio check`` does, from a
stream of chunks (the audit reads each object once, hashing it as it goes)."""

import io
import logging
import zlib
from collections.abc import Iterable
from typing import Any

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from storage.archive.stores import CHUNK

logger = logging.getLogger(__name__)


class _ChunkReader(io.RawIOBase):
    """A file over an iterator of byte chunks (a store's read_chunks), for warcio."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._left = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._left:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._left = chunk
        size = min(len(buffer), len(self._left))
        buffer[:size], self._left = self._left[:size], self._left[size:]
        return size

    def drain(self) -> None:
        self._left = b""
        for _ in self._chunks:
            pass


def record_problems(chunks: Iterable[bytes], most: int = 10) -> list[str]:
    """What ``warcio check`` would find in a WARC stream: each record's block and
    payload digests recomputed, or the point where the file stops being readable.
    The stream is read to its end (the caller may be hashing it)."""
    reader = _ChunkReader(chunks)
    problems: list[str] = []
    records = ArchiveIterator(io.BufferedReader(reader, CHUNK), check_digests=True)
    try:
        for record in records:
            content = record.content_stream()
            while content.read(CHUNK):
                pass
            if record.digest_checker.passed is False and len(problems) < most:
                problems.append(
                    f"record at offset {records.get_record_offset()} ({record.rec_headers['WARC-Record-ID']}): "
                    + "; ".join(str(problem) for problem in record.digest_checker.problems)
                )
    except (ArchiveLoadFailed, OSError, EOFError, zlib.error, ValueError) as exc:
        problems.append(f"unreadable after offset {records.get_record_offset()}: {exc}")
    reader.drain()
    return problems
