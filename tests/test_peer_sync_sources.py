"""One archive filled from several sources: two peers, each holding part of the registry
and some records at another version, then the registry itself. What each lacks the
others fill in, and a record's current version is its newest, whichever source it came
from: an older one arriving later is kept as evidence, never made current."""

import hashlib
import json

import pytest

from pith.signing import Signer
from pith.verify import verify_bundle
from storage.archive.folder_store import LocalStore
from tests.plugins.archives import corpus_raws, extended, write_run
from tests.plugins.cli import run_cli, signing_key
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.tables import read_rows
from tests.test_peer_sync import audit, raw_objects
from tests.test_peer_sync_nginx import current_versions

LATER = "2026-07-08T00:00:00Z"


def peer_sync(tmp_path, peer, signer, corpus_dir):
    """``sync PEER --out tmp/copy``, the peer's key pinned."""
    key_doc = tmp_path / f"{signer.key_id}.json"
    key_doc.write_text(json.dumps(signer.pinned().document()))
    return run_cli(
        "sync", peer, "--out", tmp_path / "copy",
        "--keyring", corpus_dir / "keyring.json", "--keyring", key_doc, "--no-default-keys",
        "--signing-key", signing_key(tmp_path / "own-key.json"),
    )  # fmt: skip


def version(raw: bytes, keyring) -> tuple[str, str]:
    verdict = verify_bundle(raw, keyring)
    assert verdict.ok, verdict
    return verdict.pith_number, verdict.bundle_sha256


@pytest.mark.slow
def test_two_peers_and_the_registry_fill_in_and_the_newest_version_wins(tmp_path, corpus_dir, corpus_keyring, mirror):
    raws = list(corpus_raws(corpus_dir).values())
    half = len(raws) // 2
    first, second, missing = raws[:half], raws[half:-3], raws[-3:]  # the last three: in neither peer
    newer_at_a, newer_at_b = extended(first[0], LATER), extended(first[1], LATER)
    signer_a = Signer.from_seed("peer-key-a", bytes(range(1, 33)))
    signer_b = Signer.from_seed("peer-key-b", bytes(range(2, 34)))
    # peer A: its half, its first record only at a newer version; peer B: the other
    # half, that first record as first built (older than A's), another record's newer version
    write_run(LocalStore(tmp_path / "a"), signer_a, corpus_keyring, [*first[1:], newer_at_a])
    write_run(LocalStore(tmp_path / "b"), signer_b, corpus_keyring, [*second, first[0], newer_at_b])

    peer_sync(tmp_path, tmp_path / "a", signer_a, corpus_dir).check(0)
    peer_sync(tmp_path, tmp_path / "b", signer_b, corpus_dir).check(0)
    copied = raw_objects(tmp_path / "copy")
    held = {hashlib.sha256(raw).hexdigest() for raw in copied.values()}
    assert {hashlib.sha256(raw).hexdigest() for raw in [*first, *second, newer_at_a, newer_at_b]} == held
    current = current_versions(tmp_path / "copy")
    for newer in (newer_at_a, newer_at_b):
        number, bundle = version(newer, corpus_keyring)
        assert current[number] == bundle
    older = version(first[0], corpus_keyring)  # B's older copy, synced after A's newer one
    (row,) = [row for row in read_rows(tmp_path / "copy", "records") if row["bundle_sha256"] == older[1]]
    assert row["accepted_as_current"] is False  # kept as evidence, not made current
    assert len(current) == len(raws) - len(missing)

    server = mirror()  # the registry, every record as first built
    crawl = run_cli_crawl(
        tmp_path, "--signing-key", signing_key(tmp_path / "own-key.json"), "sitemap",
        resolver=server.url, out=tmp_path / "copy", corpus=corpus_dir,
    )  # fmt: skip
    assert crawl.returncode == 0, crawl.output[-3000:]
    current = current_versions(tmp_path / "copy")
    assert len(current) == len(raws)  # the registry filled in what neither peer had
    for raw in missing:
        number, bundle = version(raw, corpus_keyring)
        assert current[number] == bundle
    for newer in (newer_at_a, newer_at_b):
        number, bundle = version(newer, corpus_keyring)
        assert current[number] == bundle  # the registry's older versions are not made current
    audit(tmp_path, corpus_dir).check(0)
