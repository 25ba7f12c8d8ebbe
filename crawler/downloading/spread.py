"""Spreading a crawl's bundle requests over the resolver and its mirrors.

Bundles verify themselves against the pinned keys, so any source's copy is as good as
the registry's, and against a real registry a crawl is bound by politeness to one host,
not by CPU: each extra mirror adds its own politeness budget. Every bundle request goes
to the source with the fewest of the crawl's bundle requests outstanding (ties in
turn), so a fast mirror takes more and a slow one less. Each source is its own Scrapy
download slot (``SourceSlots``): its own concurrency, delay, AutoThrottle and
robots.txt, even for two sources on one host.

Trust never comes from a source: a mirror that serves a rejected copy, another
record's bundle (``wrong_record``), one that is stale (older than the version another
source gave the archive) or forked from it, or that fails to answer (a timeout, a
refused connection, an HTTP error), is counted against its host
(``pith/hosts/<host>/...``) and, once it has served PITH_MIRROR_DEMOTE_AFTER bad
copies, demoted: it gets no more bundle requests. Until a mirror has served
PITH_MIRROR_HOLD_BACK more good copies than bad ones it is held back: at most
PITH_MIRROR_HOLD_BACK of its bundle requests in flight, so a bad mirror costs about
PITH_MIRROR_DEMOTE_AFTER requests (and a slow one that many timeouts), not every
request in flight when it is found out. The resolver itself is never held back nor
demoted (it is the crawl's origin; its bad copies are counted all the same). A record
whose copy a mirror served bad, or failed, is fetched again from a source that has
not served it yet.

With robots.txt obeyed, each source's robots.txt is asked for as the source joins the
crawl (``crawler.downloading.robots``), and every request to the source waits until it answers: a
source whose robots.txt has not answered yet gets no bundle request while another
source can take it, and one whose robots.txt did not answer within its deadline has
served one bad copy (``robots_failed``).
"""

import itertools
import logging
from collections import Counter
from collections.abc import Collection
from urllib.parse import urlsplit

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.signalmanager import SignalManager
from scrapy.statscollectors import StatsCollector
from scrapy.utils.httpobj import urlparse_cached

from .. import signals as pith_signals
from ..stat_keys import BAD_COPIES, Stat, StatFamily

logger = logging.getLogger(__name__)


def host_of(url: str) -> str:
    """``host:port`` of a URL (the port only when it names one)."""
    return urlsplit(url).netloc


