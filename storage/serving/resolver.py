"""The resolver layout of PITH-FORMAT.md, answered from a RecordSource: which Response
each request path gets. Request text is only ever looked up in the catalog (never
turned into a filesystem path), so no path can reach outside the served records.

Documents about one record are rendered once and kept in a bounded LRU cache; bundles
are the stored bytes, never re-serialized.
"""

import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from pith.links import links_for
from pith.parse import parse
from pith.reasons import Rejected
from storage.publishing.resourcesync import WELL_KNOWN as WELL_KNOWN_RESOURCESYNC

from . import pages
from .http import Request, Response, redirect, text_response
from .peer_files import PREFIXES as PEER_PREFIXES
from .record import RecordView, compact_json
from .source import RecordSource
from .sync_site import PREFIX as SYNC_PREFIX
from .sync_site import SyncSite

logger = logging.getLogger(__name__)

JSON = "application/json"
JSONLD = "application/ld+json"
HTML = "text/html; charset=utf-8"
XML = "application/xml"
TEXT = "text/plain; charset=utf-8"
OCTETS = "application/octet-stream"
RECORD_TAILS = {"/bundle.json": "bundle", "/state.json": "state"}
WELL_KNOWN = "/.well-known/pith/"
SITEMAP_PAGE_RE = re.compile(r"^/sitemap-([1-9][0-9]{0,8})\.xml$")
NOT_FOUND = text_response(404)
NOT_ALLOWED = text_response(405, headers=(("Allow", "GET, HEAD"),))


@dataclass(frozen=True)
class SiteOptions:
    name: str = "pith-archiver mirror"
    sitemap_page_size: int = 50_000
    disallow: tuple[str, ...] = ()  # paths robots.txt asks crawlers to avoid
    cache_size: int = 4096  # record documents kept rendered


