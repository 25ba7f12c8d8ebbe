"""The generated test corpus: registry format, signatures, determinism, the graph."""

import json
import random
import shutil
from collections import Counter

from crawler.links import suffixes_in
from pith.keyring import REGISTRY, Keyring
from pith.verify import verify_bundle
from pith_archiver import FIXTURES
from pith_testkit.corpus import citation_graph, corpus_signer, generate_corpus, invert
from pith_testkit.papers import text_sha256
from storage.serving.catalog import Catalog
from storage.serving.record import latest_snapshot
from storage.serving.source import BUNDLES_DIR, INDEX_NAME, KEYRING_NAME, CorpusDirectory
from tests.plugins.cli import run_cli
from tests.plugins.mirror import SMALL_CORPUS_RECORDS, SMALL_CORPUS_SEED


def minted(corpus_dir) -> dict[str, dict]:
    real = {p.name for p in FIXTURES.glob("*.bundle.json")}
    return {
        p.name.split(".")[0]: json.loads(p.read_bytes())
        for p in sorted((corpus_dir / BUNDLES_DIR).glob("*.bundle.json"))
        if p.name not in real
    }


def shape(value):
    """The key structure of a JSON value, in key order (lists stand for any length)."""
    if isinstance(value, dict):
        return [(key, shape(item)) for key, item in value.items()]
    return type(value).__name__


def test_whole_corpus_verifies_with_the_cli_under_its_keyring(corpus_dir):
    result = run_cli(
        "verify", "--no-default-keys", "--keyring", str(corpus_dir / KEYRING_NAME), str(corpus_dir / BUNDLES_DIR)
    )
    assert result.returncode == 0, result.output
    assert f"{SMALL_CORPUS_RECORDS + 3} verified, 0 rejected" in result.output


def test_minted_bundles_are_signed_by_the_test_key_not_the_registry(corpus_dir, registry_keyring):
    docs = minted(corpus_dir)
    assert len(docs) == SMALL_CORPUS_RECORDS
    raw = (corpus_dir / BUNDLES_DIR / f"{next(iter(docs))}.bundle.json").read_bytes()
    assert verify_bundle(raw, registry_keyring).reason == "unknown_key"
    signer = corpus_signer(SMALL_CORPUS_SEED)
    assert verify_bundle(raw, Keyring([signer.pinned(REGISTRY)])).ok
    keyring = json.loads((corpus_dir / KEYRING_NAME).read_text())
    assert [k["key_id"] for k in keyring["keys"]] == [signer.key_id, "pith-v1-2026-05"]


def test_real_bundles_are_included_byte_for_byte(corpus_dir):
    for path in FIXTURES.glob("*.bundle.json"):
        assert (corpus_dir / BUNDLES_DIR / path.name).read_bytes() == path.read_bytes()


