"""An archive's committed runs as a ResourceSync feed: the Resource List describes each
served record's current version (its sha-256 and length, as stored and served), and
each committed run is a Change List of the versions it made current, so a copy of the
archive follows it run by run instead of sweeping it.

Times. A version's ``lastmod`` is when the run that archived it committed: the moment
the archive began serving it. A change's ``datetime`` is when the archive fetched it,
kept strictly between the commit before its run and its run's own: a copy synced from
a Resource List, which resumes from the newest ``lastmod`` it saw, skips the changes
that list already held and takes every later one, even from a run whose fetches
overlapped the commit before it.

A run whose manifest says it committed later than the serving clock's now (its machine's
clock ran fast) must not hide the runs after it: a client that saw that moment would
resume from it and skip every change until the clock caught up. Such a run is served as
committed just after the newest run committed in the past (its changes offered again
after each later run, as duplicates a client applies harmlessly), so every moment served
is a real commit's, whatever the clocks said, and a run that commits later at an honest
time gives its changes at or after every moment a client can have resumed from.

Nothing is read until a ResourceSync document asks: then one pass over the runs'
``records`` table files indexes which run first archived each record and which run
archived its current version (two integers per record); a Change List page reads its
run's table files again rather than keeping every change in memory."""

from __future__ import annotations

import bisect
import logging
import threading
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from itertools import islice
from typing import TYPE_CHECKING, Protocol

from pith.links import links_for
from storage.archive.manifest import listed
from storage.archive.reader import CommittedArchive, table_batches
from storage.archive.stores import ObjectInfo, ObjectStore
from storage.publishing.resourcesync import CREATED, UPDATED, Described, w3c

from .sync_site import ChangeSpan

if TYPE_CHECKING:
    import pyarrow as pa

logger = logging.getLogger(__name__)

CHANGE_COLUMNS = ["pith_number", "bundle_sha256", "raw_sha256", "fetched_at", "accepted_as_current"]
MILLISECOND = timedelta(milliseconds=1)
BUNDLE_TYPE = "application/json"


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text)


@dataclass(frozen=True, slots=True)
class CommittedRun:
    """What the feed needs of one committed run."""

    run_id: str
    started_at: datetime
    committed_at: datetime
    records: tuple[ObjectInfo, ...]  # its records table files

    @property
    def key(self) -> str:
        """Its Change List's name: sorts as the commits follow one another."""
        return f"{self.committed_at:%Y%m%dT%H%M%S%f}Z-{self.run_id}"


def committed_runs(archive: CommittedArchive) -> list[CommittedRun]:
    """The archive's trusted runs in the order they committed."""
    runs = [
        CommittedRun(
            manifest["run_id"],
            _moment(manifest["started_at"]),
            _moment(manifest["committed_at"]),
            tuple(info for info in listed(manifest) if info.table == "records"),
        )
        for manifest in archive.manifests
    ]
    return sorted(runs, key=lambda run: (run.committed_at, run.run_id))


class Served(Protocol):
    """A served record's current version (``archive_source.ArchivedVersion``): what the
    Resource List says of it."""

    @property
    def bundle_sha256(self) -> str: ...
    @property
    def raw(self) -> ObjectInfo: ...
    @property
    def built_at(self) -> datetime | None: ...


@dataclass
class _Index:
    first_run: array  # by catalog position: the run that first archived the record
    current_run: array  # by catalog position: the run that archived its current version
    counts: list[int]  # changes per run
    batch_starts: list[list[int]]  # per run, the changes before each of its table batches


