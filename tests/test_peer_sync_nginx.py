"""``sync http://...`` from a peer archive served by nginx, as a peer
serves one: copied whole, byte for byte; then, a week later with 1% of its records
re-archived at the peer, synced again reading only what changed (counted in nginx's
own access log, not by the sync)."""

import hashlib
import json

import pytest

from pith.keyring import Keyring
from pith.signing import Signer
from pith.verify import verify_bundle
from pith_testkit.corpus import generate_corpus
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.serving.source import KEYRING_NAME
from tests.plugins.archives import corpus_raws, extended, write_run
from tests.plugins.mirror import SMALL_CORPUS_SEED
from tests.plugins.peers import PEER_SEED
from tests.plugins.tables import read_rows
from tests.test_peer_sync import audit, raw_objects, sync

RECORDS = 500  # minted, plus the 3 real bundles: 1% is 5 records
WEEK_LATER = "2026-07-08T00:00:00Z"


@pytest.fixture(scope="module")
def week_corpus(tmp_path_factory):
    """A corpus big enough for 1% to be whole records (the small corpus's key: ``extended`` signs with it)."""
    out = tmp_path_factory.mktemp("week") / "corpus"
    generate_corpus(out, RECORDS, SMALL_CORPUS_SEED)
    return out


def read_paths(log, since: int) -> list[str]:
    """The paths of the requests nginx logged after its first ``since`` lines, each answered 200."""
    lines = log.read_text().splitlines()[since:]
    assert all(line.startswith("GET ") and line.endswith(" 200") for line in lines), lines
    return [line.split(" ")[1] for line in lines]


def current_versions(archive) -> dict[str, str]:
    """Each record's current version, by the rule docs/ARCHIVE.md gives readers."""
    best: dict[str, dict] = {}
    for row in read_rows(archive, "records"):
        if row["accepted_as_current"] is not False:
            known = best.get(row["pith_number"])
            if known is None or (row["built_at"], row["fetched_at"]) > (known["built_at"], known["fetched_at"]):
                best[row["pith_number"]] = row
    return {number: row["bundle_sha256"] for number, row in best.items()}


@pytest.mark.slow
def test_a_peer_served_by_nginx_is_copied_whole_then_a_week_later_reads_only_what_changed(tmp_path, nginx, week_corpus):
    signer = Signer.from_seed("peer-key-1", PEER_SEED)
    keyring = Keyring.build([week_corpus / KEYRING_NAME], default_keys=False)
    raws = list(corpus_raws(week_corpus).values())
    peer, log = tmp_path / "peer", tmp_path / "access.log"
    write_run(LocalStore(peer), signer, keyring, raws)
    url = nginx(peer, access_log=log)

    first = sync(tmp_path, url, week_corpus, signer).check(0)
    copied = raw_objects(tmp_path / "copy")
    assert copied == raw_objects(peer) and len(copied) == len(raws)
    assert f"{len(read_paths(log, 0))} files read" in first.output
    audit(tmp_path, week_corpus).check(0)

    changed = [extended(raw, WEEK_LATER) for raw in raws[: len(raws) // 100]]  # the peer re-crawled: 1% changed
    write_run(LocalStore(peer), signer, keyring, changed)
    before = len(log.read_text().splitlines())
    second = sync(tmp_path, url, week_corpus, signer).check(0)
    read = read_paths(log, before)
    assert len(read) <= 1.1 * len(changed) + 40, read
    assert f"{len(read)} files read" in second.output
    new_raws = {f"/{layout.raw_bundle(hashlib.sha256(raw).hexdigest())}" for raw in changed}
    assert new_raws <= set(read)
    assert sum(path.startswith(f"/{layout.RAW}/") for path in read) == len(changed)  # no object read twice

    assert raw_objects(tmp_path / "copy") == raw_objects(peer)
    current = current_versions(tmp_path / "copy")
    for raw in changed:
        verdict = verify_bundle(raw, keyring)
        assert current[verdict.pith_number] == verdict.bundle_sha256
    assert len(current) == len(raws)
    own = json.loads((tmp_path / "copy" / second.output.split("committed ")[1].split()[0]).read_text())
    (synced,) = own["crawl"]["from_archive"]["logs"]
    assert synced["entries"] == [len(raws), len(raws) + len(changed)] and synced["archived"] == len(changed)
    audit(tmp_path, week_corpus).check(0)
