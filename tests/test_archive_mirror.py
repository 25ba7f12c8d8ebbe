"""An archive served as a mirror: a crawl of it gives back exactly what was archived
(the round trip, on a folder and on S3), its catalog is the corpus's own, only the
committed current version of each record is served, and altered bytes never are."""

import hashlib
import shutil
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from pith.keyring import Keyring
from pith.signing import Signer
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.archive.reader import NothingCommitted, reading_keyring
from storage.archive.s3_store import S3Store
from storage.serving.archive_source import ArchiveSource
from storage.serving.runner import BackgroundMirror
from storage.serving.server import MirrorServer
from storage.serving.source import BUNDLES_DIR, KEYRING_NAME, CorpusDirectory
from tests.plugins.archives import corpus_raws, forked, rebuilt, write_run
from tests.plugins.cli import run_cli
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.faults import FaultRule
from tests.plugins.mirror import serve_process
from tests.plugins.tables import read_rows

REAL = "RLLQL6357CWNZYHNBMCYD3UK5B"
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def archived(store) -> tuple[set[str], dict[str, bytes]]:
    """The bundle_sha256 set of the records table, and every raw object's bytes by path."""
    raw = {stored.path: store.get_bytes(stored.path) for stored in store.list(f"{layout.RAW}/")}
    return {row["bundle_sha256"] for row in read_rows(store, "records", columns=["bundle_sha256"])}, raw


