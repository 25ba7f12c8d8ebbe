"""The CDXJ index of a WARC file, made by cdxj-indexer.

cdxj-indexer keys lines by SURT, and the ``surt`` package imports ``tldextract`` (and
cdxj-indexer an AMF library that imports ``pkg_resources``): several MiB a crawl would
carry for the rest of its life. Only the crawl's WARC child (``storage.warc_child``)
imports it, when it indexes its first file.
"""

import warnings
from pathlib import Path

INDEXED = "response,revisit"  # what replay looks up; a verdict (metadata) shares its bundle's URL


def index_warc(warc: Path, out: Path, name: str) -> None:
    """Write the sorted CDXJ index of ``warc`` to ``out``, naming the file ``name`` in its lines."""
    with warnings.catch_warnings():  # its AMF support imports pkg_resources, deprecated: not our users' concern
        warnings.simplefilter("ignore", UserWarning)
        from cdxj_indexer import CDXJIndexer
    with open(out, "w", encoding="utf-8") as target:
        CDXJIndexer(target, [str(warc)], sort=True, records=INDEXED, filename=name).process_all()
