"""``sync``: an archive copied from a peer through the peer's signed log,
from a folder, over HTTP from a static server on loopback, and from a bucket (moto);
then incrementally; and from hostile peers (a flipped object, a lying tile, a
rollback, a fork)."""

import functools
import hashlib
import http.server
import json
import shutil
import time
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from pith.checkpoint import log_origin
from pith.keyring import Keyring
from pith.signed_note import COSIGNATURE_KEY, NOTE_KEY, VerifierKey, cosignature_line
from pith.signing import Signer
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.archive.manifest import committed_manifests
from storage.archive.s3_store import S3Store
from storage.syncing.peers import HttpPeer, PeerError, StorePeer
from tests.plugins.archives import corpus_raws, rebuilt, tampered, write_run
from tests.plugins.cli import run_cli, signing_key
from tests.plugins.listener import handler_server


def sync(tmp_path, source, corpus_dir, peer_signer, *more, **run):
    """``sync SOURCE --out tmp/copy``, trusting the corpus and the peer's key
    (``run``: how ``run_cli`` runs it)."""
    key_doc = tmp_path / "peer-key.json"
    if not key_doc.exists():
        key_doc.write_text(json.dumps(peer_signer.pinned().document()))
    return run_cli(
        "sync",
        source,
        "--out",
        tmp_path / "copy",
        "--keyring",
        corpus_dir / "keyring.json",
        "--keyring",
        key_doc,
        "--no-default-keys",
        "--signing-key",
        signing_key(tmp_path / "own-key.json"),
        *more,
        **run,
    )


def raw_objects(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted((folder / layout.RAW).rglob("*.json"))}


def audit(tmp_path, corpus_dir):
    return run_cli(
        "audit",
        tmp_path / "copy",
        "--keyring",
        corpus_dir / "keyring.json",
        "--no-default-keys",
        "--signing-key",
        signing_key(tmp_path / "own-key.json"),
    )


def test_a_folder_peer_is_copied_whole_byte_for_byte_and_audits_clean(tmp_path, peer, corpus_dir, peer_signer):
    result = sync(tmp_path, peer, corpus_dir, peer_signer).check(0)
    copied = raw_objects(tmp_path / "copy")
    assert copied == raw_objects(peer) and len(copied) == len(corpus_raws(corpus_dir))
    assert "0 quarantined" in result.output
    audit(tmp_path, corpus_dir).check(0)
    own = Keyring([Signer.load(tmp_path / "own-key.json").pinned()])
    (manifest,) = committed_manifests(LocalStore(tmp_path / "copy"), own)
    (log,) = manifest["crawl"]["from_archive"]["logs"]
    assert log["entries"] == [0, len(copied)] and log["key_id"] == peer_signer.key_id
    assert (tmp_path / "copy" / log["checkpoint"]).read_bytes() == (
        peer / layout.published_checkpoint(peer_signer.key_id)
    ).read_bytes()


def test_a_sync_crawls_nothing_and_starts_neither_scrapy_nor_twisted(tmp_path, peer, corpus_dir, peer_signer):
    """A sync verifies and writes: the crawl's machinery (~0.4 s of imports) is not started."""
    result = sync(tmp_path, peer, corpus_dir, peer_signer, home=tmp_path, env={"PYTHONPROFILEIMPORTTIME": "1"})
    result.check(0)
    imported = {
        line.rpartition("|")[2].strip() for line in result.stderr.splitlines() if line.startswith("import time:")
    }
    assert {"pith_archiver.peers.sync", "pyarrow"} <= imported  # the imports are read
    assert not {"scrapy", "twisted"} & imported


def test_a_second_sync_reads_only_what_changed(tmp_path, peer, corpus_dir, corpus_keyring, peer_signer, monkeypatch):
    sync(tmp_path, peer, corpus_dir, peer_signer).check(0)
    changed = [rebuilt(raw, "2026-07-01T00:00:00Z") for raw in list(corpus_raws(corpus_dir).values())[:2]]
    write_run(LocalStore(peer), peer_signer, corpus_keyring, changed)
    reads = []
    original = StorePeer.copy

    def counted(self, path, *args):
        reads.append(path)
        return original(self, path, *args)

    monkeypatch.setattr(StorePeer, "copy", counted)
    result = sync(tmp_path, peer, corpus_dir, peer_signer).check(0)
    assert len(reads) <= 1.1 * len(changed) + 40, reads
    assert f"{len(reads)} files read" in result.output
    copied = raw_objects(tmp_path / "copy")
    assert all(layout.raw_bundle(hashlib.sha256(raw).hexdigest()) in copied for raw in changed)
    assert copied == raw_objects(peer)
    audit(tmp_path, corpus_dir).check(0)


