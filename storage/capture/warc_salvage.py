"""What a WARC writer killed mid-file leaves behind, made whole again.

The writer flushes each gzipped record to its spool file as it writes it
(``storage.capture.warc_file``), so a writer killed by a signal leaves every record but the one
under way. ``salvage`` cuts the file after its last complete gzip member, and reads
the ``captures`` rows and the CDXJ lines back from the records themselves (a row and
its verdict, held in the dead writer's memory, are gone with it; its lines may not
have reached the disk): what remains is a WARC that ``warcio check`` passes, and the
rows and lines that point into it.
"""

import json
import os
import zlib
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator
from warcio.timeutils import iso_date_to_datetime

from storage.capture.captures import CaptureSpool, Position, capture_row
from storage.capture.cdxj import IndexSpool
from storage.capture.warc import VERDICT_TYPE

CHUNK = 64 * 1024  # bytes inflated at once while looking for the last whole record


def complete_length(path: Path) -> int:
    """Bytes of ``path`` up to the end of its last complete gzip member."""
    end = position = 0
    inflate = zlib.decompressobj(31)
    with open(path, "rb") as stream:
        while chunk := stream.read(CHUNK):
            position += len(chunk)
            while chunk:
                try:
                    inflate.decompress(chunk, CHUNK)
                    while inflate.unconsumed_tail and not inflate.eof:
                        inflate.decompress(inflate.unconsumed_tail, CHUNK)
                except zlib.error:
                    return end
                if not inflate.eof:
                    break
                chunk = inflate.unused_data
                end = position - len(chunk)
                inflate = zlib.decompressobj(31)
    return end


def salvage(spool: Path, spool_dir: str) -> tuple[Path, Path, int] | None:
    """Cut ``spool`` after its last whole record; returns its ``captures`` spool, its
    CDXJ lines (unsorted) and how many exchanges it holds, or None (the file removed)
    when no record of an exchange survived."""
    os.truncate(spool, complete_length(spool))
    captures = CaptureSpool(spool_dir)
    index = IndexSpool(spool_dir, spool.name)
    exchanges = 0
    with open(spool, "rb") as stream:
        records = ArchiveIterator(stream)
        for record in records:
            headers = record.rec_headers
            body = record.content_stream().read() if record.rec_type == "metadata" else b""
            records.read_to_end(record)
            url = headers.get_header("WARC-Target-URI")
            offset, length = records.get_record_offset(), records.get_record_length()
            index.add(record, offset, length)
            if record.rec_type in ("response", "revisit"):
                position = Position(spool.name, offset, length, headers["WARC-Record-ID"])
                status = int(record.http_headers.get_statuscode())
                captures.add(
                    capture_row(
                        url,
                        iso_date_to_datetime(headers["WARC-Date"], tz_aware=True),
                        status,
                        headers.get_header("WARC-Payload-Digest"),
                        record.http_headers.headers,
                        position,
                        record.rec_type,
                    )
                )
                exchanges += 1
            elif record.rec_type == "metadata":
                fields = json.loads(body)
                if fields.get("record_type") == VERDICT_TYPE:
                    captures.judge(
                        url,
                        pith_number=fields.get("pith_number"),
                        bundle_sha256=fields.get("bundle_sha256"),
                        status=fields.get("status"),
                    )
                else:
                    exchanges += 1
    captures.close()
    index.close()
    if not exchanges:
        captures.path.unlink()
        index.path.unlink()
        spool.unlink()
        return None
    return captures.path, index.path, exchanges
