"""How far one crawl has read the resolver's listings (its sitemaps, or its ResourceSync
Change Lists instead): a small typed object in the spider's state, so that a ``--jobdir``
crawl resumes it (Scrapy's SpiderState pickles it) and the sitemap and Change List
walks share one record of it."""

from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum


class ChangeLists(StrEnum):
    """Where a crawl is with the resolver's Change Lists (none: not started)."""

    READING = "reading"
    READ = "read"  # every list read: what they did not name is skipped
    ABANDONED = "abandoned"  # given up, once, for the sitemaps


@dataclass
class ListingWalk:
    sitemap_seed: str | None = None  # the sitemap a seed named (the Change Lists stand in for it)
    change_lists: ChangeLists | None = None
    change_pages: int = 1  # Change List pages still to read
    sample_asked: bool = False  # the recheck sample asked (once a crawl, a resumed one too)
    sitemaps_read: set[str] = field(default_factory=set)
    sitemaps_listed: set[str] = field(default_factory=set)  # every sitemap an index named, read or not
    sitemap_walk: deque[str] = field(default_factory=deque)  # named by an index, not yet requested


def listing_walk(state: dict) -> ListingWalk:
    """The crawl's walk, kept in the spider's ``state``."""
    walk = state.get("listing")
    if not isinstance(walk, ListingWalk):  # a new crawl, or a job folder saved by an older version
        walk = state["listing"] = ListingWalk()
    return walk
