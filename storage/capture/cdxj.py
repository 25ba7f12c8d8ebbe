"""The CDXJ index of a WARC file, what replay tools look up, made as its records are written.

It lists the captures that hold a payload: responses, and revisits of identical
payloads (which name the record holding the bytes). A ``304 Not Modified`` revisit
stays in the WARC file as what the server said, but is left out: replay tools (pywb)
play a revisit of a 3xx status as that status with no body, so indexed, a re-crawl
would hide every bundle behind an empty 304. Replay then finds a URL's latest payload
capture, the bytes most recently archived for it.

Each line is the one cdxj-indexer writes for that record (``<SURT key> <timestamp>
<JSON>``, the same fields in the same order; tests/test_cdxj.py holds the two to the
same bytes), built from the record the writer has just written and where it landed: no
second pass re-reads and inflates the finished file, and the child that writes WARC
files carries none of cdxj-indexer's imports (an AMF library, ``pkg_resources``). Lines
are spooled on disk as they come (``IndexSpool``) and sorted when the file is finished
(``sort_index``, in runs of bounded size merged), so memory stays flat however large
the file grows. The SURT key comes from the ``surt`` package, imported only for a URL
the plain way below does not cover (it imports ``tldextract``, ``requests`` and
``idna``: 7.6 MiB and ~0.1 s for a child that indexes a crawl's plain URLs without them).
"""

import heapq
import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, TextIO

from warcio.timeutils import iso_date_to_timestamp

SERVER_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
INDEXED = ("response", "revisit")  # what replay looks up; a verdict (metadata) shares its bundle's URL
MIME_END = re.compile(r"[;\s]")  # a media type ends at its parameters, as cdxj-indexer cuts it
SORT_BYTES = 4 * 1024 * 1024  # lines sorted in memory at once; more are merged from sorted runs on disk


def indexed(record: Any) -> bool:
    """Whether a warcio record is a capture the index lists."""
    return record.rec_type in INDEXED and record.rec_headers.get_header("WARC-Profile") != SERVER_NOT_MODIFIED


@cache
def _surt() -> Any:
    import surt  # noqa: PLC0415 - tldextract with it: only where lines are built

    return surt.surt


# An http(s) URL whose path the SURT library leaves as it is, but for its case: no
# query, fragment, escapes, session ids, dot segments or doubled slashes. A crawl's
# URLs are almost all of this kind, and share a few origins.
_PLAIN_URL = re.compile(r"(https?://[A-Za-z0-9.:\[\]_-]+)((?:/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)+)")


def url_key(url: str) -> str:
    """The SURT form of ``url`` that lines are sorted by; the URL itself when it has none.
    A plain URL's is its origin's (worked out once) and its path in lower case, what the
    library would make of it (tests/test_cdxj.py holds the two to the same keys)."""
    plain = _PLAIN_URL.fullmatch(url)
    if plain is not None:
        origin = _origin_key(plain[1])
        if origin is not None:
            return origin + plain[2].lower()
    return _library_key(url)


# An origin the SURT library only lowercases, reverses and strips of its default port:
# DNS labels with no "www" prefix to strip, no IDNA label, and a last label that is not
# a number (which the library may read as an IPv4 address written another way), or an
# IPv4 address written the usual way.
_PLAIN_ORIGIN = re.compile(r"(https?)://([A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*)(?::([1-9][0-9]{0,4}))?")
_DOTTED_QUAD = re.compile(r"(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(?:\.|$)){4}")
_DEFAULT_PORT = {"http": "80", "https": "443"}


@lru_cache(maxsize=256)
def _origin_key(origin: str) -> str | None:
    plain = _PLAIN_ORIGIN.fullmatch(origin)
    if plain is not None and (plain[3] is None or int(plain[3]) < 65536):
        scheme, host, port = plain[1].lower(), plain[2].lower(), plain[3]
        labels = host.split(".")
        if _DOTTED_QUAD.fullmatch(host) or not (
            host.startswith("www") or labels[-1][:1].isdigit() or any(label.startswith("xn--") for label in labels)
        ):
            return ",".join(reversed(labels)) + (f":{port}" if port and port != _DEFAULT_PORT[scheme] else "") + ")"
    key = _library_key(origin + "/")
    return key[:-1] if key.endswith(")/") else None


