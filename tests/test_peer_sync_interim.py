"""A long ``sync`` commits as it goes (``--commit-every``, as a crawl
does): what one manifest lists stays bounded; only the last run lists the peer's
checkpoint as synced, so a sync cut short starts again from the one before."""

import json

import pytest

from pith.keyring import Keyring
from pith.signing import Signer
from storage.archive.folder_store import LocalStore
from storage.archive.manifest import committed_manifests
from tests.plugins.archives import corpus_raws, write_run
from tests.plugins.cli import run_cli, signing_key


def sync(tmp_path, corpus_dir, peer_signer, *more):
    key_doc = tmp_path / "peer-key.json"
    key_doc.write_text(json.dumps(peer_signer.pinned().document()))
    return run_cli(
        "sync", tmp_path / "peer", "--out", tmp_path / "copy",
        "--keyring", corpus_dir / "keyring.json", "--keyring", key_doc, "--no-default-keys",
        "--signing-key", signing_key(tmp_path / "own-key.json"), *more,
    )  # fmt: skip


@pytest.mark.slow
def test_a_sync_commits_every_n_versions_and_lists_the_checkpoint_in_its_last_run(
    tmp_path, corpus_dir, corpus_keyring, peer_signer
):
    raws = list(corpus_raws(corpus_dir).values())
    write_run(LocalStore(tmp_path / "peer"), peer_signer, corpus_keyring, raws)
    sync(tmp_path, corpus_dir, peer_signer, "--commit-every", "10").check(0)

    own = Keyring([Signer.load(tmp_path / "own-key.json").pinned()])
    manifests = sorted(committed_manifests(LocalStore(tmp_path / "copy"), own), key=lambda m: m["committed_at"])
    assert len(manifests) == 2  # one batch of versions: its interim commit, then the last run
    interim, last = manifests
    assert interim["stats"]["archive"]["verified"] == len(raws) and last["stats"]["archive"]["verified"] == 0
    listed = [[entry["path"] for entry in manifest["objects"]] for manifest in manifests]
    assert not any(path.startswith("peers/") for path in listed[0])
    (checkpoint,) = [path for path in listed[1] if path.startswith("peers/")]
    (log,) = last["crawl"]["from_archive"]["logs"]
    assert log["checkpoint"] == checkpoint and log["archived"] == len(raws)
    run_cli(
        "audit", tmp_path / "copy", "--keyring", corpus_dir / "keyring.json", "--no-default-keys",
        "--signing-key", signing_key(tmp_path / "own-key.json"),
    ).check(0)  # fmt: skip
    assert "1 file read" in sync(tmp_path, corpus_dir, peer_signer).check(0).output
