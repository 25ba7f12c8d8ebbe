"""The CDXJ index of a WARC file, made by cdxj-indexer in a child process.

cdxj-indexer keys lines by SURT, and the ``surt`` package imports ``tldextract`` (and
cdxj-indexer an AMF library that imports ``pkg_resources``): several MiB a crawl
would carry for the rest of its life, for one pass per WARC file. A child process
(``python -m storage.cdxj WARC OUT NAME``) reads the finished file from the spool
instead, on the other core when there is one.
"""

import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

from .stores import StorageError

logger = logging.getLogger(__name__)

INDEXED = "response,revisit"  # what replay looks up; a verdict (metadata) shares its bundle's URL


def index_warc(warc: Path, out: Path, name: str) -> None:
    """Write the sorted CDXJ index of ``warc`` to ``out``, naming the file ``name`` in its lines."""
    here = str(Path(__file__).resolve().parents[1])  # where this package is found (a checkout, an egg)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-m", "storage.cdxj", str(warc), str(out), name], capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        raise StorageError(f"indexing {name} failed: {done.stderr.strip()[-500:]}")


def main(argv: list[str]) -> None:
    warc, out, name = argv
    with warnings.catch_warnings():  # its AMF support imports pkg_resources, deprecated: not our users' concern
        warnings.simplefilter("ignore", UserWarning)
        from cdxj_indexer import CDXJIndexer
    with open(Path(out), "w", encoding="utf-8") as target:
        CDXJIndexer(target, [warc], sort=True, records=INDEXED, filename=name).process_all()


if __name__ == "__main__":
    main(sys.argv[1:])
