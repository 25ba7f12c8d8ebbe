"""What a run stored, kept in a local file until its manifest is built.

Each object the store acknowledges is one JSON line: its manifest entry and, for a
bundle version owed an attestation, what the attestation says of it and when the
store acknowledged it. Held in memory, these come to about 1 KB per bundle, 10 MB at
a 10,000-bundle interim commit; in the file, memory stays flat however far apart the
interim commits are.
"""

import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import orjson

from storage.archive.stores import ObjectInfo
from storage.transparency.attestations import Stored


class Ledger:
    """A run's stored objects, one line each, written by the upload threads; its
    file in ``spool_dir`` is made by the first note."""

    def __init__(self, spool_dir: str | Path) -> None:
        self.spool_dir = spool_dir
        self.path: Path | None = None
        self._handle: BinaryIO | None = None
        self._lock = threading.Lock()

    def record(self, info: ObjectInfo, owed: Stored | None = None, stored_at: str | None = None) -> ObjectInfo:
        """Note ``info`` for the manifest, and ``owed`` (stored at ``stored_at``) for
        the run's attestations."""
        line = [info.path, info.sha256, info.size, info.table, info.rows]
        if owed is not None:
            line += [owed.pith_number, owed.bundle_sha256, owed.canonical_sha256, stored_at]
        data = orjson.dumps(line) + b"\n"
        with self._lock:
            if self._handle is None:
                fd, name = tempfile.mkstemp(prefix="ledger-", suffix=".jsonl", dir=self.spool_dir)
                self.path, self._handle = Path(name), os.fdopen(fd, "wb")
            self._handle.write(data)
        return info

    def objects(self) -> list[ObjectInfo]:
        """Every object noted, once each (the last note of a path counts), in the order
        first noted."""
        objects: dict[str, ObjectInfo] = {}
        for line in self._lines():
            objects[line[0]] = ObjectInfo(*line[:5])
        return list(objects.values())

    def owed(self) -> Iterator[tuple[Stored, str]]:
        """``(Stored, stored_at)`` for each version owed an attestation, in the order
        the store acknowledged them."""
        for line in self._lines():
            if len(line) > 5:
                path, sha256, size, _, _, number, bundle, canonical, stored_at = line
                yield Stored(number, bundle, canonical, path, sha256, size), stored_at

    def discard(self) -> None:
        with self._lock:
            if self._handle is not None and self.path is not None:
                self._handle.close()
                self.path.unlink(missing_ok=True)

    def _lines(self) -> Iterator[list]:
        """The lines noted so far: upload threads may go on noting meanwhile (a table
        file a commit hands over), past the end read here."""
        with self._lock:
            if self._handle is None or self.path is None:
                return
            self._handle.flush()
            end = self._handle.tell()
        with open(self.path, "rb") as handle:
            for line in handle:  # counted, not told: each tell is a system call
                end -= len(line)
                if end < 0:
                    return
                yield orjson.loads(line)
