"""A peer archive to copy from (``sync``) or repair from: the corpus in
one run, signed by the peer's own archive key."""

from pathlib import Path

import pytest

from pith.signing import Signer
from storage.archive.folder_store import LocalStore
from tests.plugins.archives import corpus_raws, write_run

PEER_SEED = bytes(range(1, 33))


@pytest.fixture
def peer_signer() -> Signer:
    return Signer.from_seed("peer-key-1", PEER_SEED)


@pytest.fixture
def peer(tmp_path, corpus_dir, corpus_keyring, peer_signer) -> Path:
    """A peer archive of the corpus in one run, by the peer's key."""
    folder = tmp_path / "peer"
    write_run(LocalStore(folder), peer_signer, corpus_keyring, list(corpus_raws(corpus_dir).values()))
    return folder
