"""The documents a mirror writes itself (everything but bundles): record pages in HTML
and JSON-LD, the sitemap, robots.txt, the mirror list and the home page. Pure
functions of their inputs, so the same record always renders the same bytes."""

import json
from collections.abc import Callable, Iterable, Sequence
from html import escape
from xml.sax.saxutils import escape as xml_escape

from pith.links import MIRROR_LIST_TYPE, links_for

from .catalog import CatalogView
from .record import RecordView

SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def papers(count: int) -> str:
    return f"{count} paper{'' if count == 1 else 's'} in Pith"


def _record_links(suffixes: Iterable[str], catalog: CatalogView, base: str) -> str:
    items = "".join(
        f'<li><a href="{escape(links_for(s, base)["resolver"])}">{escape(catalog.entry(s).pith_number)}</a></li>'
        for s in suffixes
        if s in catalog
    )
    return f"<ul>{items}</ul>"


def record_page(
    view: RecordView, suffix: str, cites: list[str], cited_by: list[str], catalog: CatalogView, base: str
) -> str:
    """The HTML record page: the facts the registry's page shows, the bundle and state
    links, and links to the records this one cites and that cite it."""
    links = links_for(suffix, base)
    source = view.source
    aliases = " · ".join(f"{escape(kind)}: {escape(value)}" for kind, value in view.aliases)
    record_json = json.dumps(view.canonical_record, indent=2, sort_keys=True, ensure_ascii=False)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>{escape(view.title or view.pith_number)} · {escape(view.short_pith_number)}</title>
<link rel="canonical" href="{escape(links["resolver"])}">
<link rel="alternate" type="application/ld+json" href="{escape(links["resolver"])}">
<link rel="alternate" type="application/json" href="{escape(links["bundle"])}">
</head><body>
<header><a href="{escape(base)}/">pith.</a></header>
<main>
<p>Pith Number</p>
<h1>{escape(view.short_pith_number)}</h1>
<p class="pith-number">{escape(view.pith_number)}</p>
<h2 class="title">{escape(view.title)}</h2>
<p class="authors">{escape(view.authors_text)}</p>
<p class="source">{escape(str(source.get("kind", "")))}:{escape(str(source.get("id", "")))} v{escape(str(source.get("version", "")))} · {escape(view.submitted_date)} · {escape(" · ".join(view.categories))}</p>
<section class="bundle"><p>Portable graph bundle · <a href="{escape(links["bundle"])}">download bundle</a> · <a href="{escape(links["state"])}">merged state</a> · <a href="{escape(links["well_known_bundle"])}">well-known bundle</a></p></section>
<section class="cites"><h2>Cites</h2><p>{papers(len(cites))}</p>{_record_links(cites, catalog, base)}</section>
<section class="cited-by"><h2>Cited by</h2><p>{papers(len(cited_by))}</p>{_record_links(cited_by, catalog, base)}</section>
<section class="receipt"><h2>Receipt and verification</h2>
<p>First computed {escape(view.first_computed_at)}</p>
<p>Signature Ed25519 ({escape(view.key_id)}) · <a href="{escape(base)}/pith-signing-key.json">public key</a></p></section>
<section class="hash"><h2>Canonical hash</h2><p><code>{escape(view.canonical_sha256)}</code></p></section>
<section class="aliases"><h2>Aliases</h2><p>{aliases}</p></section>
<section class="record"><h2>Canonical record JSON</h2><pre>{escape(record_json)}</pre></section>
</main></body></html>
"""


def record_jsonld(view: RecordView, suffix: str, cites: list[str], cited_by: list[str], base: str) -> dict:
    """The record page for ``Accept: application/ld+json``: its ``canonical_record`` hashes
    to the canonical hash, as on the registry."""
    links = links_for(suffix, base)
    return {
        "@context": "https://schema.org",
        "@type": "ScholarlyArticle",
        "@id": links["resolver"],
        "identifier": view.pith_number,
        "name": view.title,
        "author": [{"@type": "Person", "name": name} for name in view.authors],
        "pith_number": view.pith_number,
        "short_pith_number": view.short_pith_number,
        "canonical_sha256": view.canonical_sha256,
        "canonical_record": view.canonical_record,
        "links": links,
        "cites": [links_for(s, base)["resolver"] for s in cites],
        "cited_by": [links_for(s, base)["resolver"] for s in cited_by],
        "cited_by_count": len(cited_by),
    }


def mirror_list(base: str, name: str, public_keys: list[dict]) -> dict:
    """``/pith-mirrors.json``, the mirror list: this mirror's URL patterns (``{suffix}``
    placeholders) and keys."""
    patterns = links_for("{suffix}", base)
    entry = {
        "name": name,
        "base_url": base,
        "status": "primary",
        "record_url": patterns["resolver"],
        "bundle_url": patterns["bundle"],
        "state_url": patterns["state"],
        "well_known_bundle_url": patterns["well_known_bundle"],
    }
    return {
        "manifest_type": MIRROR_LIST_TYPE,
        "manifest_version": "1.0",
        "mirrors": [entry],
        "public_keys": public_keys,
    }


def _lastmod(date: str | None) -> str:
    return f"<lastmod>{xml_escape(date)}</lastmod>" if date else ""


def sitemap_urlset(suffixes: Iterable[str], base: str, listed_date: Callable[[str], str | None]) -> str:
    """The records' URLs, each with the ``<lastmod>`` ``listed_date`` gives it."""
    urls = "".join(
        f"<url><loc>{xml_escape(links_for(s, base)['resolver'])}</loc>{_lastmod(listed_date(s))}</url>\n"
        for s in suffixes
    )
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{SITEMAP_NS}">\n{urls}</urlset>\n'


def sitemap_index(lastmods: Sequence[str | None], base: str) -> str:
    """One ``<sitemap>`` per page, with the newest ``<lastmod>`` of its records."""
    items = "".join(
        f"<sitemap><loc>{xml_escape(base)}/sitemap-{n}.xml</loc>{_lastmod(lastmod)}</sitemap>\n"
        for n, lastmod in enumerate(lastmods, 1)
    )
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns="{SITEMAP_NS}">\n{items}</sitemapindex>\n'


def robots_txt(base: str, disallow: Iterable[str] = ()) -> str:
    """Disallow rules come before ``Allow: /`` so first-match parsers (urllib.robotparser)
    and longest-match parsers (Protego, Scrapy's default) read the same policy."""
    rules = "".join(f"Disallow: {path}\n" for path in disallow)
    return f"User-agent: *\n{rules}Allow: /\n\nSitemap: {base}/sitemap.xml\n"


def home_page(base: str, name: str, records: int) -> str:
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(name)}</title></head><body>
<h1>{escape(name)}</h1>
<p>A Pith mirror serving {records} records.</p>
<ul>
<li><a href="{escape(base)}/sitemap.xml">sitemap</a></li>
<li><a href="{escape(base)}/pith-mirrors.json">mirror list</a></li>
<li><a href="{escape(base)}/pith-signing-key.json">signing key</a></li>
</ul>
</body></html>
"""
