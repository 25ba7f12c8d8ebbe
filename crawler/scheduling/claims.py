"""Claiming records, whichever scheduler does it: one vocabulary, one claim loop, and
what the spider may ask of the crawl's scheduler.

A record is claimed by its suffix: the first time the crawl names it, it is this
crawl's (CLAIMED); every later time it is SEEN, and past --max-records it is FULL. A
crawl on one machine claims in its seen-set on disk (``crawler.scheduling.seen``), a
crawl shared by many workers in Redis (``crawler.frontier``); both schedulers hand
the records their responses named to ``claim_found``, which claims and counts them.
"""

from collections.abc import Iterable
from itertools import groupby
from typing import Protocol, TypeVar, runtime_checkable

from scrapy.statscollectors import StatsCollector

from ..stat_keys import Stat

CLAIMED, SEEN, FULL = "claimed", "seen", "full"
BUNDLE, PAGE = "b", "p"  # the record tasks: the spider rebuilds them from suffix and depth

Opening = tuple[str, int]  # a record a response names: its suffix, and the link depth it was named at
Kept = TypeVar("Kept")


def record_task(kind: str, suffix: str) -> str:
    """The task (``meta[Meta.TASK]``) of a record's BUNDLE or PAGE work."""
    return f"{kind}:{suffix}"


class ClaimLedger(Protocol):
    """Where records are claimed: the seen-set on disk, or a shared frontier."""

    def claim(self, suffixes: Iterable[str], depth: int, limit: int = 0) -> list[tuple[str, str]]:
        """``(suffix, verdict)`` for each suffix once, in order; ``limit``: --max-records (0: none)."""
        ...


@runtime_checkable
class RecordScheduler(Protocol):
    """What the spider may ask of the crawl's scheduler, the local one or a shared frontier's."""

    def records_full(self) -> bool:
        """--max-records reached, counting the records found so far: no record will be
        claimed any more."""
        ...


def claim_found(
    found: list[tuple[Opening, Kept]], ledger: ClaimLedger, limit: int, stats: StatsCollector | None
) -> list[Kept]:
    """Claim the records found, ``(opening, kept)`` each, in one call to the ledger per
    consecutive group of one depth, and count the verdicts: what was kept with each record claimed
    now, in order (a record named twice is claimed once)."""
    claimed = []
    for depth, group in groupby(found, key=lambda entry: entry[0][1]):
        named = list(group)
        verdicts = dict(ledger.claim([suffix for (suffix, _), _ in named], depth, limit))
        for (suffix, _), kept in named:
            verdict = verdicts.pop(suffix, None)
            if verdict == CLAIMED:
                claimed.append(kept)
                if stats is not None:
                    stats.inc_value(Stat.RECORDS_FOUND)
            elif verdict == FULL and stats is not None:
                stats.inc_value(Stat.RECORDS_SKIPPED_MAX_RECORDS)
    return claimed
