"""``serve ARCHIVE`` is a peer: ``sync`` and ``audit --repair-from`` read
its logs, keys and raw objects from it as from a static file server, and it serves
only what its trusted manifests list, checked, read-only."""

import json
import urllib.error
import urllib.request

import pytest

from pith.keyring import Keyring
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.serving.archive_source import ArchiveSource
from storage.serving.runner import BackgroundMirror
from storage.serving.server import MirrorServer
from tests.test_peer_sync import audit as audit_copy
from tests.test_peer_sync import raw_objects, sync
from tests.test_repair import archive, audit, damage, own  # noqa: F401 - fixtures


@pytest.fixture
def served(peer, corpus_keyring, peer_signer):
    """The peer archive under ``serve``: its URL."""
    keyring = Keyring([*corpus_keyring, peer_signer.pinned()])
    with BackgroundMirror(MirrorServer(ArchiveSource(LocalStore(peer), keyring))) as server:
        yield server.url


def status_of(url: str) -> int:
    try:
        with urllib.request.urlopen(url) as answer:  # noqa: S310 - a loopback test server
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.mark.slow
def test_a_served_archive_is_synced_from_as_a_static_one(tmp_path, peer, served, corpus_dir, peer_signer):
    sync(tmp_path, served, corpus_dir, peer_signer).check(0)
    assert raw_objects(tmp_path / "copy") == raw_objects(peer)
    audit_copy(tmp_path, corpus_dir).check(0)


@pytest.mark.slow
def test_a_served_archive_repairs_another(tmp_path, archive, served, corpus_dir):  # noqa: F811
    good = damage(archive)
    result = audit(tmp_path, corpus_dir, "--repair-from", served).check(0)
    repaired = [line for line in result.output.splitlines() if line.startswith("repaired raw/")]
    assert len(repaired) == len(good) and all(f"from {served}" in line for line in repaired)
    for path, data in good.items():
        assert (archive / path).read_bytes() == data


@pytest.mark.slow
def test_a_served_archive_serves_only_listed_intact_files(peer, served, peer_signer):
    checkpoint = layout.published_checkpoint(peer_signer.key_id)
    assert status_of(f"{served}/{checkpoint}") == 200
    assert status_of(f"{served}/{layout.key_document(peer_signer.key_id)}") == 200
    raws = sorted((peer / layout.RAW).rglob("*.json"))
    assert status_of(f"{served}/{raws[0].relative_to(peer)}") == 200
    raws[1].write_bytes(raws[1].read_bytes()[:-1])  # damaged at the peer: never handed on
    assert status_of(f"{served}/{raws[1].relative_to(peer)}") == 404
    (peer / layout.RAW / "00" / "extra.json").parent.mkdir(parents=True, exist_ok=True)
    (peer / layout.RAW / "00" / "extra.json").write_text(json.dumps({}))  # in the folder, listed by no manifest
    for path in [f"{layout.RAW}/00/extra.json", "manifests/", "log/../keys", "tables/records"]:
        assert status_of(f"{served}/{path}") == 404, path
