"""Where a mirror's bundles come from. The server asks a RecordSource for its catalog
and for a bundle's exact bytes, nothing else, so an archive (local folder, S3) can be
served later by adding a source, not by changing the server.

Corpus directory layout::

    DIR/bundles/<SUFFIX>.bundle.json   the exact bytes of each bundle
    DIR/keyring.json                   {"keys": [...]} that verifies every bundle
    DIR/corpus.json                    the saved catalog (optional: rebuilt from the bundles;
                                       the only record of the citation graph when the bundles,
                                       as the registry's, name no other record)
    DIR/pith-signing-key.json          the key document to serve (optional: else the key that
                                       signed most bundles), e.g. announcing a rotated key

``pith-archiver serve`` verifies every bundle of a folder before serving any (its
``check``), as it verifies an archive's, and withholds those that do not verify; a
folder left with nothing to serve is refused (NothingToServe; NoBundleFiles when it
holds no bundle file at all) rather than served as an empty mirror.
"""

import json
import logging
import os
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pith.numbers import SUFFIX_RE
from pith.parse import parse
from pith.reasons import Rejected

from .catalog import Catalog, CatalogView

if TYPE_CHECKING:
    from .peer_files import PeerFiles
    from .sync_site import SyncFeed

logger = logging.getLogger(__name__)

BUNDLES_DIR = "bundles"
KEYRING_NAME = "keyring.json"
INDEX_NAME = "corpus.json"
KEY_DOCUMENT_NAME = "pith-signing-key.json"
BUNDLE_EXTENSION = ".bundle.json"


# what a folder's bundle files are checked with: for each file in turn, None to serve it, else why not
BundleCheck = Callable[[list[Path]], Iterable[str | None]]


def bundle_name(suffix: str) -> str:
    return suffix + BUNDLE_EXTENSION


class NothingToServe(ValueError):
    """A folder holding no bundle a mirror could serve: it would answer nothing but 404."""


class NoBundleFiles(NothingToServe):
    """A folder holding no ``<SUFFIX>.bundle.json`` file at all (an empty folder, an
    unmounted volume): no record is there to serve, verified or not."""


class RecordSource(ABC):
    """A set of bundles a mirror can serve."""

    catalog: CatalogView
    signing_key_document: bytes | None = None  # served as /pith-signing-key.json when given
    remote = False  # bundle_bytes waits on a network store: the server reads it off its event loop

    @abstractmethod
    def bundle_bytes(self, suffix: str) -> bytes | None:
        """The stored bytes of a catalogued record's bundle, unchanged; None if it vanished."""

    def listed_date(self, suffix: str) -> str | None:
        """The ``<lastmod>`` a sitemap gives a catalogued record: the day its bundle was
        built (None: no date)."""
        return self.catalog.entry(suffix).built_at[:10] or None

    def sync_feed(self) -> "SyncFeed | None":
        """What the source publishes over ResourceSync; None: it publishes nothing."""
        return None

    def peer_files(self) -> "PeerFiles | None":
        """What a peer archive reads of the source (its logs, keys and raw objects); None: it is no archive."""
        return None

    def renewed(self) -> "RecordSource | None":
        """The source read anew when what it serves changed since it was read (a server
        left running swaps it in); None while nothing changed. May block on I/O."""
        return None


