"""The CDXJ index of a WARC file, made by cdxj-indexer in a child process.

cdxj-indexer keys lines by SURT, and the ``surt`` package imports ``tldextract`` (and
cdxj-indexer an AMF library that imports ``pkg_resources``): several MiB a crawl
would carry for the rest of its life, for one pass per WARC file. One child process
(``python -m storage.cdxj``) per crawl does it instead: started when the archive
opens, so its imports are done by the first commit, and fed one finished file at a
time (a JSON line in, ``ok`` or the error out), on the other core when there is one.
"""

import json
import logging
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

from .stores import StorageError

logger = logging.getLogger(__name__)

INDEXED = "response,revisit"  # what replay looks up; a verdict (metadata) shares its bundle's URL


class CdxjIndexer:
    """The crawl's indexing child: ``index(warc, out, name)`` from any thread; ``close()``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._child: subprocess.Popen | None = None

    def start(self) -> "CdxjIndexer":
        here = str(Path(__file__).resolve().parents[1])  # where this package is found (a checkout, an egg)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))}
        self._child = subprocess.Popen(
            [sys.executable, "-m", "storage.cdxj"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        return self

    def index(self, warc: Path, out: Path, name: str) -> None:
        """Write the sorted CDXJ index of ``warc`` to ``out``, naming the file ``name`` in its lines."""
        with self._lock:
            for attempt in (1, 2):  # a child that died is started again, once
                if self._child is None or self._child.poll() is not None:
                    self.start()
                child = self._child
                try:
                    if child is None or child.stdin is None or child.stdout is None:
                        raise OSError("no indexing child")
                    child.stdin.write(json.dumps([str(warc), str(out), name]) + "\n")
                    child.stdin.flush()
                    answer = child.stdout.readline().strip()
                except (BrokenPipeError, OSError) as exc:
                    answer = f"the indexer stopped: {exc}"
                if answer == "ok":
                    return
                if answer and not answer.startswith("the indexer stopped"):
                    break
        raise StorageError(f"indexing {name} failed: {answer or 'the indexer stopped'}")

    def close(self) -> None:
        with self._lock:
            child, self._child = self._child, None
        if child is not None and child.stdin is not None and child.stdout is not None:
            child.stdin.close()
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            child.stdout.close()


def main() -> None:
    with warnings.catch_warnings():  # its AMF support imports pkg_resources, deprecated: not our users' concern
        warnings.simplefilter("ignore", UserWarning)
        from cdxj_indexer import CDXJIndexer
    for line in sys.stdin:
        warc, out, name = json.loads(line)
        try:
            with open(out, "w", encoding="utf-8") as target:
                CDXJIndexer(target, [warc], sort=True, records=INDEXED, filename=name).process_all()
        except Exception as exc:  # reported to the crawl, which fails the run
            print(f"{type(exc).__name__}: {exc}".replace("\n", " "), flush=True)
        else:
            print("ok", flush=True)


if __name__ == "__main__":
    main()
