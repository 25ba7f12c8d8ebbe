"""The in-memory index a mirror answers from: which records exist, what each is
called (aliases), whom it cites and who cites it, and which keys signed them.

It is built from the bundles themselves (one pass over parsed documents), so any
folder of bundles can be served; a corpus also saves it next to the bundles so a
large mirror starts without parsing every bundle again (and, when its bundles name no
other record, as the registry's, to keep the citation graph its record pages link).
Request text is only ever looked up here: no request can name a record the catalog
does not hold.
"""

import bisect
import logging
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Protocol

from pith.graph import cited_numbers
from pith.numbers import PITH_NUMBER_RE, SHORT_LENGTHS, SHORT_RE, SUFFIX_RE, suffix_of

from .record import latest_snapshot

logger = logging.getLogger(__name__)

CATALOG_VERSION = 1
SHORT_ALIAS_PREFIX = "pith_short_"  # prefixes of the suffix: searched in the sorted suffixes, not as aliases
_BASE32_RE = re.compile(r"^[A-Z2-7]+$")


@dataclass(frozen=True, slots=True)
class Entry:
    """What the mirror keeps about one record (the bundle itself stays where it is stored)."""

    pith_number: str
    built_at: str
    version: int  # source version: the latest wins an alias shared by versions
    aliases: tuple[str, ...]  # alias values other than pith_short_* (prefixes are searched instead)
    cites: tuple[str, ...]  # suffixes this record's latest graph snapshot references (or a saved catalog says)

    @property
    def built_at_epoch(self) -> float:
        """``built_at`` as a Unix time, for Last-Modified (0 when the bundle has none)."""
        try:
            return datetime.fromisoformat(self.built_at.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return 0.0


def entry_from_bundle(bundle: dict) -> Entry:
    """The catalog entry of a parsed bundle; ValueError when it lacks what a mirror needs."""
    try:
        number = bundle["pith_number"]
        version = bundle["canonical_record"]["source"]["version"]
        aliases = tuple(
            alias["alias_value"]
            for alias in bundle.get("source_aliases", ())
            if not alias["alias_kind"].startswith(SHORT_ALIAS_PREFIX)
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a bundle a mirror can index: {exc!r}") from None
    if not isinstance(number, str) or not PITH_NUMBER_RE.match(number):
        raise ValueError(f"pith_number {number!r} is not a full Pith number")
    built_at = bundle.get("built_at")
    return Entry(
        number,
        built_at if isinstance(built_at, str) else "",
        version if isinstance(version, int) else 0,
        tuple(a for a in aliases if isinstance(a, str)),
        cited_suffixes(latest_snapshot(bundle)),
    )


def cited_suffixes(snapshot: object) -> tuple[str, ...]:
    """Suffixes a graph snapshot's references sample names, once each, in order."""
    return tuple(suffix_of(number) for number in cited_numbers(snapshot))


def most_used(counts: Counter) -> str | None:
    """The key counted most often (the smallest on a tie); None when nothing was counted."""
    return min(counts, key=lambda k: (-counts[k], k)) if counts else None


class CatalogView(Protocol):
    """What the resolver asks of a catalog: a Catalog, or one computed from record
    indices (``storage.serving.virtual``)."""

    @property
    def suffixes(self) -> Sequence[str]: ...
    @property
    def public_keys(self) -> list[dict]: ...
    @property
    def newest_epoch(self) -> float: ...
    @property
    def signing_key(self) -> dict | None: ...
    def entry(self, suffix: str) -> "Entry": ...
    def cited_by(self, suffix: str) -> list[str]: ...
    def resolve(self, text: str) -> str | None: ...
    def __contains__(self, suffix: object) -> bool: ...
    def __len__(self) -> int: ...


class Catalog:
    """Records by 26-character suffix, with alias resolution and both citation directions."""

    def __init__(self, entries: dict[str, Entry], public_keys: list[dict], signing_key_id: str | None):
        self._entries = entries
        self.public_keys = public_keys
        self.signing_key_id = signing_key_id
        self.suffixes = sorted(entries)
        self._aliases = self._alias_map(entries)
        self._cited_by: dict[str, list[str]] = {}
        for suffix in self.suffixes:
            for cited in entries[suffix].cites:
                self._cited_by.setdefault(cited, []).append(suffix)
        self.newest_epoch = max((e.built_at_epoch for e in entries.values()), default=0.0)

    @staticmethod
    def _alias_map(entries: dict[str, Entry]) -> dict[str, str]:
        """Alias value (case-folded) -> suffix; an alias several versions share names the latest."""
        best: dict[str, tuple] = {}
        for suffix, entry in entries.items():
            rank = (entry.version, entry.built_at, suffix)
            for alias in entry.aliases:
                key = alias.casefold()
                if key not in best or best[key] < rank:
                    best[key] = rank
        return {alias: rank[2] for alias, rank in best.items()}

    # --- building and saving -----------------------------------------------------
    @classmethod
    def from_bundles(cls, items: Iterable[tuple[str, dict]]) -> "Catalog":
        """Index ``(suffix, parsed bundle)`` pairs, consumed one at a time (so a generator
        can stream a large corpus through without holding its bundles)."""
        entries: dict[str, Entry] = {}
        keys: dict[str, dict] = {}
        signers: Counter[str] = Counter()
        for suffix, bundle in items:
            try:
                entries[suffix] = entry_from_bundle(bundle)
            except ValueError as exc:
                logger.warning("skipping %s: %s", suffix, exc)
                continue
            for key in bundle.get("public_keys") or ():
                if isinstance(key, dict) and isinstance(key.get("key_id"), str):
                    keys.setdefault(key["key_id"], key)
            signature = bundle.get("bundle_signature")
            if isinstance(signature, dict) and isinstance(signature.get("key_id"), str):
                signers[signature["key_id"]] += 1
        return cls(entries, [keys[k] for k in sorted(keys)], most_used(signers))

    def to_json(self) -> dict:
        return {
            "catalog_version": CATALOG_VERSION,
            "signing_key_id": self.signing_key_id,
            "public_keys": self.public_keys,
            "records": {suffix: asdict(self._entries[suffix]) for suffix in self.suffixes},
        }

    @classmethod
    def from_json(cls, doc: dict) -> "Catalog":
        if doc.get("catalog_version") != CATALOG_VERSION:
            raise ValueError(f"catalog_version {doc.get('catalog_version')!r} is not {CATALOG_VERSION}")
        entries = {
            suffix: Entry(e["pith_number"], e["built_at"], e["version"], tuple(e["aliases"]), tuple(e["cites"]))
            for suffix, e in doc["records"].items()
        }
        return cls(entries, doc["public_keys"], doc["signing_key_id"])

    # --- questions the server asks ---------------------------------------------
    def __contains__(self, suffix: object) -> bool:
        return suffix in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, suffix: str) -> Entry:
        return self._entries[suffix]

    def cited_by(self, suffix: str) -> list[str]:
        return self._cited_by.get(suffix, [])

    @property
    def signing_key(self) -> dict | None:
        """The public key document of the key that signed most bundles."""
        return next((k for k in self.public_keys if k["key_id"] == self.signing_key_id), None)

    def resolve(self, text: str) -> str | None:
        """The suffix ``text`` names: the suffix itself, ``pith:YYYY:SUFFIX``, ``pith:XXXXXXXX``,
        an 8/12/16-character prefix, or an alias value (arXiv id with or without version, DOI)."""
        if SUFFIX_RE.match(text):
            return text if text in self._entries else None
        number = PITH_NUMBER_RE.match(text)
        if number:
            entry = self._entries.get(number.group(2))
            return number.group(2) if entry is not None and entry.pith_number == text else None
        short = SHORT_RE.match(text)
        if short:
            return self._by_prefix(short.group(1))
        if len(text) in SHORT_LENGTHS and _BASE32_RE.match(text):
            return self._by_prefix(text)
        return self._aliases.get(text.casefold())

    def _by_prefix(self, prefix: str) -> str | None:
        """The one suffix starting with ``prefix``; None when none or several do."""
        index = bisect.bisect_left(self.suffixes, prefix)
        matches = self.suffixes[index : index + 2]
        if matches and matches[0].startswith(prefix) and not (len(matches) > 1 and matches[1].startswith(prefix)):
            return matches[0]
        return None
