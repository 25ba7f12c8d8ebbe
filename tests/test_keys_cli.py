"""The archiver's own key: `keys generate` makes one, `crawl --signing-key` signs with
it and publishes its public document under keys/; with no option, a key is made on
first use outside the archive, and the crawl says where."""

import json
import stat

import pytest

from pith.keyring import ARCHIVE, Keyring, key_from_entry
from pith.signing import Signer
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.archive.manifest import committed_manifests
from tests.plugins.cli import run_cli
from tests.plugins.crawling import run_cli_crawl


def test_generate_writes_a_private_key_and_prints_its_public_document(tmp_path):
    out = tmp_path / "keys" / "archive-key.json"
    result = run_cli("keys", "generate", "--signing-key", str(out), "--key-id", "library-archive-1")
    assert result.returncode == 0, result.output
    signer = Signer.load(out)
    assert signer.key_id == "library-archive-1"
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    document = json.loads(result.stdout)
    assert document == {**signer.public_document(), "role": "archive"}
    assert key_from_entry(document) == signer.pinned(ARCHIVE)
    assert f"wrote signing key library-archive-1 (fingerprint {signer.fingerprint}) to {out}" in result.stderr


def test_generate_never_replaces_a_key_and_checks_the_id(tmp_path):
    out = tmp_path / "key.json"
    assert run_cli("keys", "generate", "--signing-key", str(out)).returncode == 0
    before = out.read_bytes()
    again = run_cli("keys", "generate", "--signing-key", str(out))
    assert again.returncode == 2 and "never replaced" in again.output
    assert out.read_bytes() == before
    assert Signer.load(out).key_id.startswith("pith-archiver-")
    bad = run_cli("keys", "generate", "--signing-key", str(tmp_path / "other.json"), "--key-id", "a/b")
    assert bad.returncode == 2 and "--key-id" in bad.output
    assert not (tmp_path / "other.json").exists()


@pytest.mark.slow
def test_crawl_signs_with_the_given_key_and_publishes_it(tmp_path, static_site):
    base, suffixes, _ = static_site
    key_file = tmp_path / "archive-key.json"
    assert run_cli("keys", "generate", "--signing-key", str(key_file), "--key-id", "w1-key").returncode == 0
    archive = tmp_path / "archive"
    result = run_cli_crawl(
        tmp_path, "--resolver", base, "--out", str(archive), "--signing-key", str(key_file), suffixes[0]
    )
    assert result.returncode == 0, result.stderr[-3000:]
    signer = Signer.load(key_file)
    [manifest] = committed_manifests(LocalStore(archive), Keyring([signer.pinned()]))
    assert manifest["signature"]["key_id"] == "w1-key"
    published = archive / layout.key_document("w1-key")
    assert json.loads(published.read_text()) == signer.archive_key_document()
    assert not (tmp_path / "config" / "pith-archiver" / "signing-key.json").exists()  # no default key was made
    # the published document is all `verify` needs to check the run's attestations
    [feed] = (archive / "attestations").glob("*.jsonl")
    checked = run_cli("verify", "--keyring", str(published), str(feed))
    assert checked.returncode == 0 and "3 attestations" in checked.output


@pytest.mark.slow
def test_crawl_without_a_key_makes_one_outside_the_archive_and_says_where(tmp_path, static_site):
    base, suffixes, _ = static_site
    archive = tmp_path / "archive"
    result = run_cli_crawl(tmp_path, "--resolver", base, "--out", str(archive), suffixes[0])
    assert result.returncode == 0, result.stderr[-3000:]
    key_file = tmp_path / "config" / "pith-archiver" / "signing-key.json"
    assert "created the archiver signing key" in result.stderr and str(key_file) in result.stderr
    signer = Signer.load(key_file)
    assert json.loads((archive / layout.key_document(signer.key_id)).read_text()) == signer.archive_key_document()
    assert not any(archive.rglob("signing-key.json"))
    again = run_cli_crawl(tmp_path, "--resolver", base, "--out", str(archive), suffixes[0])
    assert "created the archiver signing key" not in again.stderr  # made once, then reused
    assert len(list(committed_manifests(LocalStore(archive), Keyring([signer.pinned()])))) == 2
