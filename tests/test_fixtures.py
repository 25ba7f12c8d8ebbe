"""The bundled real bundles are the registry's exact bytes: the ground truth every
other test leans on, so a changed byte here must fail loudly."""

import hashlib

from pith_archiver import FIXTURES
from tests.plugins.core import SHARED_REAL

# sha256 of the files as fetched from the public resolver (shared/fixtures/real/)
AS_FETCHED = {
    "6VARSBRX6E3HDBTBZP3WZOXG6B.bundle.json": "31595ef6371ba02ded51234832553380deca8d8756fdaf90124f0f644e5848e4",
    "RLLQL6357CWNZYHNBMCYD3UK5B.bundle.json": "e8145ba5668d39c7b16310ac9b9ec0d96fe1d0922923b089de236dcf8d0d0cff",
    "RLLQL6357CWNZYHNBMCYD3UK5B.page.txt": "f04293b9a0076815696f04d8c538cc91fb2861f133583fa2b5cd7ec9ea2c6066",
    "X4GAYROCRDRF6GSWIGUEQCY32W.bundle.json": "78d028133c3bbca594d505558efd1ba0ac575b5c725b3353bb4284ae4c1698fc",
}


def test_bundled_fixtures_are_the_fetched_bytes():
    found = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in FIXTURES.iterdir() if p.is_file()}
    assert found == AS_FETCHED


def test_bundled_fixtures_match_the_shared_ground_truth_when_beside_the_checkout():
    """CI and developers have shared/ beside the clone; a copy elsewhere still has the digests above."""
    shared = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in SHARED_REAL.glob("*") if p.is_file()}
    assert not shared or shared == AS_FETCHED
