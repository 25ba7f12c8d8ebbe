"""A corpus minted on demand: ``pith-testkit serve --virtual N`` serves N records without a byte of
them on disk, so a crawl of a million records needs no corpus of 16 GB first.

Records are those ``pith-testkit corpus generate --seed S`` plans (the same papers,
numbers and key), without the real registry bundles. Only a Pith number and two small
integers per record stay in memory; a bundle is minted from its index when asked for
(about 2 ms: four signatures) and a few hundred are kept in an LRU cache. The citation
graph is a pure function of the index, so it needs no memory either: record ``i``
cites its parent in a 4-ary tree and one record picked by a fixed permutation, and is
cited by its children and by the permutation's preimage. Every bundle names all its
citing records (its ``citations`` sample is complete), so a crawl from any one record
reaches all of them from the bundles alone.
"""

import json
import logging
import re
from array import array
from collections.abc import Sequence
from datetime import timedelta
from functools import lru_cache
from math import gcd
from pathlib import Path
from typing import overload

from pith.links import REGISTRY_BASE
from storage.serving.catalog import Entry
from storage.serving.record import compact_json
from storage.serving.source import RecordSource

from .corpus import (
    REGISTRY_EPOCH,
    Citable,
    Planned,
    corpus_signer,
    mint_planned,
    paper_for,
    planned_records,
)
from .mint import with_snapshot
from .weeks import ChangePlan, RegistryFeed, Weeks

logger = logging.getLogger(__name__)

BRANCHING = 4
ARXIV_ALIAS_RE = re.compile(r"^(?:10\.48550/arxiv\.)?(\d{4}\.(\d{5}))(?:v(\d+))?$", re.IGNORECASE)
NEWEST = (REGISTRY_EPOCH + timedelta(days=9)).timestamp()  # no record_times build is later


class _Suffixes(Sequence[str]):
    """The catalog's suffixes in record order, read out of the Pith numbers."""

    def __init__(self, numbers: list[str]):
        self._numbers = numbers

    def __len__(self) -> int:
        return len(self._numbers)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [number[-26:] for number in self._numbers[index]]
        return self._numbers[index][-26:]


