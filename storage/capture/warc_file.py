"""One WARC file being written to its local spool: each record gzipped on its own, as WARC
files hold them, and written whole as soon as it is made (``storage.capture.warc_salvage``
reads back what a killed writer left), with the file's captures and CDXJ lines spooled
beside it."""

import zlib
from io import BytesIO
from pathlib import Path

from warcio.recordloader import ArcWarcRecord
from warcio.warcwriter import WARCWriter

from storage.capture.captures import CaptureSpool, Position
from storage.capture.cdxj import IndexSpool

WARC_VERSION = "WARC/1.1"
GZIP_HEADER = 16  # added to zlib's window bits: a gzip member, as WARC files hold them
MIN_WINDOW_BITS = 9  # zlib's smallest window with a gzip header


def gzip_member(data: bytes | memoryview) -> bytes:
    """``data`` as one gzip member, at warcio's level (9), with a window no larger than
    the data: compressed as well as with zlib's full 32 KiB window (no match reaches
    further back than the data's start), without setting up its ~256 KiB of state for
    a record of a few hundred bytes (~50 µs of a request or verdict record's ~58)."""
    bits = max(MIN_WINDOW_BITS, min(zlib.MAX_WBITS, (len(data) - 1).bit_length()))
    compressor = zlib.compressobj(9, zlib.DEFLATED, bits + GZIP_HEADER, max(1, min(8, bits - 6)))
    return compressor.compress(data) + compressor.flush()


class WarcFile:
    """One WARC file being written to its spool, named as it will be stored. Each
    record reaches the file (the kernel) whole, as one gzip member, as soon as it is
    written, so a writer killed mid-file leaves every record before the one under way
    whole (``storage.capture.warc_salvage``)."""

    def __init__(self, name: str, spool_dir: str):
        self.name = name
        self.spool = Path(spool_dir) / name
        self.handle = open(self.spool, "xb")  # noqa: SIM115 - open until the file is finished
        self._record = BytesIO()  # the record being written, before it is gzipped (gzip_member)
        self.writer = WARCWriter(self._record, gzip=False, warc_version=WARC_VERSION)
        self.captures = CaptureSpool(spool_dir)
        self.index = IndexSpool(spool_dir, name)
        self.exchanges = 0  # HTTP exchanges (and requests that got no response) recorded

    def write(self, record: ArcWarcRecord) -> Position:
        offset = self.handle.tell()
        self._record.seek(0)
        self._record.truncate()
        self.writer.write_record(record)
        with self._record.getbuffer() as plain:
            self.handle.write(gzip_member(plain))
        self.handle.flush()
        length = self.handle.tell() - offset
        self.index.add(record, offset, length)
        return Position(self.name, offset, length, record.rec_headers["WARC-Record-ID"])

    def close(self) -> None:
        self.handle.close()
        self.captures.close()
        self.index.close()

    def discard(self) -> None:
        self.handle.close()
        self.spool.unlink(missing_ok=True)
        self.captures.discard()
        self.index.discard()