class ResolverSite:
    def __init__(self, source: RecordSource, base_url: str, options: SiteOptions = SiteOptions()):
        self.source = source
        self.catalog = source.catalog
        self.base = base_url.rstrip("/")
        self.options = options
        newest = self.catalog.newest_epoch or None
        self._static = {
            "/": Response(
                200,
                pages.home_page(self.base, options.name, len(self.catalog)).encode("utf-8"),
                HTML,
                newest,
                document="home",
            ),
            "/robots.txt": Response(
                200, pages.robots_txt(self.base, options.disallow).encode("utf-8"), TEXT, newest, document="robots"
            ),
            "/pith-mirrors.json": Response(
                200,
                compact_json(pages.mirror_list(self.base, options.name, self.catalog.public_keys)),
                JSON,
                newest,
                document="mirror_list",
            ),
        }
        key_document = source.signing_key_document or (
            compact_json(self.catalog.signing_key) if self.catalog.signing_key is not None else None
        )
        if key_document is not None:
            self._static["/pith-signing-key.json"] = Response(200, key_document, JSON, newest, document="signing_key")
        feed = source.sync_feed()
        self._sync = SyncSite(feed, self.catalog, self.base, options.sitemap_page_size, newest) if feed else None
        self._record_document = lru_cache(maxsize=options.cache_size)(self._render)
        self._sitemap = lru_cache(maxsize=8)(self._render_sitemap)

    def respond(self, request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return NOT_ALLOWED
        path = request.path
        static = self._static.get(path)
        if static is not None:
            return static
        if path.startswith("/pith/"):
            return self._record(path[len("/pith/") :], request)
        if path.startswith(WELL_KNOWN) and path.endswith("/bundle.json"):
            return self._well_known(path[len(WELL_KNOWN) : -len("/bundle.json")])
        if path == "/resolve":
            suffix = self.catalog.resolve(request.query.get("id", ""))
            return redirect(links_for(suffix, self.base)["resolver"]) if suffix else NOT_FOUND
        if path == WELL_KNOWN_RESOURCESYNC or path.startswith(SYNC_PREFIX):
            return self._sync.respond(path) if self._sync else NOT_FOUND
        if path[1:].startswith(PEER_PREFIXES):
            return self._peer_file(request.raw_path[1:])
        page = SITEMAP_PAGE_RE.match(path)
        if path == "/sitemap.xml" or page:
            return self._sitemap(int(page.group(1)) if page else 0)
        return NOT_FOUND

    def _peer_file(self, path: str) -> Response:
        """A file of the archive as a peer reads it (``storage.serving.peer_files``)."""
        files = self.source.peer_files()
        data = files.get(path) if files is not None else None
        if data is None:
            return NOT_FOUND
        kind = JSON if path.endswith(".json") else OCTETS  # tiles; signed notes read as bytes
        return Response(200, data, kind, document="peer_file")

    # --- records -------------------------------------------------------------------
    def _record(self, rest: str, request: Request) -> Response:
        identifier, tail, document = rest, "", "page"
        for ending, kind in RECORD_TAILS.items():
            if rest.endswith(ending):
                identifier, tail, document = rest[: -len(ending)], ending, kind
        if identifier in self.catalog:
            if document == "page" and request.accepts("accept", JSONLD):
                document = "jsonld"
            return self._record_document(identifier, document)
        suffix = self.catalog.resolve(identifier)
        return redirect(f"{self.base}/pith/{suffix}{tail}") if suffix else NOT_FOUND

    def _well_known(self, identifier: str) -> Response:
        if identifier in self.catalog:
            return self._record_document(identifier, "bundle")
        suffix = self.catalog.resolve(identifier)
        return redirect(links_for(suffix, self.base)["well_known_bundle"]) if suffix else NOT_FOUND

    def _render(self, suffix: str, document: str) -> Response:
        raw = self.source.bundle_bytes(suffix)
        if raw is None:
            return NOT_FOUND
        modified = self.catalog.entry(suffix).built_at_epoch or None
        if document == "bundle":
            return Response(200, raw, JSON, modified, record=suffix, document="bundle")
        try:
            bundle = parse(raw).data
            if not isinstance(bundle, dict):
                raise TypeError("a bundle is an object")
            state = bundle["state"] if document == "state" else None
        except (Rejected, KeyError, TypeError) as exc:
            logger.warning("stored bundle %s is unusable: %s", suffix, exc)
            return text_response(500, "the stored bundle is unreadable")
        if document == "state":
            return Response(200, compact_json(state), JSON, modified, record=suffix, document="state")
        view = RecordView.from_bundle(bundle)
        cites, cited_by = list(self.catalog.entry(suffix).cites), self.catalog.cited_by(suffix)
        if document == "jsonld":
            body = compact_json(pages.record_jsonld(view, suffix, cites, cited_by, self.base))
            return Response(200, body, JSONLD, modified, vary=("Accept",), record=suffix, document="jsonld")
        body = pages.record_page(view, suffix, cites, cited_by, self.catalog, self.base).encode("utf-8")
        return Response(200, body, HTML, modified, vary=("Accept",), record=suffix, document="page")

    # --- sitemap -----------------------------------------------------------------------
    def is_slow(self, request: Request) -> bool:
        """Whether answering may read much of the source (a server answers it off its loop)."""
        return request.path.startswith(SYNC_PREFIX) or request.path[1:].startswith(PEER_PREFIXES)

    def _render_sitemap(self, page: int) -> Response:
        """Page 0 is /sitemap.xml: the urlset itself while it fits one page, else an index
        giving each page the newest ``<lastmod>`` of its records. A page's Last-Modified
        is when the newest of its records was built."""
        size, suffixes = self.options.sitemap_page_size, self.catalog.suffixes
        pages_needed = max(1, math.ceil(len(suffixes) / size))
        if page == 0 and pages_needed > 1:
            dates = [self._newest_date(suffixes[n * size : (n + 1) * size]) for n in range(pages_needed)]
            text, built = pages.sitemap_index(dates, self.base), self.catalog.newest_epoch
        elif page == 0 or (pages_needed > 1 and page <= pages_needed):
            listed = suffixes[(page - 1) * size : page * size] if page else suffixes
            text = pages.sitemap_urlset(listed, self.base, self.source.listed_date)
            built = max((self.catalog.entry(s).built_at_epoch for s in listed), default=0.0)
        else:
            return NOT_FOUND
        return Response(200, text.encode("utf-8"), XML, built or None, document="sitemap")

    def _newest_date(self, suffixes: Sequence[str]) -> str | None:
        return max(filter(None, map(self.source.listed_date, suffixes)), default=None)