def test_minted_records_have_the_registry_shape(corpus_dir, real_docs):
    real = next(iter(real_docs.values()))
    real_snapshot = latest_snapshot(real)
    for suffix, bundle in minted(corpus_dir).items():
        assert list(bundle) == list(real)  # same keys in the same order
        assert shape(bundle["canonical_record"]) == shape(real["canonical_record"])
        assert [e["event_type"] for e in bundle["events"]] == ["record_created", "graph_snapshot"]
        snapshot = latest_snapshot(bundle)
        assert set(snapshot) == set(real_snapshot) | {"citations"}
        assert shape(snapshot["paper"]) == shape(real_snapshot["paper"])
        arxiv = bundle["canonical_record"]["source"]["id"]
        aliases = {a["alias_kind"]: a["alias_value"] for a in bundle["source_aliases"]}
        assert aliases == {
            "arxiv": arxiv,
            "arxiv_version": f"{arxiv}v{bundle['source']['version']}",
            "doi": f"10.48550/arxiv.{arxiv}",
            "pith_short_8": suffix[:8],
            "pith_short_12": suffix[:12],
            "pith_short_16": suffix[:16],
        }
        paper = snapshot["paper"]
        assert bundle["canonical_record"]["metadata"]["title_canon_sha256"] == text_sha256(paper["title"])
        raw = (corpus_dir / BUNDLES_DIR / f"{suffix}.bundle.json").read_bytes()
        assert raw == json.dumps(bundle, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def test_title_hash_rule_is_the_one_the_real_bundles_use(real_docs):
    for bundle in real_docs.values():
        title = latest_snapshot(bundle)["paper"]["title"]
        assert bundle["canonical_record"]["metadata"]["title_canon_sha256"] == text_sha256(title)


def test_text_is_non_ascii_and_papers_have_several_versions(corpus_dir):
    docs = minted(corpus_dir).values()
    texts = [latest_snapshot(b)["paper"]["title"] + latest_snapshot(b)["paper"]["authors_text"] for b in docs]
    assert sum(not text.isascii() for text in texts) >= len(texts) // 2
    versions = Counter(b["canonical_record"]["source"]["id"] for b in docs)
    assert max(versions.values()) >= 2


def test_references_name_corpus_records_and_every_record_is_cited_or_cites(corpus_dir, corpus_catalog):
    for bundle in minted(corpus_dir).values():
        references = latest_snapshot(bundle)["references"]
        assert 1 <= references["count"] == len(references["sample"])
        for item in references["sample"]:
            assert corpus_catalog.resolve(item["pith_number"]) is not None
    for path in FIXTURES.glob("*.bundle.json"):
        assert corpus_catalog.cited_by(path.name.split(".")[0]), f"{path.name} is cited by no minted record"


def test_citations_block_agrees_with_the_inverted_references(corpus_dir, corpus_catalog):
    for suffix, bundle in minted(corpus_dir).items():
        citations = latest_snapshot(bundle)["citations"]
        citers = corpus_catalog.cited_by(suffix)
        assert citations["count"] == len(citers)
        assert {i["pith_number"] for i in citations["sample"]} <= {corpus_catalog.entry(s).pith_number for s in citers}


def test_same_seed_gives_the_same_bytes_and_another_seed_does_not(tmp_path):
    outputs = {}
    for name, seed in (("a", 11), ("b", 11), ("c", 12)):
        generate_corpus(tmp_path / name, 12, seed)
        outputs[name] = {
            p.relative_to(tmp_path / name): p.read_bytes() for p in (tmp_path / name).rglob("*") if p.is_file()
        }
    assert outputs["a"] == outputs["b"]
    assert len(outputs["a"]) == 12 + 3 + 2  # bundles, keyring.json, corpus.json
    minted_a = {k for k in outputs["a"] if k.parts[0] == BUNDLES_DIR} - {k for k in outputs["c"]}
    assert len(minted_a) == 12


def test_saved_index_equals_the_one_rebuilt_from_the_bundles(corpus_dir, tmp_path):
    saved = Catalog.from_json(json.loads((corpus_dir / INDEX_NAME).read_bytes()))
    shutil.copytree(corpus_dir / BUNDLES_DIR, tmp_path / BUNDLES_DIR)
    rebuilt = CorpusDirectory(tmp_path).catalog
    assert rebuilt.to_json() == saved.to_json()


def test_pages_corpus_bundles_name_no_other_record_as_the_registrys(pages_corpus_dir, real_docs):
    real_snapshot = latest_snapshot(next(iter(real_docs.values())))
    for path in sorted((pages_corpus_dir / BUNDLES_DIR).glob("*.bundle.json")):
        assert suffixes_in(path.read_bytes()) == [path.name.split(".")[0]], path.name
    for bundle in minted(pages_corpus_dir).values():
        snapshot = latest_snapshot(bundle)
        assert set(snapshot) == set(real_snapshot)  # no citations block, as in the registry's
        assert snapshot["references"]["sample"] == []
        assert snapshot["references"]["count"] >= 1  # it still cites: only its record page says whom


def test_pages_corpus_keeps_the_citation_graph_in_its_saved_catalog(pages_corpus_dir, corpus_catalog, tmp_path):
    catalog = CorpusDirectory(pages_corpus_dir).catalog
    # the same records and the same graph as the corpus whose bundles name them
    assert catalog.to_json() == corpus_catalog.to_json()
    assert sum(len(catalog.entry(s).cites) for s in catalog.suffixes) >= SMALL_CORPUS_RECORDS
    assert json.loads((pages_corpus_dir / INDEX_NAME).read_bytes())["corpus"]["links"] == "pages"
    # the bundles alone no longer carry it: corpus.json is its only record
    shutil.copytree(pages_corpus_dir / BUNDLES_DIR, tmp_path / BUNDLES_DIR)
    rebuilt = CorpusDirectory(tmp_path).catalog
    assert rebuilt.suffixes == catalog.suffixes
    assert not any(rebuilt.entry(s).cites for s in rebuilt.suffixes)


def test_cli_generate_writes_a_corpus_and_refuses_a_used_directory(tmp_path):
    out = tmp_path / "corpus"
    result = run_cli("corpus", "generate", "--records", "5", "--out", str(out), "--seed", "3", kit=True)
    assert result.returncode == 0, result.output
    assert "wrote 8 bundles (5 minted, 3 real)" in result.output
    assert len(list((out / BUNDLES_DIR).glob("*.bundle.json"))) == 8
    again = run_cli("corpus", "generate", "--records", "5", "--out", str(out), kit=True)
    assert again.returncode == 2 and "not empty" in again.output
    pages = run_cli(
        "corpus", "generate", "--records", "5", "--out", str(tmp_path / "pages"), "--links", "pages", kit=True
    )
    assert pages.returncode == 0, pages.output
    assert json.loads((tmp_path / "pages" / INDEX_NAME).read_bytes())["corpus"]["links"] == "pages"
    assert all("citations" not in latest_snapshot(b) for b in minted(tmp_path / "pages").values())


def test_citation_graph_of_a_large_corpus_is_connected():
    graph = citation_graph(random.Random(5), 5000, 3)
    citers = invert(graph, 5003)
    seen, frontier = {0}, [0]
    while frontier:
        node = frontier.pop()
        for other in (graph[node] if node < 5000 else []) + citers[node]:
            if other not in seen:
                seen.add(other)
                frontier.append(other)
    assert len(seen) == 5003
    assert all(1 <= len([c for c in cited if c < 5000]) <= 3 for cited in graph[1:])
