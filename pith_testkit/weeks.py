"""A registry that changes week by week, for scheduled crawls to be tested and measured
against: ``serve --virtual N --week W`` serves the records ``--virtual N`` plans as
they stand at the end of week W.

Each week a share of the records gains a version: a new graph snapshot event, signed
by the corpus key, appended to every event the record had (so each version is the
append-only successor of the one before) and a newer ``built_at``, some time in that
week. Which records change, and when, is a pure function of (seed, week): week W+1
serves every version week W served, and one more for the records it changed.

What the listings say of it (``Weeks.dates``): ``honest`` gives each record the day
its current version was built, in the sitemaps and in ResourceSync; ``lying`` leaves
the date of the version before for a share of the changed records (a sitemap that is
not regenerated, a change feed that misses them: they are left out of the week's
Change List), and keeps it until an honest change; ``none`` gives no date at all."""

import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Literal, get_args

from pith.links import links_for
from storage.publishing.resourcesync import UPDATED, Described, w3c
from storage.serving.sync_site import ChangeSpan

from .corpus import REGISTRY_EPOCH, record_times

Dates = Literal["honest", "lying", "none"]
DATES: tuple[Dates, ...] = get_args(Dates)
WEEK = timedelta(days=7)
WEEK_ONE = REGISTRY_EPOCH + timedelta(days=9)  # after every record's first build (virtual.NEWEST)
STAMP = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class Weeks:
    """Which week is served (0: the records as first built), the share of the records
    that gains a version each week, what the listings say (see the module), and the
    share of each week's changed records whose date lies when ``dates`` is ``lying``."""

    week: int = 0
    changed: float = 0.01
    dates: Dates = "honest"
    lying: float = 1.0

    def __post_init__(self) -> None:
        if self.week < 0 or not 0 <= self.changed <= 1 or not 0 <= self.lying <= 1 or self.dates not in DATES:
            raise ValueError(f"not a registry week: {self}")


def week_start(week: int) -> datetime:
    return WEEK_ONE + (week - 1) * WEEK


@dataclass(frozen=True, slots=True)
class Change:
    week: int
    built_at: str
    listed: bool  # whether the listings say so (False: its date lies)


class ChangePlan:
    """Every change up to ``weeks.week`` of a registry of ``records`` (record indices)."""

    def __init__(self, seed: int, records: int, weeks: Weeks):
        self.seed, self.weeks = seed, weeks
        self.changes: dict[int, list[Change]] = {}
        self.by_week: list[list[int]] = [[]]  # week -> records it changed, as their changes followed
        for week in range(1, weeks.week + 1):
            drawn = random.Random(f"{seed}/week/{week}")  # noqa: S311 - a seeded, reproducible registry, not secrets
            changed = drawn.sample(range(records), round(weeks.changed * records))
            moments = {i: self._moment(week, i) for i in changed}
            for i in sorted(changed, key=lambda i: (moments[i], i)):
                self.changes.setdefault(i, []).append(Change(week, moments[i], self._listed(week, i)))
            self.by_week.append(sorted(changed, key=lambda i: (moments[i], i)))

    def _moment(self, week: int, index: int) -> str:
        rng = random.Random(f"{self.seed}/week/{week}/{index}")  # noqa: S311 - reproducible test data
        return (week_start(week) + timedelta(seconds=rng.randrange(int(WEEK.total_seconds())))).strftime(STAMP)

    def _listed(self, week: int, index: int) -> bool:
        if self.weeks.dates != "lying":
            return True
        return random.Random(f"{self.seed}/lie/{week}/{index}").random() >= self.weeks.lying  # noqa: S311

    def of(self, index: int) -> list[Change]:
        return self.changes.get(index, [])

    def built_at(self, index: int) -> str:
        """When the record's current version was built."""
        changes = self.of(index)
        return changes[-1].built_at if changes else record_times(self.seed, index)[1]

    def listed_built_at(self, index: int) -> str | None:
        """When the listings say it was built: its last change they told of (None: no date)."""
        if self.weeks.dates == "none":
            return None
        told = [change for change in self.of(index) if change.listed]
        return told[-1].built_at if told else record_times(self.seed, index)[1]

    @property
    def newest(self) -> datetime:
        """When the week served ends."""
        return week_start(self.weeks.week + 1)


def _moment(stamp: str) -> datetime:
    return datetime.strptime(stamp, STAMP).replace(tzinfo=timezone.utc)


class RegistryFeed:
    """The registry's ResourceSync (a SyncFeed): a Resource List of every bundle (no
    hashes: they would mean minting every record) and one Change List per week, of the
    changes its listings tell of."""

    def __init__(self, plan: ChangePlan, numbers: Sequence[str], index: Mapping[str, int]):
        self.plan, self.numbers, self.index = plan, numbers, index

    def at(self) -> str:
        return w3c(self.plan.newest)

    def resource(self, suffix: str, base: str) -> Described:
        listed = self.plan.listed_built_at(self.index[suffix])
        return Described(links_for(suffix, base)["bundle"], w3c(_moment(listed)) if listed else None)

    def spans(self) -> list[ChangeSpan]:
        return [
            ChangeSpan(f"week-{week:05d}", w3c(week_start(week)), w3c(week_start(week + 1)), len(self._told(week)))
            for week in range(1, self.plan.weeks.week + 1)
        ]

    def changes(self, span: ChangeSpan, start: int, stop: int, base: str) -> Iterator[Described]:
        week = int(span.key.removeprefix("week-"))
        for i, change in self._told(week)[start:stop]:
            moment = w3c(_moment(change.built_at))
            yield Described(links_for(self.numbers[i][-26:], base)["bundle"], moment, change=UPDATED, datetime=moment)

    def _told(self, week: int) -> list[tuple[int, Change]]:
        """The week's changes its Change List tells of, as they followed."""
        found = ((i, next(c for c in self.plan.of(i) if c.week == week)) for i in self.plan.by_week[week])
        return [(i, change) for i, change in found if change.listed]
