"""The test kit's ``serve --virtual N``: records minted on demand, a graph one seed walks whole, and a
crawl of it that costs about one request per record."""

import json
import random

import pytest

from crawler.scheduling.local_scheduler import TAKE
from pith.graph import names_every_citer
from pith.keyring import Keyring
from pith.parse import parse
from pith.verify import verify_document
from pith_testkit.virtual import VirtualCorpus
from tests.plugins.cli import run_cli
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.mirror import serve_process

# a bound that does not grow with the 1,000 records: one batch read from disk
# (crawler.scheduling.local_scheduler.TAKE) and the pages and states of the records in flight
HELD = 2 * TAKE


@pytest.fixture(scope="module")
def corpus():
    return VirtualCorpus(600, seed=3)


def test_the_graph_is_symmetric_and_one_record_reaches_all(corpus):
    catalog = corpus.catalog
    for i in range(len(catalog)):
        assert all(i in catalog.citers_of(j) for j in catalog.cites_of(i))
        assert all(i in catalog.cites_of(j) for j in catalog.citers_of(i))
    reached, todo = {417}, [417]
    while todo:
        i = todo.pop()
        for j in catalog.cites_of(i) + catalog.citers_of(i):
            if j not in reached:
                reached.add(j)
                todo.append(j)
    assert len(reached) == len(catalog) == 600


def test_bundles_verify_name_every_citer_and_are_the_same_each_time(corpus, tmp_path):
    corpus.write_keyring(tmp_path / "keyring.json")
    keyring = Keyring.build([tmp_path / "keyring.json"], default_keys=False)
    for suffix in random.Random(1).sample(list(corpus.catalog.suffixes), 5):
        raw = corpus.bundle_bytes(suffix)
        document = parse(raw)
        assert verify_document(document.data, keyring, document.exact).ok
        assert document.data["pith_number"].endswith(suffix)
        assert names_every_citer(document.data)
        assert VirtualCorpus(600, seed=3).bundle_bytes(suffix) == raw  # minted again, byte for byte
    assert corpus.bundle_bytes("A" * 26) is None


def test_aliases_resolve_to_their_record(corpus):
    catalog = corpus.catalog
    suffix = catalog.suffixes[123]
    bundle = json.loads(corpus.bundle_bytes(suffix))
    aliases = {a["alias_kind"]: a["alias_value"] for a in bundle["source_aliases"]}
    assert catalog.resolve(aliases["arxiv_version"]) == suffix
    assert catalog.resolve(aliases["doi"]) is not None
    assert catalog.resolve(bundle["pith_number"]) == suffix
    assert catalog.resolve("pith:1999:" + suffix) is None
    assert catalog.resolve("9999.99999") is None


@pytest.mark.slow
def test_a_crawl_from_one_seed_archives_every_virtual_record(tmp_path):
    keyring = tmp_path / "virtual-keyring.json"
    with serve_process("--virtual", "1000", "--seed", "5", "--keyring-out", str(keyring), kit=True) as (process, url):
        assert process.stdout.readline().strip() == f"keyring {keyring}"
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("".join(f"{suffix}\n" for suffix in VirtualCorpus(1000, seed=5).catalog.suffixes))

        def crawl(out: str, *args: str):
            return run_cli_crawl(
                tmp_path,
                *("--resolver", url, "--keyring", str(keyring), "--no-default-keys", "--out", str(tmp_path / out)),
                *("-s", "AUTOTHROTTLE_ENABLED=false", "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=32"),
                *args,
                timeout=300,
            )

        result = crawl("archive", VirtualCorpus(1, seed=5).catalog.suffixes[0])
        sitemap = crawl("from-sitemap", "sitemap")
        seeded = crawl("from-seeds", "--no-follow", "--seeds-file", str(seeds))
    assert result.returncode == 0, result.stderr[-3000:]
    assert (result.stat("records_found"), result.stat("verified"), result.stat("archived")) == (1000, 1000, 1000)
    assert result.stat("pages_fetched") == 0  # every bundle names its citing records
    assert result.stat("requests_per_record") <= 2
    assert result.stats["downloader/request_count"] == 1000 + 3  # robots.txt, the signing key, the manifest
    # the records waited on disk: memory held the requests in flight, not the records found
    assert 0 < result.stat("requests_held_max") <= HELD
    assert sitemap.returncode == 0, sitemap.stderr[-3000:]
    assert (sitemap.stat("verified"), sitemap.stat("archived")) == (1000, 1000)
    assert sitemap.stat("requests_per_record") <= 1.05
    assert 0 < sitemap.stat("requests_held_max") <= HELD
    assert seeded.returncode == 0, seeded.stderr[-3000:]
    assert seeded.stat("archived") == 1000 and 0 < seeded.stat("requests_held_max") <= HELD


def test_virtual_options_that_do_not_fit_are_usage_errors(tmp_path):
    both = run_cli("serve", str(tmp_path), "--virtual", "10", kit=True)
    assert both.returncode == 2 and "not both" in both.output
    alone = run_cli("serve", str(tmp_path), "--keyring-out", str(tmp_path / "k.json"), kit=True)
    assert alone.returncode == 2 and "--keyring-out goes with --virtual" in alone.output
    share = run_cli(
        "crawl", "--resolver", "http://127.0.0.1:1", "--check-state-sample", "150%", "RLLQL6357CWNZYHNBMCYD3UK5B"
    )
    assert share.returncode == 2 and "not a percentage" in share.output