NEW = "`pith-archiver sync PEER`"


def test_crawl_from_archive_still_syncs_for_one_release_with_a_notice(tmp_path, peer, corpus_dir, peer_signer):
    """The old spelling works, naming the new command in one line on stderr."""
    key_doc = tmp_path / "peer-key.json"
    key_doc.write_text(json.dumps(peer_signer.pinned().document()))
    result = run_cli(
        "crawl", "--from-archive", peer, "--out", tmp_path / "copy", "--keyring", corpus_dir / "keyring.json",
        "--keyring", key_doc, "--no-default-keys", "--signing-key", signing_key(tmp_path / "own-key.json"),
    ).check(0)  # fmt: skip
    [notice] = [line for line in result.stderr.splitlines() if line.startswith("notice:")]
    assert NEW in notice
    assert raw_objects(tmp_path / "copy") == raw_objects(peer)


@pytest.mark.parametrize("crawl_only", [["pith:2026:x"], ["--max-records", "5"], ["--recheck-after", "3"]])
def test_crawl_from_archive_refuses_the_crawl_options_a_sync_does_not_take(tmp_path, peer, crawl_only):
    result = run_cli("crawl", "--from-archive", peer, "--out", tmp_path / "copy", *crawl_only)
    assert result.returncode == 2 and not (tmp_path / "copy").exists()
    named = "SEEDS" if crawl_only[0].startswith("pith:") else crawl_only[0]
    [line] = result.stderr.splitlines()
    assert line == f"Error: --from-archive copies a peer instead of crawling: not with {named} (it is now {NEW})"


def test_sync_offers_only_the_options_a_copy_uses(tmp_path, peer):
    """`crawl --help` no longer lists --from-archive; `sync` takes no crawl option."""
    assert "--from-archive" not in run_cli("crawl", "--help").check(0).stdout
    result = run_cli("sync", peer, "--out", tmp_path / "copy", "--max-records", "5")
    assert result.returncode == 2 and "No such option '--max-records'" in result.stderr


def test_a_sync_without_the_peers_key_pinned_is_a_usage_error(tmp_path, peer, corpus_dir):
    result = run_cli("sync", peer, "--out", tmp_path / "copy", "--keyring", corpus_dir / "keyring.json")
    assert result.returncode == 2 and "pin the peer's archive key" in result.stderr


def test_nothing_new_reads_the_checkpoint_and_archives_nothing(tmp_path, peer, corpus_dir, peer_signer):
    sync(tmp_path, peer, corpus_dir, peer_signer).check(0)
    result = sync(tmp_path, peer, corpus_dir, peer_signer).check(0)
    assert "1 file read" in result.output


def test_a_flipped_object_is_quarantined_and_everything_else_archived(tmp_path, peer, corpus_dir, peer_signer):
    victim = sorted((peer / layout.RAW).rglob("*.json"))[0]
    victim.write_bytes(tampered(victim.read_bytes()))
    result = sync(tmp_path, peer, corpus_dir, peer_signer)
    result.check(1)
    assert "1 quarantined" in result.output
    copied = raw_objects(tmp_path / "copy")
    assert str(victim.relative_to(peer)) not in copied
    assert len(copied) == len(corpus_raws(corpus_dir)) - 1
    assert list((tmp_path / "copy" / layout.QUARANTINE).rglob("*.json"))


def test_an_archive_holding_other_bytes_at_an_objects_address_fails_the_sync_by_name(
    tmp_path, peer, corpus_dir, peer_signer
):
    """Other bytes already under a copied object's content address in the archive (an
    edited raw object) are never taken for the peer's object: the sync ends with exit 4,
    one line naming the object, and commits nothing."""
    victim = sorted((peer / layout.RAW).rglob("*.json"))[0]
    path = str(victim.relative_to(peer))
    LocalStore(tmp_path / "copy").put_bytes(path, victim.read_bytes().replace(b"{", b" {", 1))
    result = sync(tmp_path, peer, corpus_dir, peer_signer)
    result.check(4)
    assert "Traceback" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if path in line]
    assert line.startswith("Error: --out: ") and "already exists" in line, result.stderr[-3000:]
    assert not (tmp_path / "copy" / "manifests").exists()


