"""``sync`` against peers that squat another's log origin, cannot be
reached, or hold a huge file where a bundle should be; and what a sync's summary says
(archived new against already held, why each object was refused, its closing line)."""

import hashlib
import json
import os
import socket
import subprocess
import sys
from urllib.parse import quote

import pytest

from pith.checkpoint import log_origin
from pith.signing import Signer
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.syncing.peers import HttpPeer, PeerUnreachable
from storage.writing.writer import ArchiveWriter
from tests.plugins.archives import corpus_raws, rebuilt, tampered, write_run
from tests.plugins.cli import isolated_home, signing_key
from tests.test_peer_sync import audit, raw_objects, sync

SQUATTER_SEED = bytes(range(3, 35))
HUGE = 400 << 20  # a sparse file where a bundle should be: what a folder peer reads must stay bounded


def closing_line(output: str) -> str:
    return [line for line in output.splitlines() if " (exit " in line][-1]


@pytest.mark.parametrize("first", ["owner", "squatter"])
def test_a_peer_squatting_anothers_log_origin_neither_blocks_it_nor_is_blocked(
    tmp_path, corpus_dir, corpus_keyring, peer_signer, first
):
    """Two pinned peers whose logs share one origin, under two keys: the squatter's
    smaller log is never judged a rollback of the owner's, nor its other history a
    fork; each log resumes where it stopped, in either order."""
    raws = list(corpus_raws(corpus_dir).values())
    squatter = Signer.from_seed("peer-key-squat", SQUATTER_SEED)
    origin = log_origin(peer_signer.key_id)
    peers = {"owner": (tmp_path / "owner", peer_signer), "squatter": (tmp_path / "squatter", squatter)}
    write_run(LocalStore(peers["owner"][0]), peer_signer, corpus_keyring, raws[:20])
    write_run(LocalStore(peers["squatter"][0]), squatter, corpus_keyring, raws[20:25], log_origin=origin)
    order = [first, "squatter" if first == "owner" else "owner"]
    for name in order:
        folder, signer = peers[name]
        (tmp_path / "peer-key.json").write_text(json.dumps(signer.pinned().document()))
        result = sync(tmp_path, folder, corpus_dir, signer).check(0)
        assert f"{origin} (key {signer.key_id}): entries 0 to" in result.output
    assert len(raw_objects(tmp_path / "copy")) == 25
    for signer in (peer_signer, squatter):  # kept apart, each under its key
        assert (tmp_path / "copy" / "peers" / quote(origin, safe="") / signer.key_id / "checkpoints").is_dir()
    # a week later both grew: each resumes from its own checkpoint
    write_run(LocalStore(peers["owner"][0]), peer_signer, corpus_keyring, raws[25:28])
    write_run(LocalStore(peers["squatter"][0]), squatter, corpus_keyring, raws[28:30])
    for name, (size, new) in zip(order, [(20, 3), (5, 2)] if first == "owner" else [(5, 2), (20, 3)], strict=True):
        folder, signer = peers[name]
        (tmp_path / "peer-key.json").write_text(json.dumps(signer.pinned().document()))
        result = sync(tmp_path, folder, corpus_dir, signer).check(0)
        assert f"entries {size} to {size + new}, {new} archived new, 0 already held" in result.output
    assert len(raw_objects(tmp_path / "copy")) == 30
    audit(tmp_path, corpus_dir).check(0)


def test_a_sync_kept_per_origin_by_an_older_version_resumes_under_the_key_that_signed_it(
    tmp_path, peer, corpus_dir, peer_signer
):
    """An archive whose manifest lists a peer's checkpoint as ``peers/<origin>/checkpoints/<size>``
    (before syncs were kept per origin and key): the next sync resumes from it, one read."""
    note = (peer / layout.published_checkpoint(peer_signer.key_id)).read_bytes()
    own = Signer.from_seed("own-key", bytes(range(5, 37)))
    own.save(tmp_path / "own-key.json")
    writer = ArchiveWriter(LocalStore(tmp_path / "copy"), own, worker="old").open()
    size = note.split(b"\n")[1].decode()
    writer.add_object(f"peers/{quote(log_origin(peer_signer.key_id), safe='')}/checkpoints/{size}", note)
    writer.commit(stats={}, params={})
    result = sync(tmp_path, peer, corpus_dir, peer_signer).check(0)
    assert "1 file read" in result.output and f"entries {size} to {size}, 0 archived new" in result.output


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_peer_fails_with_one_line_and_commits_nothing(tmp_path, corpus_dir, peer_signer):
    url = f"http://127.0.0.1:{free_port()}/archive"
    result = sync(tmp_path, url, corpus_dir, peer_signer)
    result.check(4)
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"Error: peer {url}: unreachable: {url}/log/") and "refused" in line, line
    assert not (tmp_path / "copy" / "manifests").exists()


