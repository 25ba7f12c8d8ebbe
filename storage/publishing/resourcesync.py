"""ResourceSync documents (ANSI/NISO Z39.99-2017, the Sitemap protocol extended with
``rs:md`` and ``rs:ln``), written from plain values so that any source can publish them:
``serve`` of an archive, and the test kit's changing registry.

A source publishes a Source Description at ``/.well-known/resourcesync``, which names
its Capability List, which names its Resource List and its Change List Index; lists
longer than MAX_ENTRIES are split into pages under an index, as the Sitemap protocol
asks. Each document is one page at most: a caller renders the page asked for, never a
whole archive at once. Pure functions of their inputs, so the same state always
renders the same bytes (and the same ETag)."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from xml.sax.saxutils import escape as xml_escape
from xml.sax.saxutils import quoteattr

SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
RS_NS = "http://www.openarchives.org/rs/terms/"
MAX_ENTRIES = 50_000  # URLs in one sitemap, and so in one ResourceSync list
WELL_KNOWN = "/.well-known/resourcesync"
CREATED, UPDATED = "created", "updated"


def w3c(moment: datetime) -> str:
    """A UTC moment as ResourceSync writes one: to the millisecond, with a ``Z``."""
    moment = moment.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@dataclass(frozen=True, slots=True)
class Described:
    """One ``<url>`` of a list: a resource (a Resource List), or a change to one (a
    Change List: ``change`` and ``datetime``, when the change happened, are set)."""

    loc: str
    lastmod: str | None = None
    sha256: str | None = None
    length: int | None = None
    mime_type: str | None = None
    change: str | None = None
    datetime: str | None = None

    def xml(self) -> str:
        lastmod = f"<lastmod>{self.lastmod}</lastmod>" if self.lastmod else ""
        attributes = {
            "change": self.change,
            "datetime": self.datetime,
            "hash": f"sha-256:{self.sha256}" if self.sha256 else None,
            "length": None if self.length is None else str(self.length),
            "type": self.mime_type,
        }
        return f"<url><loc>{xml_escape(self.loc)}</loc>{lastmod}{_md(attributes)}</url>\n"


@dataclass(frozen=True, slots=True)
class ListPage:
    """One ``<sitemap>`` of an index: a page of a list, with its own times."""

    loc: str
    at: str | None = None
    from_: str | None = None
    until: str | None = None

    def xml(self) -> str:
        return f"<sitemap><loc>{xml_escape(self.loc)}</loc>{_md(self._times())}</sitemap>\n"

    def _times(self) -> dict[str, str | None]:
        return {"at": self.at, "from": self.from_, "until": self.until}


def _md(attributes: dict[str, str | None]) -> str:
    given = "".join(f" {name}={quoteattr(value)}" for name, value in attributes.items() if value is not None)
    return f"<rs:md{given}/>" if given else ""


def _ln(rel: str, href: str) -> str:
    return f"<rs:ln rel={quoteattr(rel)} href={quoteattr(href)}/>\n"


def _document(root: str, head: str, items: Iterable[str]) -> str:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<{root} xmlns="{SITEMAP_NS}" xmlns:rs="{RS_NS}">\n'
        f"{head}{''.join(items)}</{root}>\n"
    )


def source_description(capability_list: str) -> str:
    """``/.well-known/resourcesync``: this source's one Capability List."""
    head = _md({"capability": "description"}) + "\n"
    return _document(
        "urlset",
        head,
        [f"<url><loc>{xml_escape(capability_list)}</loc>{_md({'capability': 'capabilitylist'})}</url>\n"],
    )


def capability_list(source_description_url: str, capabilities: Iterable[tuple[str, str]]) -> str:
    """The Capability List: each (capability, URL) the source offers."""
    head = _ln("up", source_description_url) + _md({"capability": "capabilitylist"}) + "\n"
    items = [f"<url><loc>{xml_escape(url)}</loc>{_md({'capability': name})}</url>\n" for name, url in capabilities]
    return _document("urlset", head, items)


def resource_list(
    entries: Iterable[Described], capability_list_url: str, at: str | None, index: str | None = None
) -> str:
    """A Resource List, or one page of it (``index`` names the Resource List Index)."""
    links = _ln("up", capability_list_url) + (_ln("index", index) if index else "")
    head = links + _md({"capability": "resourcelist", "at": at}) + "\n"
    return _document("urlset", head, (entry.xml() for entry in entries))


def resource_list_index(pages: Iterable[ListPage], capability_list_url: str, at: str | None) -> str:
    head = _ln("up", capability_list_url) + _md({"capability": "resourcelist", "at": at}) + "\n"
    return _document("sitemapindex", head, (page.xml() for page in pages))


def change_list(
    entries: Iterable[Described],
    capability_list_url: str,
    from_: str | None,
    until: str | None,
    index: str | None = None,
) -> str:
    """A Change List covering [``from_``, ``until``] (``until`` None: still open)."""
    links = _ln("up", capability_list_url) + (_ln("index", index) if index else "")
    head = links + _md({"capability": "changelist", "from": from_, "until": until}) + "\n"
    return _document("urlset", head, (entry.xml() for entry in entries))


def change_list_index(lists: Iterable[ListPage], capability_list_url: str, from_: str | None) -> str:
    """The Change List Index: every Change List, oldest first, the index still open."""
    head = _ln("up", capability_list_url) + _md({"capability": "changelist", "from": from_}) + "\n"
    return _document("sitemapindex", head, (page.xml() for page in lists))