class VirtualCatalog:
    """The Catalog interface the resolver uses, computed from record indices."""

    def __init__(self, seed: int, records: int, weeks: Weeks = Weeks()):
        self.seed = seed
        self.numbers: list[str] = []
        self.papers, self.versions = array("I"), array("B")
        self.first_of_paper = array("I")  # paper index -> its first record's index
        for index, planned in enumerate(planned_records(seed, records)):
            if planned.paper_index == len(self.first_of_paper):
                self.first_of_paper.append(index)
            self.numbers.append(planned.pith_number)
            self.papers.append(planned.paper_index)
            self.versions.append(planned.version)
        self.index = {number[-26:]: i for i, number in enumerate(self.numbers)}
        self.suffixes = _Suffixes(self.numbers)
        signer = corpus_signer(seed)
        self.public_keys = [signer.public_document()]
        self.signing_key_id = signer.key_id
        self.plan = ChangePlan(seed, records, weeks)
        self.newest_epoch = max(NEWEST, self.plan.newest.timestamp()) if weeks.week else NEWEST
        self._multiplier = next(m for m in range(7919, 7919 + records + 2) if gcd(m, max(records, 1)) == 1)
        self._inverse = pow(self._multiplier, -1, records) if records > 1 else 0

    # --- the graph ---------------------------------------------------------------------
    def _permuted(self, i: int) -> int:
        return (i * self._multiplier + 1) % len(self.numbers)

    def cites_of(self, i: int) -> list[int]:
        parent = {(i - 1) // BRANCHING} if i else set()
        return sorted((parent | {self._permuted(i)}) - {i})

    def citers_of(self, i: int) -> list[int]:
        n = len(self.numbers)
        children = range(BRANCHING * i + 1, min(BRANCHING * i + BRANCHING + 1, n))
        preimage = ((i - 1) * self._inverse) % n
        return sorted(set(children) | ({preimage} - {i}))

    # --- what the resolver asks --------------------------------------------------------
    def __contains__(self, suffix: object) -> bool:
        return suffix in self.index

    def __len__(self) -> int:
        return len(self.numbers)

    def entry(self, suffix: str) -> Entry:
        """Aliases are left out: the resolver reads them from the bundle, and ``resolve``
        finds records by alias without them."""
        i = self.index[suffix]
        return Entry(
            self.numbers[i],
            self.plan.built_at(i),
            self.versions[i],
            (),
            tuple(self.numbers[j][-26:] for j in self.cites_of(i)),
        )

    def cited_by(self, suffix: str) -> list[str]:
        return [self.numbers[j][-26:] for j in self.citers_of(self.index[suffix])]

    @property
    def signing_key(self) -> dict:
        return self.public_keys[0]

    def resolve(self, text: str) -> str | None:
        """The suffix ``text`` names: a suffix, a full Pith number, an arXiv id (with or
        without version) or its DOI; short numbers are not resolved."""
        suffix = text.rsplit(":", 1)[-1]
        if suffix in self.index:
            i = self.index[suffix]
            return suffix if text in (suffix, self.numbers[i]) else None
        match = ARXIV_ALIAS_RE.match(text)
        if not match or not 0 < int(match.group(2)) <= len(self.first_of_paper):
            return None
        paper = int(match.group(2)) - 1
        first = self.first_of_paper[paper]
        end = self.first_of_paper[paper + 1] if paper + 1 < len(self.first_of_paper) else len(self.numbers)
        if paper_for(self.seed, paper)[0].arxiv_id != match.group(1):
            return None
        version = int(match.group(3)) if match.group(3) else end - first
        return self.numbers[first + version - 1][-26:] if 0 < version <= end - first else None


class VirtualCorpus(RecordSource):
    """The records ``corpus generate --seed S`` plans, as they stand in ``weeks.week``
    (pith_testkit.weeks); with ``resourcesync``, a ResourceSync source too."""

    def __init__(
        self,
        records: int,
        seed: int = 1,
        base_url: str = REGISTRY_BASE,
        cache_size: int = 512,
        weeks: Weeks = Weeks(),
        resourcesync: bool = False,
    ):
        self.seed, self.base_url = seed, base_url
        self.signer = corpus_signer(seed)
        self.catalog: VirtualCatalog = VirtualCatalog(seed, records, weeks)
        plan = self.catalog.plan
        self._feed = RegistryFeed(plan, self.catalog.numbers, self.catalog.index) if resourcesync else None
        self._minted = lru_cache(maxsize=cache_size)(self._mint)
        logger.info("serving %d virtual records (seed %d, week %d)", records, seed, weeks.week)

    def bundle_bytes(self, suffix: str) -> bytes | None:
        return self._minted(suffix)

    def listed_date(self, suffix: str) -> str | None:
        listed = self.catalog.plan.listed_built_at(self.catalog.index[suffix])
        return listed[:10] if listed else None

    def sync_feed(self) -> RegistryFeed | None:
        return self._feed

    def keyring_document(self) -> dict:
        """The keyring that verifies every bundle served."""
        return {"keys": [self.signer.public_document()]}

    def write_keyring(self, path: str | Path) -> None:
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(self.keyring_document(), indent=2) + "\n")

    def _citable(self, i: int) -> Citable:
        paper, _ = paper_for(self.seed, self.catalog.papers[i])
        return Citable(self.catalog.numbers[i], paper.title, paper.arxiv_id)

    def _mint(self, suffix: str) -> bytes | None:
        i = self.catalog.index.get(suffix)
        if i is None:
            return None
        citable = self._citable(i)
        planned = Planned(
            citable.pith_number, citable.title, citable.arxiv_id, self.catalog.papers[i], self.catalog.versions[i]
        )
        citers = [self._citable(j) for j in self.catalog.citers_of(i)]
        bundle = mint_planned(
            self.signer,
            self.seed,
            i,
            planned,
            [self._citable(j) for j in self.catalog.cites_of(i)],
            citers,
            len(citers),
            self.base_url,
        )
        for change in self.catalog.plan.of(i):
            bundle = with_snapshot(bundle, self.signer, change.built_at)
        return compact_json(bundle)
