"""Finding records in whatever a resolver sends, and building URLs on the resolver in use.

Link shapes are not fixed, so discovery looks for the two things every shape carries:
a full Pith number or a ``/pith/<SUFFIX>`` path. Absolute links naming the registry's
host are hints only: URLs are always rebuilt on the resolver (or mirror) in use.
"""

import re
from dataclasses import dataclass
from urllib.parse import ParseResult, SplitResult, urlsplit

# "pith:NNNN:<SUFFIX>" or "/pith/<SUFFIX>", written to begin with the literal "pith" so
# that the regex engine skips to each "pith" in the body: ten times faster over a bundle
# than trying the alternatives at every byte
SUFFIX_IN_TEXT = re.compile(rb"pith(?::\d{4}:|(?<=/pith)/)([A-Z2-7]{26})(?![A-Z2-7])")
SITEMAP_ENTRY = re.compile(
    rb"<loc>\s*([^<\s]+)\s*</loc>\s*(?:<lastmod>\s*([^<\s]{1,40})\s*</lastmod>)?"
)  # a <url> or <sitemap> entry: its location, and the <lastmod> that follows it

DEFAULT_TEMPLATES = {
    "record_url": "/pith/{suffix}",
    "bundle_url": "/pith/{suffix}/bundle.json",
    "state_url": "/pith/{suffix}/state.json",
    "well_known_bundle_url": "/.well-known/pith/{suffix}/bundle.json",
}


def suffixes_in(body: bytes) -> list[str]:
    """Every record suffix named in ``body``, in first-seen order, without repeats."""
    return list(dict.fromkeys(m.decode("ascii") for m in SUFFIX_IN_TEXT.findall(body)))


def sitemap_entries(body: bytes) -> list[tuple[str, str | None]]:
    """Each entry's location and ``<lastmod>`` (None when it gives none after it)."""
    return [
        (loc.decode("utf-8", "replace"), lastmod.decode("ascii", "replace") if lastmod else None)
        for loc, lastmod in SITEMAP_ENTRY.findall(body)
    ]


def base_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def port_of(parts: SplitResult | ParseResult) -> int | None:
    """The port a split URL connects to (its scheme's default when it names none)."""
    try:
        return parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:  # not a port number
        return None


@dataclass(frozen=True)
class ResolverUrls:
    """URL templates rooted at one base URL (``https://pith.science`` or a mirror)."""

    base: str
    templates: tuple = tuple(DEFAULT_TEMPLATES.items())

    def url(self, kind: str, suffix: str) -> str:
        return self.base + dict(self.templates)[kind].format(suffix=suffix)

    @property
    def host(self) -> str:
        return urlsplit(self.base).hostname or ""

    def with_mirror_list(self, mirror_list: dict) -> "ResolverUrls":
        """Adopt the path templates of a mirror list (``/pith-mirrors.json``), rebased on
        this resolver: a mirror list names its own host's URLs, but we fetch from the base
        we were given."""
        mirrors = mirror_list.get("mirrors") if isinstance(mirror_list, dict) else None
        if not isinstance(mirrors, list) or not mirrors:
            return self
        chosen = next(
            (m for m in mirrors if isinstance(m, dict) and _same_host(m.get("base_url"), self.base)), mirrors[0]
        )
        if not isinstance(chosen, dict):
            return self
        templates = dict(self.templates)
        for kind in DEFAULT_TEMPLATES:
            path = _template_path(chosen.get(kind))
            if path:
                templates[kind] = path
        return ResolverUrls(self.base, tuple(templates.items()))

    def with_template(self, kind: str, template: str) -> "ResolverUrls":
        return ResolverUrls(self.base, tuple({**dict(self.templates), kind: template}.items()))


def learnt_template(url: str, base: str, suffix: str) -> str | None:
    """The path template of ``url``, a redirect's target for the record ``suffix``: its
    path with the suffix as ``{suffix}``; None when it is not on ``base`` or does not
    name the suffix exactly once."""
    parts = urlsplit(url)
    if base_of(url) != base or parts.path.count(suffix) != 1:
        return None
    return parts.path.replace(suffix, "{suffix}") + (f"?{parts.query}" if parts.query else "")


def mirror_bases(mirror_list: dict) -> list[str]:
    """Base URLs of every mirror a mirror list names (fallback candidates)."""
    mirrors = mirror_list.get("mirrors") if isinstance(mirror_list, dict) else None
    bases = []
    for mirror in mirrors if isinstance(mirrors, list) else []:
        if isinstance(mirror, dict) and isinstance(mirror.get("base_url"), str):
            bases.append(mirror["base_url"].rstrip("/"))
    return bases


def _same_host(url: object, base: str) -> bool:
    return isinstance(url, str) and urlsplit(url).netloc == urlsplit(base).netloc


def _template_path(template: object) -> str | None:
    if not isinstance(template, str) or "{suffix}" not in template:
        return None
    parts = urlsplit(template.replace("{suffix}", "SUFFIXPLACEHOLDER"))
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    return path.replace("SUFFIXPLACEHOLDER", "{suffix}")