class ArchiveFeed:
    """The SyncFeed of an archive source: ``suffixes`` (sorted) are its catalog's,
    ``served`` gives each one's current version."""

    def __init__(
        self, store: ObjectStore, runs: list[CommittedRun], suffixes: Sequence[str], served: Mapping[str, Served]
    ):
        self.store, self.runs, self.suffixes, self.served = store, runs, suffixes, served
        self._lock = threading.Lock()
        self._index: _Index | None = None
        # the moments served, and until when they hold (None: for good, no run is in the future)
        self._served: tuple[list[datetime], datetime | None] | None = None

    def at(self) -> str | None:
        return w3c(self._moments()[-1]) if self.runs else None

    def resource(self, suffix: str, base: str) -> Described:
        version = self.served[suffix]
        run = self._indexed().current_run[self._position(suffix)]
        moment = self._moments()[run] if run >= 0 else version.built_at
        return Described(
            links_for(suffix, base)["bundle"],
            w3c(moment) if moment else None,
            version.raw.sha256,
            version.raw.size,
            BUNDLE_TYPE,
        )

    def spans(self) -> list[ChangeSpan]:
        counts, moments = self._indexed().counts, self._moments()
        return [
            ChangeSpan(run.key, w3c(self._earliest(k, moments)), w3c(moments[k]), counts[k])
            for k, run in enumerate(self.runs)
            if counts[k]
        ]

    def changes(self, span: ChangeSpan, start: int, stop: int, base: str) -> Iterator[Described]:
        k = next(k for k, run in enumerate(self.runs) if run.key == span.key)
        run, index, moments = self.runs[k], self._indexed(), self._moments()
        committed = moments[k]
        earliest = self._earliest(k, moments)
        latest = max(earliest, committed - MILLISECOND)  # a run in the future: its changes at its moment
        before = index.batch_starts[k]
        skip = max(0, bisect.bisect_right(before, start) - 1)  # batches wholly before ``start`` are not decoded
        n = before[skip] if before else 0
        for batch in islice(self._batches(run), skip, None):
            for position, row in self._rows(batch):
                if n >= stop:
                    return
                if n >= start:
                    fetched = min(max(row["fetched_at"], earliest), latest)
                    yield Described(
                        links_for(self.suffixes[position], base)["bundle"],
                        w3c(committed),
                        row["raw_sha256"],
                        change=CREATED if index.first_run[position] == k else UPDATED,
                        datetime=w3c(fetched),
                    )
                n += 1

    def _moments(self) -> list[datetime]:
        """When each run is said to have committed: as its manifest says, but for runs that
        say a moment later than now (the last in ``runs``, which sort by that moment), each
        given one millisecond after the run before it. Worked out again only when such a
        run's moment has come (a Resource List asks once per record)."""
        now = datetime.now(timezone.utc)
        served = self._served
        if served is None or (served[1] is not None and now >= served[1]):
            moments = [run.committed_at for run in self.runs]
            future = [k for k, run in enumerate(self.runs) if run.committed_at > now]
            for k in future:
                before = moments[k - 1] if k else min(self.runs[k].started_at, now)
                moments[k] = before + MILLISECOND
            served = self._served = (moments, self.runs[future[0]].committed_at if future else None)
        return served[0]

    def _earliest(self, k: int, moments: list[datetime]) -> datetime:
        """The earliest time a change of run ``k`` is given: just after the commit before it."""
        return moments[k - 1] + MILLISECOND if k else min(self.runs[k].started_at, moments[k] - MILLISECOND)

    def _position(self, suffix: str) -> int:
        return bisect.bisect_left(self.suffixes, suffix)

    def _batches(self, run: CommittedRun) -> Iterator[pa.RecordBatch]:
        for entry in run.records:
            yield from table_batches(self.store, entry, CHANGE_COLUMNS)

    def _rows(self, batch: pa.RecordBatch) -> Iterator[tuple[int, dict]]:
        """(catalog position, row) of each version in ``batch`` made current of a served record."""
        for row in batch.to_pylist():
            suffix = row["pith_number"][-26:]
            if row.get("accepted_as_current") is not False and suffix in self.served:
                yield self._position(suffix), row

    def _indexed(self) -> _Index:
        with self._lock:
            if self._index is None:
                self._index = self._index_runs()
            return self._index

    def _index_runs(self) -> _Index:
        size = len(self.suffixes)
        index = _Index(array("i", [-1]) * size, array("i", [-1]) * size, [0] * len(self.runs), [])
        current = [self.served[suffix].bundle_sha256 for suffix in self.suffixes]
        for k, run in enumerate(self.runs):
            index.batch_starts.append(starts := [])
            for batch in self._batches(run):
                starts.append(index.counts[k])
                for position, row in self._rows(batch):
                    index.counts[k] += 1
                    if index.first_run[position] < 0:
                        index.first_run[position] = k
                    if row["bundle_sha256"] == current[position]:
                        index.current_run[position] = k
        logger.info("ResourceSync: %d changes indexed over %d runs", sum(index.counts), len(self.runs))
        return index