@pytest.mark.slow
def test_a_peer_that_never_answers_is_unreachable_at_its_deadline(hostile_receiver):
    with pytest.raises(PeerUnreachable, match="no answer within 1.0 s"):
        HttpPeer(hostile_receiver("silent").url, deadline=1.0).read("log/k/checkpoint")


# Linux keeps a process's peak RSS across exec, so a command started straight from this
# test's process (large late in the suite) would report this process's peak as its own: it
# is started from a small Python of its own, whose child's peak is the command's alone.
MEASURED = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
output = child.stdout.read()
_, status, usage = os.wait4(child.pid, 0)
sys.stdout.buffer.write(output + b"\\n%d %d\\n" % (os.waitstatus_to_exitcode(status), usage.ru_maxrss))
"""


def sync_measured(tmp_path, source, corpus_dir) -> tuple[int, str, int]:
    """The sync in a child of its own: its exit status, its output and its peak RSS
    (its own and its checking processes', the largest of them) in MiB."""
    args = [
        "sync", source, "--out", tmp_path / "copy", "--keyring", corpus_dir / "keyring.json",
        "--keyring", tmp_path / "peer-key.json", "--no-default-keys",
        "--signing-key", signing_key(tmp_path / "own-key.json"),
    ]  # fmt: skip
    measured = subprocess.run(
        [sys.executable, "-c", MEASURED, sys.executable, "-m", "pith_archiver", *map(str, args)],
        capture_output=True,
        cwd=tmp_path,
        env={**os.environ, **isolated_home(tmp_path)},
        check=True,
    )
    output, _, last = measured.stdout.decode().rstrip("\n").rpartition("\n")
    status, peak = map(int, last.split())
    return status, output, peak // 1024


@pytest.mark.slow
def test_a_huge_file_where_a_bundle_should_be_is_refused_in_bounded_memory(tmp_path, peer, corpus_dir, peer_signer):
    (tmp_path / "peer-key.json").write_text(json.dumps(peer_signer.pinned().document()))
    victim = sorted((peer / layout.RAW).rglob("*.json"))[0]
    with victim.open("r+b") as handle:
        handle.truncate(HUGE)  # sparse: its bundle, then zeros
    status, output, peak = sync_measured(tmp_path, peer, corpus_dir)
    assert status == 1, output
    assert "0 quarantined, 1 too large (not kept)" in output
    assert closing_line(output).endswith("1 object larger than a bundle may be, refused unread past 8388608 bytes")
    assert peak < 300, f"{peak} MiB"  # the file is 400
    assert len(raw_objects(tmp_path / "copy")) == len(corpus_raws(corpus_dir)) - 1
    kept = [p for p in (tmp_path / "copy").rglob("*") if p.is_file() and p.stat().st_size > 16 << 20]
    assert not kept, kept  # neither in quarantine/ nor anywhere else
    assert not (tmp_path / "copy" / layout.QUARANTINE).exists()


def test_a_sync_of_versions_already_held_says_so_and_names_why_objects_were_refused(
    tmp_path, peer, corpus_dir, corpus_keyring, peer_signer
):
    raws = list(corpus_raws(corpus_dir).values())
    first = sync(tmp_path, peer, corpus_dir, peer_signer).check(0)
    assert closing_line(first.output) == f"ok (exit 0): {len(raws)} archived new, 0 already held, from 1 log"
    # another peer holding the same versions, one flipped, and one new
    other = Signer.from_seed("peer-key-2", bytes(range(4, 36)))
    folder = tmp_path / "other"
    write_run(LocalStore(folder), other, corpus_keyring, [*raws, rebuilt(raws[0], "2026-07-01T00:00:00Z")])
    victim = folder / layout.raw_bundle(hashlib.sha256(raws[1]).hexdigest())
    victim.write_bytes(tampered(victim.read_bytes()))
    (tmp_path / "peer-key.json").write_text(json.dumps(other.pinned().document()))
    result = sync(tmp_path, folder, corpus_dir, other)
    result.check(1)
    held = len(raws) + 1 - 1 - 1  # every version but the new one and the flipped one
    assert f"1 archived new, {held} already held, 1 quarantined (attestation_mismatch 1)" in result.output
    assert closing_line(result.output) == (
        f"rejected (exit 1): 1 archived new, {held} already held, from 1 log; "
        "1 quarantined (attestation_mismatch 1), kept in quarantine/"
    )
