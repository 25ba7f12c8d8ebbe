"""Two verified copies of one record, fetched from different resolvers, compared by
their events: the same history, one an append-only extension of the other, or a fork.

A registry only ever appends events, so of two honest copies one's events are a
prefix of the other's (a mirror may lag behind, never disagree). Copies that part
(at some position each holds a different event) show a split view: a registry or
mirror serving readers different histories of one record. Events are compared by
``event_id``, which hashes each event's signed content.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SAME, EXTENDS, FORK = "same", "extends", "fork"


@dataclass(frozen=True)
class Comparison:
    relation: str  # SAME (equal event lists), EXTENDS (one list is a proper prefix of the other) or FORK
    parted_at: int  # the first position where the lists differ (the shorter one's length when one extends)


def event_ids(bundle: dict[str, Any]) -> tuple[str, ...]:
    """A verified bundle's event ids, in order."""
    return tuple(event["event_id"] for event in bundle["events"])


def compare(first: Sequence[str], second: Sequence[str]) -> Comparison:
    """How two copies' event id lists relate (symmetric: which one is longer is not said)."""
    shorter = min(len(first), len(second))
    parted_at = next((i for i in range(shorter) if first[i] != second[i]), shorter)
    if parted_at < shorter:
        return Comparison(FORK, parted_at)
    return Comparison(SAME if len(first) == len(second) else EXTENDS, parted_at)


@dataclass(frozen=True)
class Equivocation:
    """This copy of a record forks from the copy of it that another resolver served
    (``other_url`` None: the archive's current version, whose source is not kept)."""

    other_url: str | None
    other_bundle_sha256: str
    detail: str

    @classmethod
    def of(
        cls,
        url: str,
        ours: Sequence[str],
        other_url: str,
        other_bundle_sha256: str,
        theirs: Sequence[str],
        parted_at: int,
    ) -> "Equivocation":
        """This copy (``url``, event ids ``ours``) against the other, parted at ``parted_at`` (see ``compare``)."""
        return cls(
            other_url,
            other_bundle_sha256,
            (
                f"{url} and {other_url} serve forked histories of the record: at events[{parted_at}] one holds "
                f"{ours[parted_at]}, the other {theirs[parted_at]} ({len(ours)} and {len(theirs)} events); "
                "neither extends the other"
            ),
        )