def test_a_lying_entry_bundle_fails_that_peer_with_a_named_reason(tmp_path, peer, corpus_dir, peer_signer):
    (bundle,) = [p for p in (peer / layout.log_root(peer_signer.key_id) / "tile" / "entries").rglob("*") if p.is_file()]
    entries = bundle.read_bytes()
    bundle.write_bytes(entries[:-5] + bytes(5))
    result = sync(tmp_path, peer, corpus_dir, peer_signer)
    result.check(1)
    assert "sync failed" in result.output and (
        "tile_mismatch" in result.output or "attestation_invalid" in result.output
    )
    assert raw_objects(tmp_path / "copy") == {}


def test_a_forged_checkpoint_fails_with_checkpoint_invalid(tmp_path, peer, corpus_dir, peer_signer):
    published = peer / layout.published_checkpoint(peer_signer.key_id)
    lines = published.read_text().split("\n")
    lines[1] = str(int(lines[1]) + 1)
    published.write_text("\n".join(lines))
    result = sync(tmp_path, peer, corpus_dir, peer_signer)
    assert result.returncode == 1 and "checkpoint_invalid" in result.output
    assert raw_objects(tmp_path / "copy") == {}


def test_a_peer_restored_from_an_older_copy_exits_1_with_evidence(
    tmp_path, peer, corpus_dir, corpus_keyring, peer_signer
):
    older = tmp_path / "older"
    shutil.copytree(peer, older)
    write_run(
        LocalStore(peer),
        peer_signer,
        corpus_keyring,
        [rebuilt(next(iter(corpus_raws(corpus_dir).values())), "2026-07-01T00:00:00Z")],
    )
    sync(tmp_path, peer, corpus_dir, peer_signer).check(0)
    before = raw_objects(tmp_path / "copy")
    result = sync(tmp_path, older, corpus_dir, peer_signer)
    result.check(1)
    assert "log_rolled_back" in result.output
    evidence = list((tmp_path / "copy" / "peers").rglob("evidence/*"))
    assert len(evidence) == 2
    assert raw_objects(tmp_path / "copy") == before
    audit(tmp_path, corpus_dir).check(0)


def test_a_forked_peer_log_exits_1(tmp_path, corpus_dir, corpus_keyring, peer_signer):
    raws = list(corpus_raws(corpus_dir).values())
    first, other = tmp_path / "peer", tmp_path / "fork"
    write_run(LocalStore(first), peer_signer, corpus_keyring, raws[:10])
    write_run(LocalStore(other), peer_signer, corpus_keyring, raws[10:30])
    sync(tmp_path, first, corpus_dir, peer_signer).check(0)
    result = sync(tmp_path, other, corpus_dir, peer_signer)
    result.check(1)
    assert "log_forked" in result.output
    assert len(raw_objects(tmp_path / "copy")) == 10


def warc_responses(archive: Path) -> dict[str, bytes]:
    """Every response record of the archive's WARC files: its target URL and payload."""
    found = {}
    for path in sorted((archive / layout.WARC).rglob("*.warc.gz")):
        with path.open("rb") as handle:
            for record in ArchiveIterator(handle):
                if record.rec_type == "response":
                    found[record.rec_headers.get_header("WARC-Target-URI")] = record.content_stream().read()
    return found


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.mark.slow
def test_a_peer_served_over_http_is_copied_then_synced_incrementally(
    tmp_path, peer, corpus_dir, corpus_keyring, peer_signer
):
    with handler_server(functools.partial(QuietHandler, directory=str(peer))) as url:
        sync(tmp_path, url, corpus_dir, peer_signer).check(0)
        assert raw_objects(tmp_path / "copy") == raw_objects(peer)
        recorded = warc_responses(tmp_path / "copy")
        checkpoint = f"{url}/{layout.published_checkpoint(peer_signer.key_id)}"
        assert recorded[checkpoint] == (peer / layout.published_checkpoint(peer_signer.key_id)).read_bytes()
        assert sum(target.startswith(f"{url}/{layout.RAW}/") for target in recorded) == len(corpus_raws(corpus_dir))
        changed = [rebuilt(raw, "2026-07-01T00:00:00Z") for raw in list(corpus_raws(corpus_dir).values())[:3]]
        write_run(LocalStore(peer), peer_signer, corpus_keyring, changed)
        result = sync(tmp_path, url, corpus_dir, peer_signer).check(0)
        reads = int(result.output.split(" files read")[0].rsplit(" ", 1)[1])
        assert reads <= 1.1 * len(changed) + 40
        assert raw_objects(tmp_path / "copy") == raw_objects(peer)
    audit(tmp_path, corpus_dir).check(0)