class CorpusDirectory(RecordSource):
    """A corpus folder (see the module docstring), or any folder of ``<SUFFIX>.bundle.json``
    files: with no ``bundles/`` inside, the folder itself holds the bundles."""

    def __init__(self, root: str | Path, check: BundleCheck | None = None) -> None:
        self.root = Path(root)
        nested = self.root / BUNDLES_DIR
        self.bundles_dir = nested if nested.is_dir() else self.root
        if not self.bundles_dir.is_dir():
            raise FileNotFoundError(f"{self.root}: not a directory")
        self._prefix = os.path.join(self.bundles_dir, "")  # a plain string: the hot path skips pathlib
        listed = self._listing()
        names = self._checked(listed, check) if check is not None and listed else listed
        saved = self._saved_catalog(names) if names == listed else None  # a catalog of them all lists some withheld
        self.catalog = saved or Catalog.from_bundles(self._parsed(names))
        if not len(self.catalog):
            raise (NothingToServe if listed else NoBundleFiles)(self._nothing(listed))
        key_document = self.root / KEY_DOCUMENT_NAME
        if key_document.is_file():
            self.signing_key_document = key_document.read_bytes()
        logger.info("serving %d records from %s", len(self.catalog), self.bundles_dir)

    def _listing(self) -> list[str]:
        """Suffixes of the well-named bundle files; other files are never served."""
        with os.scandir(self.bundles_dir) as entries:
            names = [e.name[: -len(BUNDLE_EXTENSION)] for e in entries if e.name.endswith(BUNDLE_EXTENSION)]
        return sorted(n for n in names if SUFFIX_RE.match(n))

    def _checked(self, suffixes: list[str], check: BundleCheck) -> list[str]:
        """The bundles ``check`` passes; one warning says how many it withholds, and why."""
        withheld: Counter[str] = Counter()
        kept = []
        for suffix, why in zip(suffixes, check([self.bundles_dir / bundle_name(s) for s in suffixes]), strict=True):
            if why is None:
                kept.append(suffix)
            else:
                withheld[why] += 1
        reasons = ", ".join(f"{why} ({count})" for why, count in sorted(withheld.items()))
        if withheld and not kept:
            raise NothingToServe(
                f"{self.root}: none of its {len(suffixes)} bundles can be served: none verifies under the trusted "
                f"keys ({reasons}); pin the key that signed them with --keyring FILE (its fingerprint checked "
                "out of band)"
            )
        if withheld:
            logger.warning(
                "withholding %d of %d bundles that do not verify: %s", sum(withheld.values()), len(suffixes), reasons
            )
        return kept

    def _nothing(self, listed: list[str]) -> str:
        """Why the folder has nothing to serve, naming what was looked for."""
        if listed:
            return f"{self.root}: none of its {len(listed)} bundle files could be read as a bundle"
        others = sum(1 for path in self.bundles_dir.glob("*.json"))
        return f"nothing to serve: no <SUFFIX>{BUNDLE_EXTENSION} file in {self.bundles_dir}" + (
            f" (it holds {others} other *.json files; a bundle is served only from a file named after its "
            f"record's 26-character suffix, <SUFFIX>{BUNDLE_EXTENSION})"
            if others
            else ""
        )

    def _saved_catalog(self, suffixes: list[str]) -> Catalog | None:
        """The saved catalog, if there is one and it lists exactly the bundles present."""
        path = self.root / INDEX_NAME
        if not path.is_file():
            return None
        try:
            catalog = Catalog.from_json(json.loads(path.read_bytes()))
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("%s is unusable (%s): indexing the bundles instead", path, exc)
            return None
        if catalog.suffixes != suffixes:
            logger.warning("%s does not list the bundles present: indexing the bundles instead", path)
            return None
        return catalog

    def _parsed(self, suffixes: Iterable[str]) -> Iterator[tuple[str, dict]]:
        for suffix in suffixes:
            try:
                document = parse((self.bundles_dir / bundle_name(suffix)).read_bytes())
            except (OSError, Rejected) as exc:
                logger.warning("skipping %s: %s", bundle_name(suffix), exc)
                continue
            if not isinstance(document.data, dict):
                logger.warning("skipping %s: not a JSON object", bundle_name(suffix))
                continue
            yield suffix, document.data

    def bundle_bytes(self, suffix: str) -> bytes | None:
        if suffix not in self.catalog:  # only catalogued names ever reach the filesystem
            return None
        try:
            with open(self._prefix + bundle_name(suffix), "rb") as handle:
                return handle.read()
        except OSError:
            return None
