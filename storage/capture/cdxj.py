"""The CDXJ index of a WARC file, made by cdxj-indexer: what replay tools look up.

It lists the captures that hold a payload: responses, and revisits of identical
payloads (which name the record holding the bytes). A ``304 Not Modified`` revisit
stays in the WARC file as what the server said, but is left out: replay tools (pywb)
play a revisit of a 3xx status as that status with no body, so indexed, a re-crawl
would hide every bundle behind an empty 304. Replay then finds a URL's latest payload
capture, the bytes most recently archived for it.

cdxj-indexer keys lines by SURT, and the ``surt`` package imports ``tldextract`` (and
cdxj-indexer an AMF library that imports ``pkg_resources``): several MiB a crawl would
carry for the rest of its life. Only the crawl's WARC child (``storage.capture.warc_child``)
imports it, while the crawl starts (``load_indexer``), so the first commit does not wait
for its imports.
"""

import warnings
from functools import cache
from pathlib import Path
from typing import Any

from storage.capture.warc import SERVER_NOT_MODIFIED

INDEXED = "response,revisit"  # what replay looks up; a verdict (metadata) shares its bundle's URL


@cache
def load_indexer() -> Any:
    """cdxj-indexer's indexer, imported once, indexing the captures that hold a payload."""
    with warnings.catch_warnings():  # its AMF support imports pkg_resources, deprecated: not our users' concern
        warnings.simplefilter("ignore", UserWarning)
        from cdxj_indexer import CDXJIndexer

    class PayloadIndexer(CDXJIndexer):
        def filter_record(self, record: Any) -> bool:
            profile = record.rec_headers.get_header("WARC-Profile")
            return bool(super().filter_record(record)) and profile != SERVER_NOT_MODIFIED

    return PayloadIndexer


def index_warc(warc: Path, out: Path, name: str) -> None:
    """Write the sorted CDXJ index of ``warc`` to ``out``, naming the file ``name`` in its lines."""
    with open(out, "w", encoding="utf-8") as target:
        load_indexer()(target, [str(warc)], sort=True, records=INDEXED, filename=name).process_all()
