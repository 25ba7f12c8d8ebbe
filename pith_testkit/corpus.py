"""Generate a signed test corpus: bundles minted exactly in the registry's format by
a test key derived from the seed, citing one another so that following links from any
record reaches all of them, plus the real registry bundles as they are.

Where the links are (``links``): by default each bundle names the records it cites and
a sample of those citing it (``bundles``), so a crawl finds every record from the
bundles alone; with ``pages`` the bundles name no other record, as the registry's own
do, and the citation graph is kept in the saved catalog (corpus.json) only, from which
a mirror's record pages link cited and citing records.

Everything (key, texts, graph, timestamps) derives from the seed, and Ed25519
signatures are deterministic, so one seed always gives the same bytes. Records are
planned first (their Pith numbers depend only on their canonical records), then the
citation graph is drawn, then each bundle is minted and written; only a few short
strings per record stay in memory, so large corpora stream through.
"""

import hashlib
import json
import logging
import random
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Literal, get_args

from pith.canonical import canon_sha256
from pith.keyring import REGISTRY_KEY, key_from_entry
from pith.links import REGISTRY_BASE
from pith.numbers import pith_number, pith_suffix, suffix_of
from pith.shipped import real_bundles
from pith.signing import Signer
from storage.serving.catalog import Catalog
from storage.serving.record import compact_json, latest_snapshot
from storage.serving.source import BUNDLE_EXTENSION, BUNDLES_DIR, INDEX_NAME, KEYRING_NAME, bundle_name

from .mint import mint_bundle
from .papers import Paper, authors_text, invent_paper, text_sha256

logger = logging.getLogger(__name__)

BUILDER_VERSION = "pith-archiver-test-corpus-v1"
REGISTRY_EPOCH = datetime(2026, 5, 17, tzinfo=timezone.utc)  # when the real registry minted its records
FIRST_MONTH = (2020, 1)  # after the real fixtures' arXiv ids, so minted ids never collide with them
MONTHS = 72
SAMPLE_SIZE = 10  # entries kept in a graph snapshot's references/citations samples
EXCERPT_CHARS = 600

Links = Literal["bundles", "pages"]  # which documents name the records a record cites and is cited by
LINKS: tuple[Links, ...] = get_args(Links)


def corpus_signer(seed: int) -> Signer:
    """The test registry key of the corpus generated with ``seed``."""
    digest = hashlib.sha256(f"pith-archiver test corpus key {seed}".encode()).digest()
    return Signer.from_seed(f"pith-test-corpus-{seed}", digest)


@dataclass(frozen=True, slots=True)
class Citable:
    """What a citing record's snapshot says about a cited one."""

    pith_number: str
    title: str
    arxiv_id: str

    def sample_item(self) -> dict:
        return {"pith_number": self.pith_number, "title": self.title, "arxiv_id": self.arxiv_id}


@dataclass(frozen=True, slots=True)
class Planned(Citable):
    paper_index: int
    version: int


