"""What a run knows of the archive's history: every bundle version committed under
the trusted archiver keys and each record's current version (``storage.archive.history``),
read from the committed ``records`` and ``events`` tables when the run opens, and
again, for the manifests committed since, when other writers may have stored what
this run is about to redo (``refresh``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pith.keyring import Keyring
from storage.archive.history import EVENT_COLUMNS, RECORD_COLUMNS, History
from storage.archive.manifest import listed, read_committed
from storage.archive.reader import table_batches
from storage.archive.stores import ObjectStore, StorageError

if TYPE_CHECKING:
    import pyarrow as pa


class HistoryLoader:
    """The history a writer judges new versions against, once ``open``;
    ``known_runs`` are the run ids whose manifests it holds (or that are the
    writer's own, which it need not read back)."""

    def __init__(self, store: ObjectStore, keyring: Keyring):
        self.store = store
        self.keyring = keyring
        self._history: History | None = None
        self.known_runs: set[str] = set()

    def open(self, manifests: list[dict[str, Any]]) -> None:
        """Read the history the committed ``manifests`` list (none: an empty archive)."""
        self._history = History.from_tables(*self._rows(manifests))

    def close(self) -> None:
        """Let the history go (its database, filter and waiting versions): the writer adds no more."""
        if self._history is not None:
            self._history.close()
            self._history = None

    @property
    def history(self) -> History:
        if self._history is None:
            raise StorageError("the history is read when the writer opens")
        return self._history

    def refresh(self, lock: threading.Lock) -> int:
        """Absorb the manifests committed since ``open`` (or the last refresh), under
        ``lock`` (the writer's, serializing with its own adds). Returns how many."""
        fresh = read_committed(self.store, self.keyring, skip=self.known_runs).manifests
        with lock:
            self.history.absorb(*self._rows(fresh))
        return len(fresh)

    def _rows(self, manifests: list[dict[str, Any]]) -> tuple[Iterator[pa.RecordBatch], Iterator[pa.RecordBatch]]:
        """The committed records and events rows of ``manifests``, each read lazily."""
        records, events = [], []
        for manifest in manifests:
            self.known_runs.add(manifest["run_id"])
            for entry in listed(manifest):
                if entry.table == "records":
                    records.append(entry)
                elif entry.table == "events":
                    events.append(entry)
        return (
            (batch for entry in records for batch in table_batches(self.store, entry, RECORD_COLUMNS)),
            (batch for entry in events for batch in table_batches(self.store, entry, EVENT_COLUMNS)),
        )
