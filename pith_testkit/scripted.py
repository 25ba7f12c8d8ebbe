"""A registry whose listings say whatever a test scripts, written as plain files for a
static server (nginx): for testing a scheduled re-crawl against sources that lie.

The records are those ``VirtualCorpus(records, seed)`` mints; ``change`` gives one a new
version (its bundle's append-only successor, signed by the corpus key at a moment the
test picks) and says whether the listings are told of it. ``publish`` then writes the
listings as a ``Listing`` asks: a sitemap index over ``pages`` child sitemaps (gzipped
if asked), each record's ``<lastmod>`` and each child's date honest, frozen at what they
said first, absent or in the far future, and (with ``change_lists``) ResourceSync Change
Lists, one per publish, of the changes told since the one before, each entry's
``datetime`` honest or far in the future. A file whose bytes did not change is left as
it was, mtime included, so the static server answers it 304.
"""

import gzip
import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pith.links import links_for
from storage.publishing.resourcesync import (
    UPDATED,
    Described,
    ListPage,
    capability_list,
    change_list,
    change_list_index,
    source_description,
    w3c,
)
from storage.serving.pages import sitemap_index, sitemap_urlset
from storage.serving.record import compact_json
from storage.serving.resolver import SiteOptions
from storage.serving.source import KEYRING_NAME

from .mint import with_snapshot
from .static import export_site
from .virtual import VirtualCorpus

Dates = Literal["honest", "frozen", "absent", "future"]
FAR_FUTURE = "9999-12-31"
STAMP = "%Y-%m-%dT%H:%M:%SZ"
RS = "/resourcesync/"


@dataclass(frozen=True)
class Listing:
    """What the listings say this time."""

    record_dates: Dates = "honest"  # each record's <lastmod>
    index_dates: Dates = "honest"  # each child sitemap's date in the index
    gzip: bool = False  # the children as sitemap-N.xml.gz
    change_lists: bool = False  # ResourceSync Change Lists, besides the sitemaps
    change_dates: Literal["honest", "future"] = "honest"  # a Change List entry's datetime


class ScriptedRegistry:
    """One registry's records and listings, written into ``root`` for ``base``."""

    def __init__(self, root: Path, base: str, records: int, seed: int = 1, pages: int = 4):
        corpus = VirtualCorpus(records, seed, base)
        self.root, self.base, self.pages, self.signer = root, base, pages, corpus.signer
        export_site(corpus, base, root, SiteOptions())  # week 0's bundles, robots.txt, the key
        for listing in ("sitemap.xml", "sitemap-1.xml"):
            (root / listing).unlink(missing_ok=True)  # written by publish, as a listing asks
        corpus.write_keyring(root.parent / KEYRING_NAME)
        self.keyring = root.parent / KEYRING_NAME
        self.suffixes = list(corpus.catalog.suffixes)
        self.bundles = {s: json.loads(corpus.bundle_bytes(s) or b"{}") for s in self.suffixes}
        self.built = {s: str(bundle["built_at"]) for s, bundle in self.bundles.items()}
        self.told = dict(self.built)  # the build the listings were last told of, per record
        self.first: dict[str, str | None] = {}  # what each date said when first published (frozen)
        self.untold_changes: list[tuple[str, str]] = []  # (suffix, moment) not yet in a Change List
        self.change_pages: list[tuple[str, str, str]] = []  # (name, from, until) of each Change List

    def bundle_path(self, suffix: str) -> Path:
        return self.root / "pith" / suffix / "bundle.json"

    def change(self, suffix: str, at: datetime, told: bool = True) -> None:
        """A new version of the record, built at ``at``; ``told``: the listings know."""
        moment = at.astimezone(timezone.utc).strftime(STAMP)
        self.bundles[suffix] = with_snapshot(self.bundles[suffix], self.signer, moment)
        path = self.bundle_path(suffix)
        path.write_bytes(compact_json(self.bundles[suffix]))
        os.utime(path, (at.timestamp(), at.timestamp()))
        self.built[suffix] = moment
        if told:
            self.told[suffix] = moment
            self.untold_changes.append((suffix, moment))

    def served(self) -> dict[str, bytes]:
        """Each record's bundle bytes as served now."""
        return {s: self.bundle_path(s).read_bytes() for s in self.suffixes}

    def _date(self, key: str, honest: str | None, dates: Dates) -> str | None:
        self.first.setdefault(key, honest)
        return {"honest": honest, "frozen": self.first[key], "absent": None, "future": FAR_FUTURE}[dates]

    def publish(self, listing: Listing, now: datetime) -> None:
        """Write the listings as ``listing`` says, at ``now`` (the registry's clock)."""
        size = -(-len(self.suffixes) // self.pages)
        children, dates = [], []
        for n in range(self.pages):
            part = self.suffixes[n * size : (n + 1) * size]
            listed = {s: self._date(s, self.told[s][:10], listing.record_dates) for s in part}
            name = f"sitemap-{n + 1}.xml" + (".gz" if listing.gzip else "")
            text = sitemap_urlset(part, self.base, listed.__getitem__).encode()
            self._put(name, gzip.compress(text, mtime=0) if listing.gzip else text)
            children.append(name)
            dates.append(self._date(name, max(filter(None, listed.values()), default=None), listing.index_dates))
        index = sitemap_index(dates, self.base)
        for n, name in enumerate(children, 1):  # the index names each child by its own file
            index = index.replace(f"{self.base}/sitemap-{n}.xml<", f"{self.base}/{name}<")
        self._put("sitemap.xml", index.encode())
        if listing.change_lists:
            self._publish_changes(listing, now)

    def _publish_changes(self, listing: Listing, now: datetime) -> None:
        """A Change List of the changes told since the last publish, and the index of all."""
        capabilities, well_known = self.base + RS + "capabilitylist.xml", self.base + "/.well-known/resourcesync"
        self._put(".well-known/resourcesync", source_description(capabilities).encode())
        self._put(
            "resourcesync/capabilitylist.xml",
            capability_list(well_known, [("changelist", self.base + RS + "changelist.xml")]).encode(),
        )
        since = self.change_pages[-1][2] if self.change_pages else w3c(datetime(2026, 5, 1, tzinfo=timezone.utc))
        name, until = f"changelist-{len(self.change_pages) + 1:04d}.xml", w3c(now)
        entries = [
            Described(
                links_for(suffix, self.base)["bundle"],
                change=UPDATED,
                datetime=moment if listing.change_dates == "honest" else FAR_FUTURE + "T00:00:00Z",
            )
            for suffix, moment in self.untold_changes
        ]
        self._put("resourcesync/" + name, change_list(entries, capabilities, since, until).encode())
        self.change_pages.append((name, since, until))
        self.untold_changes = []
        pages = [ListPage(self.base + RS + page, from_=start, until=end) for page, start, end in self.change_pages]
        self._put(
            "resourcesync/changelist.xml", change_list_index(pages, capabilities, self.change_pages[0][1]).encode()
        )

    def _put(self, name: str, body: bytes) -> None:
        target = self.root / name
        if target.is_file() and target.read_bytes() == body:
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)