def generate_corpus(
    out: str | Path, records: int, seed: int = 1, base_url: str = REGISTRY_BASE, links: Links = "bundles"
) -> Catalog:
    """Write a corpus of ``records`` minted bundles plus the real ones into ``out`` (absent or
    empty) and return its catalog, whose cites are the citation graph whatever ``links`` says."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty: give a new or empty directory")
    (out / BUNDLES_DIR).mkdir(parents=True, exist_ok=True)
    signer = corpus_signer(seed)
    plan = plan_records(seed, records)
    reals = real_bundles()
    real_docs = [json.loads(path.read_bytes()) for path in reals]
    targets = plan + [
        Citable(
            doc["pith_number"],
            latest_snapshot(doc).get("paper", {}).get("title", ""),
            doc["canonical_record"]["source"]["id"],
        )
        for doc in real_docs
    ]
    graph = citation_graph(random.Random(seed), len(plan), len(reals))  # noqa: S311 - a seeded, reproducible test corpus, not secrets

    def bundles() -> Iterator[tuple[str, dict]]:
        citers = invert(graph, len(targets))
        for index, planned in enumerate(plan):
            bundle = mint_planned(
                signer,
                seed,
                index,
                planned,
                [targets[j] for j in graph[index]],
                [targets[j] for j in citers[index][:SAMPLE_SIZE]],
                len(citers[index]),
                base_url,
                links,
            )
            suffix = pith_suffix(bundle["canonical_sha256"])
            (out / BUNDLES_DIR / bundle_name(suffix)).write_bytes(compact_json(bundle))
            yield suffix, bundle
        for path, doc in zip(reals, real_docs):
            (out / BUNDLES_DIR / path.name).write_bytes(path.read_bytes())
            yield path.name[: -len(BUNDLE_EXTENSION)], doc

    catalog = with_cites(Catalog.from_bundles(bundles()), graph, targets)
    keyring = {"keys": [signer.public_document(), key_from_entry(REGISTRY_KEY).document()]}
    (out / KEYRING_NAME).write_text(json.dumps(keyring, indent=2) + "\n", "utf-8")
    index = {
        "corpus": {"seed": seed, "records": records, "base_url": base_url, "builder": BUILDER_VERSION, "links": links},
        **catalog.to_json(),
    }
    (out / INDEX_NAME).write_bytes(json.dumps(index, ensure_ascii=False, sort_keys=True).encode("utf-8"))
    logger.info("wrote %d bundles to %s", len(catalog), out / BUNDLES_DIR)
    return catalog


# --- planning ----------------------------------------------------------------------


def paper_for(seed: int, index: int) -> tuple[Paper, int]:
    """Paper ``index`` of the corpus and how many arXiv versions of it there are.
    Pure in (seed, index), so the minting pass can redraw what the planning pass saw."""
    rng = random.Random(f"{seed}/paper/{index}")  # noqa: S311 - a seeded, reproducible test corpus, not secrets
    year, month = divmod(FIRST_MONTH[0] * 12 + FIRST_MONTH[1] - 1 + rng.randrange(MONTHS), 12)
    day = datetime(year, month + 1, 1, tzinfo=timezone.utc) + timedelta(seconds=rng.randrange(27 * 86400))
    arxiv_id = f"{year % 100:02d}{month + 1:02d}.{index + 1:05d}"  # the number alone keeps ids unique
    versions = rng.choices((1, 2, 3), weights=(80, 15, 5))[0]
    return invent_paper(rng, arxiv_id, day.strftime("%Y-%m-%dT%H:%M:%SZ")), versions


def canonical_record(paper: Paper, version: int) -> dict:
    return {
        "source": {"id": paper.arxiv_id, "kind": "arxiv", "version": version},
        "metadata": {
            "license": paper.license,
            "primary_cat": paper.primary_cat,
            "submitted_at": paper.submitted_at,
            "cross_cats_sorted": list(paper.cross_cats),
            "title_canon_sha256": text_sha256(paper.title),
            "abstract_canon_sha256": text_sha256(paper.abstract),
        },
        "schema_version": "1.0",
    }


def plan_records(seed: int, records: int) -> list[Planned]:
    """The corpus's records in order: each paper's versions one after another."""
    return list(planned_records(seed, records))


def planned_records(seed: int, records: int) -> Iterator[Planned]:
    """``plan_records`` one record at a time."""
    planned, paper_index = 0, 0
    while planned < records:
        paper, versions = paper_for(seed, paper_index)
        for version in range(1, min(versions, records - planned) + 1):
            record = canonical_record(paper, version)
            number = pith_number(canon_sha256(record), paper.submitted_at)
            planned += 1
            yield Planned(number, paper.title, paper.arxiv_id, paper_index, version)
        paper_index += 1


def citation_graph(rng: random.Random, minted: int, real: int) -> list[list[int]]:
    """Whom each minted record cites (indices; ``minted + r`` is real record r).

    Every record after the first cites an earlier one, so the records form one tree;
    each real record is cited by a minted one. Following "cites" and "cited by" links
    from any record therefore reaches every record. Linear in the corpus size."""
    graph = []
    for index in range(minted):
        cited = {rng.randrange(index)} if index else set()
        for _ in range(rng.randint(0 if index else 1, 2)):
            other = rng.randrange(minted)
            if other != index:
                cited.add(other)
        graph.append(sorted(cited))
    for r in range(real if minted else 0):
        graph[r % minted].append(minted + r)
    return graph


def with_cites(catalog: Catalog, graph: list[list[int]], targets: list[Citable]) -> Catalog:
    """``catalog`` with each minted record's cites taken from ``graph``, not its bundle: the
    same with ``links="bundles"``, and with ``"pages"`` the only place they are kept."""
    entries = {suffix: catalog.entry(suffix) for suffix in catalog.suffixes}
    for cited, planned in zip(graph, targets):
        suffix = suffix_of(planned.pith_number)
        entries[suffix] = replace(entries[suffix], cites=tuple(suffix_of(targets[j].pith_number) for j in cited))
    return Catalog(entries, catalog.public_keys, catalog.signing_key_id)


def invert(graph: list[list[int]], size: int) -> list[list[int]]:
    citers: list[list[int]] = [[] for _ in range(size)]
    for citing, cited in enumerate(graph):
        for target in cited:
            citers[target].append(citing)
    return citers


# --- minting -------------------------------------------------------------------------


def mint_planned(
    signer: Signer,
    seed: int,
    index: int,
    planned: Planned,
    cites: list[Citable],
    citers: list[Citable],
    cited_by_count: int,
    base_url: str,
    links: Links = "bundles",
) -> dict:
    paper, _ = paper_for(seed, planned.paper_index)
    record = canonical_record(paper, planned.version)
    created_at, built_at = record_times(seed, index)
    aliases = [
        {"alias_kind": kind, "alias_value": value, "created_at": created_at}
        for kind, value in (
            ("arxiv", paper.arxiv_id),
            ("arxiv_version", f"{paper.arxiv_id}v{planned.version}"),
            ("doi", f"10.48550/arxiv.{paper.arxiv_id}"),
        )
    ]
    snapshot = graph_snapshot(paper, record["source"], cites, citers, cited_by_count, links)
    return mint_bundle(signer, record, aliases, [("graph_snapshot", "graph", snapshot)], created_at, built_at, base_url)


def record_times(seed: int, index: int) -> tuple[str, str]:
    """When the test registry created the record and when it built the bundle."""
    rng = random.Random(f"{seed}/times/{index}")  # noqa: S311 - a seeded, reproducible test corpus, not secrets
    created = REGISTRY_EPOCH + timedelta(seconds=rng.randrange(86400))
    built = created + timedelta(seconds=rng.randrange(86400, 8 * 86400))
    return created.strftime("%Y-%m-%dT%H:%M:%SZ"), built.strftime("%Y-%m-%dT%H:%M:%SZ")


def graph_snapshot(
    paper: Paper, source: dict, cites: list[Citable], citers: list[Citable], cited_by_count: int, links: Links
) -> dict:
    """A graph_snapshot payload shaped like the registry's. With ``links="bundles"`` the
    references are filled in and a ``citations`` block names records that cite this one;
    with ``"pages"`` it names no other record, as the registry's own: the references
    sample is empty (its counts stay) and there is no citations block."""
    named = links == "bundles"
    references = [c.sample_item() for c in cites] if named else []
    citations = [c.sample_item() for c in citers] if named else []
    snapshot_sha256 = canon_sha256({"source": source, "references": references, "citations": citations})
    citations_block = {"citations": {"count": cited_by_count, "sample": citations}} if named else {}
    return {
        "graph_snapshot": {
            "paper": {
                "title": paper.title,
                "license": paper.license,
                "headline": "",
                "cross_cats": list(paper.cross_cats),
                "primary_cat": paper.primary_cat,
                "authors_text": authors_text(paper.authors),
                "submitted_at": paper.submitted_at,
                "abstract_excerpt": paper.abstract[:EXCERPT_CHARS],
            },
            "claims": {"count": 0, "items": [], "snapshot_sha256": snapshot_sha256},
            "source": source,
            "verdict": {
                "id": None,
                "model_set": {},
                "created_at": None,
                "strongest_claim": "",
                "one_line_summary": "",
                "pipeline_version": None,
                "weakest_assumption": "",
                "pith_extraction_headline": "",
            },
            "references": {
                "count": len(cites),
                "sample": references,
                "resolved_work": len(cites),
                "snapshot_sha256": snapshot_sha256,
                "internal_anchors": len(cites),
            },
            **citations_block,
            "formal_canon": {"evidence_count": 0, "snapshot_sha256": snapshot_sha256},
            "author_claims": {"count": 0, "strong_count": 0, "snapshot_sha256": snapshot_sha256},
            "builder_version": BUILDER_VERSION,
        },
        "verdict_id": None,
    }
