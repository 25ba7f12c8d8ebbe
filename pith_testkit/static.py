"""A served source written out as plain files in the resolver's paths, for a static
server (nginx) to serve: each record's bundle, the listings (the sitemap and its pages,
the ResourceSync documents when the source publishes them, found by following the
``<loc>`` links from ``/sitemap.xml`` and ``/.well-known/resourcesync``), robots.txt,
the mirror list and the signing key. Each file's mtime is the Last-Modified the
project's own server gives it, so a static server's validators follow the same dates.

Writing week after week into one folder keeps the files that did not change as they
were, mtime included: a conditional request to a static server is then answered 304."""

import os
import re
from pathlib import Path

from storage.serving.http import Request, Response
from storage.serving.resolver import ResolverSite, SiteOptions
from storage.serving.source import RecordSource

LISTINGS = ("/sitemap.xml", "/.well-known/resourcesync")
OTHERS = ("/robots.txt", "/pith-mirrors.json", "/pith-signing-key.json")
LISTING_PATH = re.compile(r"^/(?:sitemap-[0-9]+\.xml|resourcesync/[A-Za-z0-9_.-]+\.xml)$")
LOC = re.compile(r"<loc>([^<]+)</loc>")


def export_site(source: RecordSource, base_url: str, out: Path, options: SiteOptions = SiteOptions()) -> int:
    """Write the site of ``source`` (links rooted at ``base_url``) into ``out``; returns
    how many files were written (not counting those left as they were)."""
    site = ResolverSite(source, base_url, options)
    bundles = (f"/pith/{suffix}/bundle.json" for suffix in source.catalog.suffixes)
    written = sum(_put(out, path, _get(site, path)) for path in (*bundles, *OTHERS))
    todo, seen = list(LISTINGS), set(LISTINGS)
    while todo:
        path = todo.pop()
        response = _get(site, path)
        written += _put(out, path, response)
        for url in LOC.findall(response.body.decode("utf-8") if response.status == 200 else ""):
            linked = url.removeprefix(site.base)
            if LISTING_PATH.match(linked) and linked not in seen:
                seen.add(linked)
                todo.append(linked)
    return written


def _get(site: ResolverSite, path: str) -> Response:
    return site.respond(Request("GET", path, path, {}, "HTTP/1.1", {}))


def _put(out: Path, path: str, response: Response) -> bool:
    """Write the answer at ``path`` unless it is there already (or not a 200); True when written."""
    target = out / path.lstrip("/")
    if response.status != 200 or (target.is_file() and target.read_bytes() == response.body):
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(response.body)
    if response.last_modified:
        os.utime(target, (response.last_modified, response.last_modified))
    return True
