"""Turn what a user types as a seed into something the spider can fetch.

A seed is a full or short Pith number, a bare 26-character suffix, an arXiv id, a DOI,
a record page or bundle URL, or the word ``sitemap``. Aliases that cannot be mapped to
a suffix locally (short numbers, arXiv ids, DOIs) are resolved by the resolver itself
through ``/pith/<alias>``, which redirects to the record page.
"""

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

from pith.numbers import PITH_NUMBER_RE, SUFFIX_RE

SHORT_NUMBER_RE = re.compile(r"^(?:pith:)?([A-Z2-7]{8}|[A-Z2-7]{12}|[A-Z2-7]{16})$")
ARXIV_RE = re.compile(r"^(?:arxiv:)?(\d{4}\.\d{4,5}(?:v\d+)?|[a-z\-]+(?:\.[A-Z]{2})?/\d{7}(?:v\d+)?)$", re.I)
DOI_RE = re.compile(r"^(?:doi:|https?://(?:dx\.)?doi\.org/)?(10\.\d{4,9}/\S+)$", re.I)
PAGE_OR_BUNDLE_RE = re.compile(r"/pith/([A-Z2-7]{26})(/bundle\.json|/state\.json)?/?$")


class SeedError(ValueError):
    """A seed the crawler cannot interpret."""


@dataclass(frozen=True)
class Seed:
    kind: str  # "suffix" (known record), "alias" (resolver lookup), "sitemap"
    value: str  # the suffix, the alias text, or the sitemap URL ("" = the resolver's)


def parse_seed(text: str) -> Seed:
    text = text.strip()
    if not text:
        raise SeedError("empty seed")
    if text.lower() in ("sitemap", "sitemap.xml"):
        return Seed("sitemap", "")
    if SUFFIX_RE.match(text):
        return Seed("suffix", text)
    full = PITH_NUMBER_RE.match(text)
    if full:
        return Seed("suffix", full.group(2))
    if text.startswith(("http://", "https://")):
        path = urlsplit(text).path
        if path.endswith(".xml"):
            return Seed("sitemap", text)
        match = PAGE_OR_BUNDLE_RE.search(path)
        if match:
            return Seed("suffix", match.group(1))
        doi = DOI_RE.match(text)
        if doi:
            return _doi_seed(doi.group(1))
        raise SeedError(f"{text}: not a record page, bundle or sitemap URL")
    short = SHORT_NUMBER_RE.match(text)
    if short:
        return Seed("alias", short.group(1))
    arxiv = ARXIV_RE.match(text)
    if arxiv:
        return Seed("alias", arxiv.group(1))
    doi = DOI_RE.match(text)
    if doi:
        return _doi_seed(doi.group(1))
    raise SeedError(f"{text!r} is not a Pith number, suffix, arXiv id, DOI or URL")


def _doi_seed(doi: str) -> Seed:
    """A DOI goes into the resolver path as it is (its slashes included), so a '.' or
    '..' segment would step out of /pith/ on any server that normalizes paths."""
    if any(segment in (".", "..") for segment in doi.split("/")):
        raise SeedError(f"{doi!r}: a DOI with a '.' or '..' path segment")
    return Seed("alias", doi)


def seeds_in_file(path: str | Path) -> Iterator[tuple[int, str]]:
    """``(line number, seed text)`` for each seed of a file, read as they are wanted;
    blank lines and ``#`` comments are ignored. SeedError if it is not UTF-8 text."""
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                line = line.split("#", 1)[0].strip()
                if line:
                    yield number, line
    except UnicodeDecodeError:
        raise SeedError(f"{path}: not UTF-8 text") from None


class SeedList:
    """A crawl's seeds: those given as arguments, then a seeds file's, read from the
    file again each time they are walked, so a file naming every record of the
    registry is never held in memory. Every seed is checked when the list is made
    (SeedError names the first bad one, and its line). No seed at all means the
    resolver's sitemap."""

    def __init__(self, texts: Iterable[str] = (), path: str | Path | None = None) -> None:
        self.path = path
        self._given = [parse_seed(text) for text in texts]
        self.count = len(self._given)
        self.any_sitemap = any(seed.kind == "sitemap" for seed in self._given)
        if path is not None:
            for number, text in seeds_in_file(path):
                try:
                    seed = parse_seed(text)
                except SeedError as exc:
                    raise SeedError(f"{path}, line {number}: {exc}") from None
                self.count += 1
                self.any_sitemap = self.any_sitemap or seed.kind == "sitemap"
        if not self.count:
            self._given, self.count, self.any_sitemap = [Seed("sitemap", "")], 1, True

    def __iter__(self) -> Iterator[Seed]:
        yield from self._given
        if self.path is not None:
            for _, text in seeds_in_file(self.path):
                yield parse_seed(text)

    def describe(self) -> dict:
        """What a manifest records of the seeds: those given, and the file by name and
        count (not its million lines)."""
        described: dict[str, object] = {"seeds": [f"{seed.kind}:{seed.value}" for seed in self._given]}
        if self.path is not None:
            described["seeds_file"] = {"path": str(self.path), "seeds": self.count - len(self._given)}
        return described


def alias_path(alias: str) -> str:
    """The resolver path that redirects an alias to its record page."""
    return "/pith/" + quote(alias, safe="/:.")
