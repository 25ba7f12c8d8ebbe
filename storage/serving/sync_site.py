"""A source's ResourceSync documents, answered by path: the Source Description at
``/.well-known/resourcesync``, the Capability List, the Resource List (an index of
pages once it outgrows one) and the Change List Index with its Change Lists, each
rendered from the source's SyncFeed one page at a time and kept in a small cache.
``/resourcesync/changelist.xml`` is the Change List of every span while they fit one
page (what ``resync-sync``, the reference client, can read: it cannot read a Change
List Index), else the Change List Index of one list per span and page.

Paths are only ever looked up (a page number, a key among the feed's spans), never
turned into a file name."""

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from typing import Protocol

from storage.publishing import resourcesync as rs

from .catalog import CatalogView
from .http import Response, text_response

XML = "application/xml"
PREFIX = "/resourcesync/"
CAPABILITY_LIST = PREFIX + "capabilitylist.xml"
RESOURCE_LIST = PREFIX + "resourcelist.xml"
CHANGE_LIST = PREFIX + "changelist.xml"
_RESOURCE_PAGE = re.compile(r"^/resourcesync/resourcelist-([1-9][0-9]{0,8})\.xml$")
_CHANGE_PAGE = re.compile(r"^/resourcesync/changelist-([A-Za-z0-9_.-]{1,160})-([0-9]{5})\.xml$")
NOT_FOUND = text_response(404)


@dataclass(frozen=True, slots=True)
class ChangeSpan:
    """One Change List of a feed: the changes of one span of time (an archive's run, a
    registry's week). ``key`` names it in URLs; keys sort as the spans follow in time."""

    key: str
    from_: str
    until: str | None
    count: int


class SyncFeed(Protocol):
    """What a source publishes over ResourceSync."""

    def at(self) -> str | None:
        """When the state the Resource List describes was current."""

    def resource(self, suffix: str, base: str) -> rs.Described:
        """A catalogued record's bundle as the Resource List describes it."""

    def spans(self) -> list[ChangeSpan]:
        """The Change Lists, oldest first."""

    def changes(self, span: ChangeSpan, start: int, stop: int, base: str) -> Iterable[rs.Described]:
        """Entries ``start`` to ``stop`` of a span's changes, in the order they happened."""


class SyncSite:
    """The ResourceSync documents of ``feed`` about ``catalog``'s records, at ``base``."""

    def __init__(self, feed: SyncFeed, catalog: CatalogView, base: str, page_size: int, modified: float | None):
        self.feed, self.catalog, self.base = feed, catalog, base
        self.page_size, self.modified = page_size, modified
        self._page = lru_cache(maxsize=8)(self._render)

    def url(self, path: str) -> str:
        return self.base + path

    def respond(self, path: str) -> Response:
        if path == rs.WELL_KNOWN:
            return self._xml(rs.source_description(self.url(CAPABILITY_LIST)))
        if path == CAPABILITY_LIST:
            offered = [("resourcelist", self.url(RESOURCE_LIST)), ("changelist", self.url(CHANGE_LIST))]
            return self._xml(rs.capability_list(self.url(rs.WELL_KNOWN), offered))
        if path in (RESOURCE_LIST, CHANGE_LIST):
            return self._page(path, "", 0)
        page = _RESOURCE_PAGE.match(path)
        if page:
            return self._page(RESOURCE_LIST, "", int(page.group(1)))
        change = _CHANGE_PAGE.match(path)
        if change:
            return self._page(CHANGE_LIST, change.group(1), int(change.group(2)))
        return NOT_FOUND

    def _xml(self, text: str) -> Response:
        return Response(200, text.encode("utf-8"), XML, self.modified, document="resourcesync")

    def _render(self, path: str, key: str, page: int) -> Response:
        if path == RESOURCE_LIST:
            text = self._resources(page)
        elif not key:
            text = self._all_changes() if page == 0 else None
        else:
            text = self._changes(key, page)
        return NOT_FOUND if text is None else self._xml(text)

    def _pages(self, count: int) -> int:
        return -(-count // self.page_size)

    def _resources(self, page: int) -> str | None:
        """Page 0 is the Resource List itself while it fits one page, else its index."""
        suffixes, size, up = self.catalog.suffixes, self.page_size, self.url(CAPABILITY_LIST)
        pages, at = self._pages(len(suffixes)), self.feed.at()
        if page == 0 and pages > 1:
            listed = (rs.ListPage(self.url(f"{PREFIX}resourcelist-{n}.xml"), at=at) for n in range(1, pages + 1))
            return rs.resource_list_index(listed, up, at)
        if page > (pages if pages > 1 else 0):
            return None
        chosen = suffixes if page == 0 else suffixes[(page - 1) * size : page * size]
        index = self.url(RESOURCE_LIST) if page else None
        return rs.resource_list((self.feed.resource(s, self.base) for s in chosen), up, at, index)

    def _change_list_url(self, span: ChangeSpan, page: int) -> str:
        return self.url(f"{PREFIX}changelist-{span.key}-{page:05d}.xml")

    def _all_changes(self) -> str:
        """The Change List of every span while they fit one page, else their index."""
        spans = self.feed.spans()
        if sum(span.count for span in spans) > self.page_size:
            return self._change_index(spans)
        entries = chain.from_iterable(self.feed.changes(span, 0, span.count, self.base) for span in spans)
        return rs.change_list(entries, self.url(CAPABILITY_LIST), spans[0].from_ if spans else self.feed.at(), None)

    def _change_index(self, spans: list[ChangeSpan]) -> str:
        lists = [
            rs.ListPage(self._change_list_url(span, n), from_=span.from_, until=span.until)
            for span in spans
            for n in range(1, self._pages(span.count) + 1)
        ]
        return rs.change_list_index(lists, self.url(CAPABILITY_LIST), spans[0].from_ if spans else None)

    def _changes(self, key: str, page: int) -> str | None:
        span = next((span for span in self.feed.spans() if span.key == key), None)
        if span is None or not 0 < page <= self._pages(span.count):
            return None
        start = (page - 1) * self.page_size
        entries = self.feed.changes(span, start, start + self.page_size, self.base)
        up, index = self.url(CAPABILITY_LIST), self.url(CHANGE_LIST)
        return rs.change_list(entries, up, span.from_, span.until, index)
