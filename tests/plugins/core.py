"""Fixtures for the protocol core: the real bundles and test signing keys."""

import json
from pathlib import Path

import pytest

from pith.keyring import Keyring
from pith.signing import Signer
from pith_archiver import FIXTURES

SHARED_REAL = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "real"


def real_bundle_paths() -> list[Path]:
    return sorted(FIXTURES.glob("*.bundle.json"))


@pytest.fixture(autouse=True)
def own_config_folder(tmp_path, monkeypatch):
    """Each test is its own machine: the archiver key commands trust by default is the
    one under tmp_path/config (where run_cli_crawl's crawls make theirs), never the
    user's."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


@pytest.fixture(scope="session")
def real_raw() -> dict[str, bytes]:
    """The exact bytes of each real registry bundle, by 26-character suffix."""
    return {p.name.split(".")[0]: p.read_bytes() for p in real_bundle_paths()}


@pytest.fixture(scope="session")
def real_docs(real_raw) -> dict[str, dict]:
    return {suffix: json.loads(raw) for suffix, raw in real_raw.items()}


@pytest.fixture(scope="session")
def registry_keyring() -> Keyring:
    return Keyring.default()


@pytest.fixture(scope="session")
def test_signer() -> Signer:
    """A deterministic test key, pinned under its own key_id by ``test_keyring``."""
    return Signer.from_seed("test-key-1", bytes(range(32)))


@pytest.fixture(scope="session")
def test_keyring(test_signer) -> Keyring:
    return Keyring([test_signer.pinned()])
