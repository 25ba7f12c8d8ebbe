"""The CDXJ index of a WARC file, made by cdxj-indexer.

cdxj-indexer keys lines by SURT, and the ``surt`` package imports ``tldextract`` (and
cdxj-indexer an AMF library that imports ``pkg_resources``): several MiB a crawl would
carry for the rest of its life. Only the crawl's WARC child (``storage.warc_child``)
imports it, while the crawl starts (``load_indexer``), so the first commit does not wait
for its imports.
"""

import warnings
from pathlib import Path
from typing import Any

INDEXED = "response,revisit"  # what replay looks up; a verdict (metadata) shares its bundle's URL


def load_indexer() -> Any:
    """cdxj-indexer's indexer class, imported once."""
    with warnings.catch_warnings():  # its AMF support imports pkg_resources, deprecated: not our users' concern
        warnings.simplefilter("ignore", UserWarning)
        from cdxj_indexer import CDXJIndexer
    return CDXJIndexer


def index_warc(warc: Path, out: Path, name: str) -> None:
    """Write the sorted CDXJ index of ``warc`` to ``out``, naming the file ``name`` in its lines."""
    with open(out, "w", encoding="utf-8") as target:
        load_indexer()(target, [str(warc)], sort=True, records=INDEXED, filename=name).process_all()