def _library_key(url: str) -> str:
    try:
        return str(_surt()(url))
    except Exception:  # cdxj-indexer's fallback: a URL the SURT library cannot parse keys as itself
        return url


def _mime(record: Any) -> str | None:
    if record.rec_type == "revisit":
        return "warc/revisit"
    value = record.http_headers.get_header("Content-Type") if record.http_headers else None
    if value is None:
        return None
    # cdxj-indexer reads the header back from the file, where it lost its outer whitespace
    return MIME_END.split(value.strip(), maxsplit=1)[0].strip()


def cdxj_line(record: Any, offset: int, length: int, filename: str) -> str:
    """The CDXJ line of a warcio record (as written, or as read back) at ``offset``,
    ``length`` bytes long, in ``filename``: the fields cdxj-indexer writes by default, a
    field the record lacks left out as it leaves it out."""
    headers = record.rec_headers
    url = headers.get_header("WARC-Target-URI")
    status = record.http_headers.get_statuscode() if record.http_headers else None
    fields = {
        "url": url,
        "mime": _mime(record),
        "status": status,
        "digest": headers.get_header("WARC-Payload-Digest"),
        "length": str(length),
        "offset": str(offset),
        "filename": filename,
    }
    found = {name: value for name, value in fields.items() if value is not None}
    return f"{url_key(url)} {iso_date_to_timestamp(headers.get_header('WARC-Date'))} {json.dumps(found)}\n"


class IndexSpool:
    """The CDXJ lines of one WARC file, named ``filename`` in them, in the order its
    records are written: on disk in ``spool_dir`` until ``sort_index`` sorts them."""

    def __init__(self, spool_dir: str, filename: str) -> None:
        fd, name = tempfile.mkstemp(prefix="cdxj-", suffix=".lines", dir=spool_dir)
        self.path = Path(name)
        self.filename = filename
        self._handle = os.fdopen(fd, "w", encoding="utf-8")

    def add(self, record: Any, offset: int, length: int) -> None:
        """The line of a record just written (or read back), when the index lists it."""
        if indexed(record):
            self._handle.write(cdxj_line(record, offset, length, self.filename))

    def close(self) -> None:
        self._handle.close()

    def discard(self) -> None:
        self._handle.close()
        self.path.unlink(missing_ok=True)


def _chunks(lines: TextIO, most: int) -> Iterator[list[str]]:
    chunk: list[str] = []
    size = 0
    for line in lines:
        chunk.append(line)
        size += len(line)
        if size >= most:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _write_distinct(lines: Iterable[str], out: TextIO) -> None:
    """As cdxj-indexer writes its sorted lines: a line equal to the one before is dropped."""
    last = None
    for line in lines:
        if line != last:
            out.write(line)
        last = line


def sort_index(lines: Path, out: Path, most: int = SORT_BYTES) -> None:
    """Write the spooled ``lines`` to ``out`` in plain string order, as cdxj-indexer
    sorts them. At most ``most`` characters of lines are sorted in memory at once:
    more are sorted in runs, each written next to ``lines``, then merged."""
    runs: list[Path] = []
    try:
        with open(lines, encoding="utf-8") as spooled:
            for chunk in _chunks(spooled, most):
                chunk.sort()
                fd, name = tempfile.mkstemp(prefix="cdxj-", suffix=".run", dir=lines.parent)
                runs.append(Path(name))
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.writelines(chunk)
        with ExitStack() as stack, open(out, "w", encoding="utf-8") as target:
            sorted_runs = [stack.enter_context(open(path, encoding="utf-8")) for path in runs]
            _write_distinct(heapq.merge(*sorted_runs), target)
    finally:
        for path in runs:
            path.unlink(missing_ok=True)
