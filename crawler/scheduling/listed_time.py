"""Time as a re-crawl reads it: the dates a source lists (``<lastmod>``, a Change List's
``datetime``, an index's ``until``) and the stamps this machine left (confirmations,
fetch times), each bounded by the crawl's own clock.

Neither side is taken on its word. A source's date later than the crawl's clock plus one
day (``SLACK``: time zones, a day-only date, a clock a little behind) is no date at all:
the record is asked as one listed without a date, and the date is never kept. A stamp of
this machine's later than its clock now was left by a crawl whose clock was fast: what it
confirmed is due again. So a clock that jumped once, either way, costs requests for one
crawl, never a record for good.
"""

from dataclasses import dataclass, field
from datetime import date, datetime, timezone

DAY = 86_400_000_000  # microseconds
SLACK = DAY  # how far past the crawl's clock a source's date may be and still count


def micros(when: datetime) -> int:
    return int(when.timestamp() * 1_000_000)


def now_micros() -> int:
    return micros(datetime.now(timezone.utc))


Listed = tuple[int, bool]  # microseconds since the epoch, and whether a day only


def listed_date(text: str | None) -> Listed | None:
    """A W3C datetime (``2026-05-24``, ``2026-05-24T10:00:00Z``) as microseconds since
    the epoch, and whether it is a day only; None when absent or unreadable."""
    if not text:
        return None
    text = text.strip()
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return micros(datetime(day.year, day.month, day.day, tzinfo=timezone.utc)), True
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return micros(when if when.tzinfo else when.replace(tzinfo=timezone.utc)), False


def changed_since(listed: Listed, then: Listed) -> bool:
    """Whether a listed date (``listed_date``) is after ``then``; when either is a day
    only, the same day counts as maybe changed."""
    when, day_only = listed
    reference, reference_day_only = then
    return when >= reference - reference % DAY if day_only or reference_day_only else when > reference


@dataclass
class CrawlClock:
    """The crawl's clock, read once when it starts, and the source dates it refused."""

    now: int = field(default_factory=now_micros)
    future_dates: int = 0  # source dates past ``now + SLACK``, counted as none

    def credible(self, text: str | None) -> Listed | None:
        """A source's date, or None when it gives none, an unreadable one, or one in the
        future (counted in ``future_dates``)."""
        listed = listed_date(text)
        if listed is not None and self.bounded(listed) is None:
            self.future_dates += 1
            return None
        return listed

    def bounded(self, listed: Listed | None) -> Listed | None:
        """A date kept from an earlier crawl, or None when it is later than the clock
        allows (kept by a crawl whose clock was fast, or before dates were bounded)."""
        return None if listed is None or listed[0] > self.now + SLACK else listed

    def newest(self, *texts: str | None) -> str | None:
        """Of W3C datetimes, the latest this clock finds credible (a Change List entry's
        ``datetime`` and ``lastmod``: the change, and when the resolver published it)."""
        dated = [(when, text) for text in texts if (when := self.credible(text)) is not None]
        return max(dated)[1] if dated else None