@pytest.mark.slow
def test_an_http_peer_that_trickles_is_cut_at_the_deadline(hostile_receiver):
    url = hostile_receiver("trickle", every=0.2).url
    started = time.monotonic()
    with pytest.raises(PeerError, match="no answer within 1.0 s"):
        HttpPeer(url, deadline=1.0).read("log/k/checkpoint")
    assert time.monotonic() - started < 2.0


def test_an_object_missing_at_the_peer_is_counted_against_it_and_read_again_next_time(
    tmp_path, peer, corpus_dir, peer_signer
):
    victim = sorted((peer / layout.RAW).rglob("*.json"))[-1]
    kept = victim.read_bytes()
    victim.unlink()
    result = sync(tmp_path, peer, corpus_dir, peer_signer)
    result.check(1)
    assert "1 missing at the peer" in result.output
    assert len(raw_objects(tmp_path / "copy")) == len(corpus_raws(corpus_dir)) - 1
    assert not list((tmp_path / "copy" / "peers").rglob("checkpoints/*"))  # not synced to it: tried again
    victim.write_bytes(kept)
    sync(tmp_path, peer, corpus_dir, peer_signer).check(0)
    assert raw_objects(tmp_path / "copy") == raw_objects(peer)
    audit(tmp_path, corpus_dir).check(0)


def test_a_bundle_that_does_not_verify_here_is_quarantined(tmp_path, peer, corpus_dir, peer_signer):
    """The peer trusts the registry key; this archive pins only the corpus key: the
    peer's copies of the real registry bundles are quarantined here, the rest archived."""
    keyring = json.loads((corpus_dir / "keyring.json").read_text())
    keyring["keys"] = [key for key in keyring["keys"] if key["key_id"].startswith("pith-test-corpus")]
    only_corpus = tmp_path / "only-corpus.json"
    only_corpus.write_text(json.dumps(keyring))
    key_doc = tmp_path / "peer-key.json"
    key_doc.write_text(json.dumps(peer_signer.pinned().document()))
    result = run_cli(
        "sync", peer, "--out", tmp_path / "copy", "--keyring", only_corpus,
        "--keyring", key_doc, "--no-default-keys", "--signing-key", signing_key(tmp_path / "own-key.json"),
    )  # fmt: skip
    result.check(1)
    real = len(corpus_raws(corpus_dir)) - len(raw_objects(tmp_path / "copy"))
    assert real == 3 and f"{real} quarantined" in result.output


def test_a_witness_policy_requires_the_peers_cosignatures(tmp_path, peer, corpus_dir, peer_signer):
    witness = Signer.from_seed("w1", bytes(range(2, 34)))
    origin = log_origin(peer_signer.key_id)
    policy = tmp_path / "policy"
    cosigner = VerifierKey("witness.test/w1", COSIGNATURE_KEY, witness.public_raw)
    log_key = VerifierKey(origin, NOTE_KEY, peer_signer.public_raw)
    policy.write_text(f"log {log_key}\nwitness w1 {cosigner} https://witness.test/\nquorum w1\n")
    result = sync(tmp_path, peer, corpus_dir, peer_signer, "--witness-policy", policy)
    assert result.returncode == 1 and "quorum_unmet" in result.output
    published = peer / layout.published_checkpoint(peer_signer.key_id)
    note = published.read_text()
    text = note.split("\n\n", 1)[0] + "\n"
    published.write_text(note + cosignature_line(witness.seed, "witness.test/w1", text, int(time.time())))
    sync(tmp_path, peer, corpus_dir, peer_signer, "--witness-policy", policy).check(0)
    assert len(raw_objects(tmp_path / "copy")) == len(corpus_raws(corpus_dir))


@pytest.mark.slow
def test_a_peer_in_a_bucket_is_copied(tmp_path, s3_endpoint, s3_bucket, corpus_dir, corpus_keyring, peer_signer):
    raws = list(corpus_raws(corpus_dir).values())
    write_run(S3Store(s3_bucket, "peer", endpoint_url=s3_endpoint), peer_signer, corpus_keyring, raws)
    sync(tmp_path, f"s3://{s3_bucket}/peer", corpus_dir, peer_signer, "--s3-endpoint-url", s3_endpoint).check(0)
    assert {hashlib.sha256(raw).hexdigest() for raw in raws} == {
        Path(path).stem for path in raw_objects(tmp_path / "copy")
    }