class SourcePool:
    """The sources bundles are fetched from, the resolver first, and how each served."""

    def __init__(self, bases: list[str], demote_after: int = 3, hold_back: int = 2):
        self.bases: list[str] = []
        self.stats: StatsCollector | None = None  # the crawl's, once it starts (``join``)
        self.signals: SignalManager | None = None
        self.demote_after = demote_after
        self.hold_back = hold_back
        self.outstanding: Counter[str] = Counter()
        self.good: Counter[str] = Counter()
        self.bad: Counter[str] = Counter()
        self.demoted: set[str] = set()
        self.awaiting: set[str] = set()  # sources whose robots.txt has not answered yet
        self._turn = itertools.count()
        for base in bases:
            self.add(base)

    def join(self, crawler: Crawler) -> None:
        """Count into the crawl's stats and hear of its sources' robots.txt (the stats
        and the middlewares exist once it starts, after the spider)."""
        self.stats, self.signals = crawler.stats, crawler.signals
        self.demote_after = crawler.settings.getint("PITH_MIRROR_DEMOTE_AFTER")
        self.hold_back = crawler.settings.getint("PITH_MIRROR_HOLD_BACK")
        self.signals.connect(self.robots_awaited, signal=pith_signals.robots_awaited)
        self.signals.connect(self.robots_answered, signal=pith_signals.robots_answered)
        for base in self.bases:
            self.signals.send_catch_log(pith_signals.source_added, base=base)

    def add(self, base: str) -> None:
        if base not in self.bases:
            self.bases.append(base)
            if self.signals is not None:
                self.signals.send_catch_log(pith_signals.source_added, base=base)

    def robots_awaited(self, base: str) -> None:
        self.awaiting.add(base)

    def robots_answered(self, base: str, fetched: bool) -> None:
        """``base``'s robots.txt answered (``fetched``), or did not in time: a bad copy."""
        self.awaiting.discard(base)
        if not fetched:
            logger.warning(
                "robots.txt of %s did not answer (in time): it forbids nothing there, and counts as a bad copy", base
            )
            self.judged(base, "robots_failed")

    @property
    def resolver(self) -> str:
        return self.bases[0]

    def pick(self, tried: Collection[str] = ()) -> str | None:
        """The source for the next bundle request: of those not demoted and not in
        ``tried``, the one with the fewest bundle requests outstanding, passing over
        those held back with their few requests in flight, and those whose robots.txt
        has not answered, while another is left (the resolver, unless it was tried);
        None when every source was tried."""
        candidates = [base for base in self.bases if base not in tried and base not in self.demoted]
        usable = [base for base in candidates if not (self.held_back(base) and self.full(base))] or candidates
        usable = [base for base in usable if base not in self.awaiting] or usable
        if not usable:
            usable = [base for base in self.bases[:1] if base not in tried]  # the resolver is never demoted
        if not usable:
            return None
        turn = next(self._turn)
        chosen = min(
            usable, key=lambda base: (self.outstanding[base], (self.bases.index(base) - turn) % len(self.bases))
        )
        return self.take(chosen)

    def held_back(self, base: str) -> bool:
        """A mirror not yet trusted: it has not served ``hold_back`` more good copies
        than bad ones."""
        return base != self.resolver and self.good[base] < self.hold_back + self.bad[base]

    def full(self, base: str) -> bool:
        return self.outstanding[base] >= self.hold_back

    def take(self, base: str) -> str:
        """A bundle request goes to ``base``: counted as outstanding."""
        self.outstanding[base] += 1
        self._count(base, "requests")
        return base

    def done(self, base: str) -> None:
        """A bundle request to ``base`` ended (answered, unchanged, or failed for good)."""
        if self.outstanding[base] > 0:
            self.outstanding[base] -= 1

    def served(self, url: str) -> None:
        """A verified copy came from ``url``'s source."""
        base = self._base(url)
        self.good[base] += 1
        self._count(base, "records")

    def unchanged(self, url: str) -> None:
        """``url``'s source answered 304 to the validators of its own earlier copy: a
        good answer, though no copy."""
        self.good[self._base(url)] += 1

    def judged(self, url: str, what: str) -> None:
        """``url``'s source served a bad copy, or none (``what``: one of BAD_COPIES)."""
        base = self._base(url)
        self._count(base, what)
        if base == self.resolver or base in self.demoted:
            return
        self.bad[base] += 1
        if self.bad[base] >= self.demote_after:
            self.demoted.add(base)
            self._count_crawl(Stat.MIRRORS_DEMOTED)
            self._count(base, "demoted")
            logger.warning(
                "mirror %s demoted after %d bad copies (%s): no more bundle requests go to it",
                base,
                self.bad[base],
                ", ".join(f"{k} {self._counted(base, k)}" for k in BAD_COPIES),
            )

    def _base(self, url: str) -> str:
        netloc = host_of(url)
        return next((base for base in self.bases if host_of(base) == netloc), url)

    def _count(self, base: str, what: str) -> None:
        self._count_crawl(f"{StatFamily.HOSTS}{host_of(base)}/{what}")

    def _count_crawl(self, key: str) -> None:
        if self.stats is not None:
            self.stats.inc_value(key)

    def _counted(self, base: str, what: str) -> int:
        return self.stats.get_value(f"{StatFamily.HOSTS}{host_of(base)}/{what}", 0) if self.stats is not None else 0


class SourceSlots:
    """Downloader middleware: each source (``host:port``) is a download slot of its own,
    so per-host politeness (concurrency, delay, AutoThrottle) holds per source even
    when two sources share a host name, as on loopback. Scrapy's default slot is the
    host name alone."""

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        request.meta.setdefault("download_slot", urlparse_cached(request).netloc)
        return None