def trusted(store, corpus_keyring):
    """The corpus's registry keys and the archiver keys the archive publishes."""
    return reading_keyring(store, corpus_keyring, archive_keys=True)


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with _DIRECT.open(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


@pytest.fixture(scope="module")
def crawled(tmp_path_factory, corpus_dir):
    """Archive A: the whole corpus, crawled from its mirror into a folder."""
    root = tmp_path_factory.mktemp("crawled")
    with BackgroundMirror(MirrorServer(CorpusDirectory(corpus_dir))) as server:
        result = run_cli_crawl(
            root, f"pith:2019:{REAL}", resolver=server.url, out=str(root / "archive"), corpus=corpus_dir
        ).check()
    assert result.stat("archived") == 43
    return LocalStore(root / "archive")


@pytest.mark.slow
def test_round_trip_through_a_served_folder_archive(tmp_path, corpus_dir, crawled, corpus_keyring):
    source = ArchiveSource(crawled, trusted(crawled, corpus_keyring))
    with BackgroundMirror(MirrorServer(source)) as server:
        result = run_cli_crawl(
            tmp_path, f"pith:2019:{REAL}", resolver=server.url, out=str(tmp_path / "b"), corpus=corpus_dir
        ).check()
        served = {r.record for r in server.requests if r.document == "bundle" and r.status == 200}
    assert (result.stat("verified"), result.stat("rejected"), result.stat("state_mismatch")) == (43, 0, 0)
    assert served == set(source.catalog.suffixes) and len(served) == 43
    versions_a, raw_a = archived(crawled)
    versions_b, raw_b = archived(LocalStore(tmp_path / "b"))
    assert len(versions_a) == 43
    assert versions_b == versions_a
    assert raw_b == raw_a  # same paths (content addresses), byte for byte


def crawl_real_to_s3(tmp_path, corpus_dir, mirror, s3_endpoint, out: str) -> None:
    """The real seed crawled into the S3 archive ``out``, which must succeed."""
    run_cli_crawl(
        tmp_path,
        "--s3-endpoint-url",
        s3_endpoint,
        f"pith:2019:{REAL}",
        resolver=mirror().url,
        out=out,
        corpus=corpus_dir,
    ).check()


def test_round_trip_through_a_served_s3_archive(tmp_path, corpus_dir, mirror, s3_bucket, s3_endpoint):
    first, second = f"s3://{s3_bucket}/a", f"s3://{s3_bucket}/b"
    crawl_real_to_s3(tmp_path, corpus_dir, mirror, s3_endpoint, first)
    with serve_process(
        first, "--s3-endpoint-url", s3_endpoint, "--keyring", str(corpus_dir / KEYRING_NAME), "--trust-archive-keys"
    ) as (_, url):
        result = run_cli_crawl(
            tmp_path, "--s3-endpoint-url", s3_endpoint, f"pith:2019:{REAL}", resolver=url, out=second, corpus=corpus_dir
        ).check()
    assert (result.stat("verified"), result.stat("rejected")) == (43, 0)
    versions_a, raw_a = archived(S3Store(s3_bucket, "a", endpoint_url=s3_endpoint))
    versions_b, raw_b = archived(S3Store(s3_bucket, "b", endpoint_url=s3_endpoint))
    assert len(versions_a) == 43 and versions_b == versions_a
    assert raw_b == raw_a


def test_the_catalog_from_the_tables_is_the_corpus_catalog(crawled, corpus_catalog, corpus_keyring):
    catalog = ArchiveSource(crawled, trusted(crawled, corpus_keyring)).catalog
    assert catalog.suffixes == corpus_catalog.suffixes
    for suffix in corpus_catalog.suffixes:
        ours, theirs = catalog.entry(suffix), corpus_catalog.entry(suffix)
        assert (ours.pith_number, ours.built_at, ours.version, ours.cites) == (
            theirs.pith_number,
            theirs.built_at,
            theirs.version,
            theirs.cites,
        )
        assert sorted(ours.aliases) == sorted(theirs.aliases)
        assert catalog.cited_by(suffix) == corpus_catalog.cited_by(suffix)
    assert catalog.signing_key_id == corpus_catalog.signing_key_id
    assert catalog.public_keys == corpus_catalog.public_keys
    assert catalog.resolve("1904.12043v2") == REAL


def test_the_current_version_is_the_newest_accepted_one(tmp_path, corpus_dir, corpus_keyring):
    suffix, original = next((s, raw) for s, raw in corpus_raws(corpus_dir).items() if s != REAL)
    fork = forked(original, "2026-07-01T00:00:00Z")  # built later, but without the graph snapshot
    store, signer = LocalStore(tmp_path / "archive"), Signer.from_seed("archiver-1", bytes(32))
    write_run(store, signer, corpus_keyring, [rebuilt(original, "2026-06-01T00:00:00Z")])
    write_run(store, signer, corpus_keyring, [original, fork])  # older, then not append-only

    def served() -> bytes:
        return ArchiveSource(store, trusted(store, corpus_keyring)).bundle_bytes(suffix)

    assert served() == rebuilt(original, "2026-06-01T00:00:00Z")  # not the later run's older version, nor the fork
    newest = rebuilt(original, "2026-08-01T00:00:00Z")
    write_run(store, signer, corpus_keyring, [newest])
    assert served() == newest


def test_only_trusted_committed_runs_are_served(tmp_path, corpus_dir, corpus_keyring):
    raws = list(corpus_raws(corpus_dir).values())
    store = LocalStore(tmp_path / "archive")
    ours, other = Signer.from_seed("archiver-1", bytes(32)), Signer.from_seed("archiver-2", bytes([1]) * 32)
    write_run(store, ours, corpus_keyring, raws[:5])
    write_run(store, ours, corpus_keyring, raws[5:8], commit=False)  # crashed: orphans only
    write_run(store, other, corpus_keyring, raws[8:10], worker="w1")

    def served(keyring) -> int:
        return len(ArchiveSource(store, keyring).catalog)

    assert served(trusted(store, corpus_keyring)) == 7  # ours and the other key, both published in keys/
    assert served(reading_keyring(store, Keyring([*corpus_keyring, ours.pinned()]))) == 5
    stranger = Keyring([*corpus_keyring, Signer.from_seed("archiver-3", bytes([3]) * 32).pinned()])
    with pytest.raises(NothingCommitted, match="archiver-3") as caught:
        ArchiveSource(store, reading_keyring(store, stranger))
    assert caught.value.unpinned == ["archiver-1", "archiver-2"]


def test_altered_raw_bytes_are_not_served(tmp_path, crawled, corpus_keyring):
    copy = tmp_path / "archive"
    copy.mkdir()
    for stored in crawled.list():
        (copy / stored.path).parent.mkdir(parents=True, exist_ok=True)
        (copy / stored.path).write_bytes(crawled.get_bytes(stored.path))
    source = ArchiveSource(LocalStore(copy), trusted(LocalStore(copy), corpus_keyring))
    victim = source.catalog.suffixes[0]
    target = copy / source.versions[source.catalog.entry(victim).pith_number].raw.path
    target.write_bytes(target.read_bytes().replace(b"pith", b"PITH", 1))
    with BackgroundMirror(MirrorServer(source)) as server:
        assert fetch(f"{server.url}/pith/{victim}/bundle.json")[0] == 404
        status, body = fetch(f"{server.url}/pith/{source.catalog.suffixes[1]}/bundle.json")
    assert status == 200 and body == crawled.get_bytes(
        source.versions[source.catalog.entry(source.catalog.suffixes[1]).pith_number].raw.path
    )


def test_serve_tells_archives_from_corpora_and_refuses_what_it_cannot_trust(tmp_path, corpus_dir, crawled):
    untrusted = run_cli("serve", str(crawled.root), "--keyring", str(corpus_dir / KEYRING_NAME))
    [key_document] = (crawled.root / "keys").glob("*.json")
    assert untrusted.returncode == 2 and "Traceback" not in untrusted.output
    [line] = untrusted.output.splitlines()
    assert line.startswith("Error: ") and "no manifest verifies under the trusted keys" in line
    assert f"pass --keyring {crawled.root}/keys/{key_document.name} after checking its fingerprint" in line
    (tmp_path / "empty" / "manifests").mkdir(parents=True)
    empty = run_cli("serve", str(tmp_path / "empty"), "--no-default-keys")
    assert empty.returncode == 2 and "no key to trust" in empty.output
    corpus = run_cli("serve", str(corpus_dir), "--trust-archive-keys")
    assert corpus.returncode == 2 and "is a folder of bundles, not an archive" in corpus.output
    missing = run_cli("serve", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "neither a folder nor s3://" in missing.output


def test_serve_refuses_a_folder_with_nothing_to_serve(tmp_path, corpus_dir):
    """Neither an archive nor a bundle file: nothing there (exit 4, as for every reader)."""
    (tmp_path / "empty").mkdir()
    empty = run_cli("serve", str(tmp_path / "empty"))
    assert empty.returncode == 4
    assert empty.output.splitlines() == [
        f"Error: no archive at {tmp_path / 'empty'}: no manifests/ folder, and nothing to serve: "
        f"no <SUFFIX>.bundle.json file in {tmp_path / 'empty'}"
    ]
    misnamed = tmp_path / "misnamed"
    misnamed.mkdir()
    for path in sorted((corpus_dir / BUNDLES_DIR).glob("*.bundle.json"))[:3]:
        shutil.copy(path, misnamed / path.name.replace(".bundle.json", ".json"))
    refused = run_cli("serve", str(misnamed))
    assert refused.returncode == 4 and "Traceback" not in refused.output
    [line] = refused.output.splitlines()
    assert "no <SUFFIX>.bundle.json file" in line and "it holds 3 other *.json files" in line


def test_serve_verifies_a_folder_under_the_pinned_keys_and_withholds_the_rest(tmp_path, corpus_dir, corpus_catalog):
    """The minted bundles of the test corpus are signed by its own key, which only
    --keyring pins; the three real ones verify under the built-in registry key."""
    minted = [
        s for s in corpus_catalog.suffixes if s != REAL and (corpus_dir / BUNDLES_DIR / f"{s}.bundle.json").is_file()
    ]
    folder = tmp_path / "minted"
    folder.mkdir()
    for suffix in minted[:5]:
        shutil.copy(corpus_dir / BUNDLES_DIR / f"{suffix}.bundle.json", folder)
    refused = run_cli("serve", str(folder))
    assert refused.returncode == 2
    [line] = refused.output.splitlines()
    assert "none of its 5 bundles can be served: none verifies under the trusted keys (unknown_key (5))" in line
    assert "--keyring FILE" in line

    shutil.copy(corpus_dir / BUNDLES_DIR / f"{REAL}.bundle.json", folder)
    tampered = folder / f"{minted[0]}.bundle.json"
    tampered.write_bytes(tampered.read_bytes().replace(b'"pith:', b'"PITH:', 1))
    keyring = str(corpus_dir / KEYRING_NAME)
    for options, served in (((), {REAL}), (("--keyring", keyring), {REAL, *minted[1:5]})):
        log = tmp_path / "serve.log"
        with log.open("w") as stderr, serve_process(folder, *options, stderr=stderr) as (_, url):
            answers = {s: fetch(f"{url}/pith/{s}/bundle.json")[0] for s in [REAL, *minted[:5]]}
        assert {s for s, status in answers.items() if status == 200} == served
        assert set(answers.values()) == {200, 404}
        withheld = [line for line in log.read_text().splitlines() if "withholding" in line]
        assert len(withheld) == 1 and f"withholding {6 - len(served)} of 6 bundles that do not verify" in withheld[0]


def test_a_stalled_store_does_not_stall_the_served_mirror(
    tmp_path, corpus_dir, mirror, s3_bucket, s3_endpoint, fault_proxy, corpus_keyring
):
    """Bundles of an S3 archive are read off the event loop: while the store holds one
    read, other clients are still answered."""
    crawl_real_to_s3(tmp_path, corpus_dir, mirror, s3_endpoint, f"s3://{s3_bucket}/a")
    proxy = fault_proxy()
    store = S3Store(s3_bucket, "a", endpoint_url=proxy.url, max_attempts=1)
    source = ArchiveSource(store, trusted(store, corpus_keyring))
    assert source.remote
    raws = corpus_raws(corpus_dir)
    other = next(suffix for suffix in raws if suffix != REAL)
    held_path = layout.raw_bundle(hashlib.sha256(raws[REAL]).hexdigest())
    proxy.set_rules(FaultRule("stall", methods=("GET",), path=held_path))
    with BackgroundMirror(MirrorServer(source)) as server, ThreadPoolExecutor(1) as pool:
        held = pool.submit(fetch, f"{server.url}/pith/{REAL}/bundle.json")
        assert proxy.stalled.wait(10)
        assert fetch(f"{server.url}/pith/{other}/bundle.json") == (200, raws[other])  # read meanwhile
        assert not held.done()
        proxy.release()
        assert held.result(30)[0] != 200  # the held read was dropped: no bytes to serve
