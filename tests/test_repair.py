"""``audit ARCHIVE --repair-from PEER``: each kind of damage (a flipped byte, a truncated
object, a deleted one, one replaced by another valid bundle, a table file damaged)
repaired from a peer whose copy has the listed hash; and hostile peers (a bad copy, a
huge copy, a dripping or silent server, a log under an unpinned key, an unreachable
peer), none of which leaves the archive worse than it was."""

import hashlib
import json
import shutil
from pathlib import Path

import bagit
import duckdb
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from pith.keyring import Keyring
from pith.reasons import Finding
from pith.signing import Signer
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.archive.reader import CommittedArchive
from storage.archive.s3_store import S3Store
from storage.audit import Audit
from storage.repair import Repair
from storage.syncing.peers import HttpPeer, StorePeer
from storage.writing.table_writer import RollPolicy
from tests.plugins.archives import corpus_raws, write_run
from tests.plugins.cli import run_cli
from tests.plugins.crawling import run_cli_crawl

OWN_SEED = bytes(range(7, 39))


@pytest.fixture
def own(tmp_path) -> Signer:
    signer = Signer.from_seed("own-key", OWN_SEED)
    signer.save(tmp_path / "own-key.json")
    return signer


@pytest.fixture
def archive(tmp_path, corpus_dir, corpus_keyring, own) -> Path:
    """This archive: the corpus in one run, signed by its own key."""
    folder = tmp_path / "archive"
    write_run(LocalStore(folder), own, corpus_keyring, list(corpus_raws(corpus_dir).values()))
    return folder


def audit(tmp_path, corpus_dir, *more):
    """``audit tmp/archive`` under the corpus keys, this archive's key and the peer's."""
    key_doc = tmp_path / "peer-key.json"
    if not key_doc.exists():
        key_doc.write_text(json.dumps(Signer.from_seed("peer-key-1", bytes(range(1, 33))).pinned().document()))
    return run_cli(
        "audit", tmp_path / "archive", "--keyring", corpus_dir / "keyring.json", "--keyring", key_doc,
        "--no-default-keys", "--signing-key", tmp_path / "own-key.json", *more,
    )  # fmt: skip


def raw_paths(folder: Path) -> list[Path]:
    return sorted((folder / layout.RAW).rglob("*.json"))


def contents(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def damage(archive: Path) -> dict[str, bytes]:
    """A flipped byte, a truncated object, a deleted one and one replaced by another
    valid bundle; returns each path's good bytes."""
    victims = raw_paths(archive)[:4]
    good = {str(p.relative_to(archive)): p.read_bytes() for p in victims}
    flipped, truncated, deleted, replaced = victims
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0x01
    flipped.write_bytes(bytes(data))
    truncated.write_bytes(truncated.read_bytes()[:100])
    deleted.unlink()
    replaced.write_bytes(raw_paths(archive)[-1].read_bytes())
    return good


def test_each_kind_of_damage_to_raw_objects_is_repaired_from_a_peer(tmp_path, archive, peer, corpus_dir, own):
    good = damage(archive)
    audit(tmp_path, corpus_dir).check(1)
    result = audit(tmp_path, corpus_dir, "--repair-from", peer).check(0)
    assert result.output.count("repaired raw/bundles/") == 4
    assert "(missing) from" in result.output and "(hash_mismatch) from" in result.output
    assert "(size_mismatch) from" in result.output
    after = result.output.split("audit after the repair:")[1].strip().splitlines()
    assert after[-2].startswith("clean: 2 manifests, ")  # this archive's run, and the repair's
    assert after[-1] == "ok (exit 0): 4 repaired; the archive audits clean"
    for path, data in good.items():
        assert (archive / path).read_bytes() == data
    moved = sorted((archive / layout.QUARANTINE / "damaged").rglob("*.json"))
    assert len(moved) == 3  # the deleted one left no damaged copy
    # a plain audit afterwards: clean, with the repairs in the history
    later = audit(tmp_path, corpus_dir).check(0)
    (history,) = [line for line in later.output.splitlines() if line.startswith("repaired by ")]
    (tmp_path / "own-pinned.json").write_text(json.dumps(own.pinned().document()))
    keys = ["--keyring", corpus_dir / "keyring.json", "--keyring", tmp_path / "own-pinned.json", "--no-default-keys"]
    verified = run_cli("verify", archive, *keys)
    verified.check(0)  # the repair feed is no attestation feed: skipped, as audit checks it
    assert "4 objects (hash_mismatch 1, missing 1, size_mismatch 2)" in history and peer.as_uri() in history


def test_a_damaged_table_file_is_repaired_from_a_copy_of_this_archive(tmp_path, archive, corpus_dir):
    replica = tmp_path / "replica"
    shutil.copytree(archive, replica)
    table = sorted((archive / layout.TABLES / "records").rglob("*.parquet"))[0]
    good = table.read_bytes()
    table.write_bytes(good[:-40] + bytes(40))
    audit(tmp_path, corpus_dir, "--repair-from", replica).check(0)
    assert table.read_bytes() == good


def test_json_says_what_was_repaired_a_line_each(tmp_path, archive, peer, corpus_dir):
    good = damage(archive)
    result = audit(tmp_path, corpus_dir, "--repair-from", peer, "--json").check(0)
    lines = [json.loads(line) for line in result.stdout.splitlines()]  # every line: JSON
    assert {line["repaired"] for line in lines if "repaired" in line} == set(good)
    assert lines[-1]["summary"]["clean"] is True


def test_a_bad_copy_is_refused_by_name_and_the_next_peer_repairs(tmp_path, archive, peer, corpus_dir):
    bad = tmp_path / "bad"
    shutil.copytree(peer, bad)
    good = damage(archive)
    for path in good:
        (bad / path).write_bytes(b"{}")  # the right place, the wrong bytes
    result = audit(tmp_path, corpus_dir, "--repair-from", bad, "--repair-from", peer).check(0)
    refused = [line for line in result.output.splitlines() if line.startswith(f"refused {bad.as_uri()}: ")]
    assert len(refused) == 4 and all("its copy has sha256 " + hashlib.sha256(b"{}").hexdigest() in r for r in refused)
    repaired = [line for line in result.output.splitlines() if line.startswith("repaired raw/")]
    assert len(repaired) == 4 and all(f"from {peer.as_uri()}" in line for line in repaired)


@pytest.mark.slow
def test_a_huge_copy_is_refused_past_the_listed_size(tmp_path, archive, peer, corpus_dir):
    huge = tmp_path / "huge"
    shutil.copytree(peer, huge)
    victim = raw_paths(archive)[0]
    rel = str(victim.relative_to(archive))
    victim.unlink()
    with (huge / rel).open("r+b") as handle:
        handle.truncate(400 << 20)
    result = audit(tmp_path, corpus_dir, "--repair-from", huge, "--repair-from", peer).check(0)
    size = len((peer / rel).read_bytes())
    assert f"refused {huge.as_uri()}: {rel}: larger than the {size} bytes listed" in result.output
    assert not [p for p in archive.rglob("*") if p.is_file() and p.stat().st_size > 1 << 20]


def test_a_peer_under_an_unpinned_key_is_not_used(tmp_path, archive, corpus_dir, corpus_keyring):
    stranger = tmp_path / "stranger"
    write_run(
        LocalStore(stranger), Signer.from_seed("stranger", bytes(32)), corpus_keyring, corpus_raws(corpus_dir).values()
    )
    damage(archive)
    before = contents(archive)
    result = audit(tmp_path, corpus_dir, "--repair-from", stranger)
    result.check(1)
    assert f"peer {stranger.as_uri()} not used: it publishes no log of a pinned archive key" in result.output
    assert contents(archive) == before


def test_an_unreachable_peer_is_exit_4_and_the_archive_is_untouched(tmp_path, archive, corpus_dir, refused_port):
    damage(archive)
    before = contents(archive)
    url = f"http://127.0.0.1:{refused_port}"
    result = audit(tmp_path, corpus_dir, "--repair-from", url)
    result.check(4)
    assert f"peer {url} not used: unreachable: " in result.output
    assert result.output.strip().splitlines()[-1].startswith("failed (exit 4): 0 repaired; no peer could be read")
    assert contents(archive) == before


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["trickle_body", "silent"])
def test_a_peer_that_drips_or_never_answers_is_cut_and_the_next_repairs(
    tmp_path, archive, peer, corpus_dir, corpus_keyring, own, hostile_receiver, mode
):
    """At the deadline (1 s here, 60 s by default) the peer is given up for the run."""
    good = damage(archive)
    store = LocalStore(archive)
    run = Audit(store, corpus_keyring, Keyring([own.pinned()]))
    list(run.run())
    slow = HttpPeer(hostile_receiver(mode, every=0.2).url, deadline=1.0)
    peer_key = Signer.from_seed("peer-key-1", bytes(range(1, 33))).pinned()
    report = Repair(store, own, [slow, StorePeer(LocalStore(peer))], Keyring([own.pinned(), peer_key])).run(run.damaged)
    assert report.peers[0].unreachable and "no answer within 1.0 s" in report.peers[0].refused
    assert slow.reads == 1  # given up at once, not asked for every object
    assert {repaired.entry.path for repaired in report.repaired} == set(good)
    assert {damage for _, damage in run.damaged} == {Finding.MISSING, Finding.HASH_MISMATCH, Finding.SIZE_MISMATCH}


@pytest.mark.slow
def test_a_peer_in_a_bucket_repairs(tmp_path, archive, corpus_dir, corpus_keyring, peer_signer, s3_endpoint, s3_bucket):
    write_run(
        S3Store(s3_bucket, "peer", endpoint_url=s3_endpoint),
        peer_signer,
        corpus_keyring,
        corpus_raws(corpus_dir).values(),
    )
    good = damage(archive)
    audit(tmp_path, corpus_dir, "--repair-from", f"s3://{s3_bucket}/peer", "--s3-endpoint-url", s3_endpoint).check(0)
    for path, data in good.items():
        assert (archive / path).read_bytes() == data


# --- derived files no peer holds: rebuilt from the raw objects -----------------------
REBUILT = ("records", "events", "aliases", "attestations")


def table_rows(folder: Path, table: str) -> list[dict]:
    """Every row of a table as a reader of the folder sees it (pyarrow, Hive partitions)."""
    rows = ds.dataset(folder / layout.TABLES / table, format="parquet", partitioning="hive").to_table().to_pylist()
    return sorted(rows, key=repr)


def first_file(archive: Path, table: str) -> Path:
    return sorted((archive / layout.TABLES / table).rglob("*.parquet"))[0]


def largest_file(archive: Path, table: str) -> Path:
    """The table's file of the most rows: in several row groups when they are small."""
    return max((archive / layout.TABLES / table).rglob("*.parquet"), key=lambda path: pq.read_metadata(path).num_rows)


def test_damaged_table_files_no_peer_holds_are_rebuilt_from_the_raw_objects(
    tmp_path, peer, corpus_dir, corpus_keyring, own
):
    """The peer is another archive: it holds the raw bundles, not this archive's table files.
    The archive's files were written in row groups of 3 rows (as another version of pyarrow
    may write them otherwise): the rebuilt ones have the same rows in other bytes."""
    archive = tmp_path / "archive"
    raws = list(corpus_raws(corpus_dir).values())
    write_run(LocalStore(archive), own, corpus_keyring, raws, policy=RollPolicy(row_group_rows=3))
    before = {table: table_rows(archive, table) for table in REBUILT}
    victims = {table: largest_file(archive, table) for table in REBUILT}
    records, events, aliases, attestations = victims.values()
    records.write_bytes(records.read_bytes()[:-40] + bytes(40))  # its footer gone
    events.write_bytes(events.read_bytes()[:200])
    aliases.unlink()
    data = bytearray(attestations.read_bytes())
    data[100] ^= 0x01
    attestations.write_bytes(bytes(data))
    audit(tmp_path, corpus_dir).check(1)
    result = audit(tmp_path, corpus_dir, "--repair-from", peer).check(0)
    for path in victims.values():
        assert f"repaired {path.relative_to(archive)} (" in result.output
    lines = result.output.splitlines()
    assert len([line for line in lines if line.startswith("repaired tables/") and "this archive's raw" in line]) == 4
    for table in REBUILT:  # a reader of the whole folder sees every row once, as before
        assert table_rows(archive, table) == before[table], table
    assert [t for t, path in victims.items() if path.exists()] == []  # the damaged copies moved aside, 3 of them
    moved = sorted((archive / layout.QUARANTINE / "damaged").rglob("*.parquet"))
    assert [path.name for path in moved] == sorted(path.name for path in (records, events, attestations))
    # the repair's signed manifest says which listed file each rebuilt one supersedes; readers take it
    keys = Keyring([*corpus_keyring, own.pinned()])
    committed = CommittedArchive.read(LocalStore(archive), keys)
    (repair,) = [m for m in committed.manifests if "-repair-" in m["run_id"]]
    assert {old["path"] for old in repair["supersedes"]} == {str(p.relative_to(archive)) for p in victims.values()}
    for old in repair["supersedes"]:
        assert old["path"] not in committed.objects and old["by"] in committed.objects
        assert (archive / old["by"]).exists() and repair["run_id"] in old["by"]
    # DuckDB over the folder, as the README reads it; a plain audit: clean, the rebuilds its history
    query = "SELECT count(*) FROM read_parquet(?, hive_partitioning=true)"
    (count,) = duckdb.connect().execute(query, [f"{archive}/tables/events/**/*.parquet"]).fetchone()
    assert count == len(before["events"])
    later = audit(tmp_path, corpus_dir).check(0)
    (history,) = [line for line in later.output.splitlines() if line.startswith("repaired by ")]
    assert "4 objects (hash_mismatch 2, missing 1, size_mismatch 1) from this archive's raw objects" in history
    # an export of the tables and a bag take the rebuilt files, and the bag validates
    keys = ["--keyring", corpus_dir / "keyring.json", "--keyring", tmp_path / "own-pinned.json", "--no-default-keys"]
    (tmp_path / "own-pinned.json").write_text(json.dumps(own.pinned().document()))
    run_cli("export", archive, "--format", "parquet", "--out", tmp_path / "dataset", *keys).check(0)
    for table in REBUILT:
        assert table_rows(tmp_path / "dataset", table) == before[table], table
    run_cli("export", archive, "--format", "bag", "--out", tmp_path / "bag", *keys).check(0)
    bagit.Bag(str(tmp_path / "bag")).validate()
    # damaged in turn, a rebuilt file is rebuilt from the raw objects of the run its rows are of
    rebuilt = archive / repair["supersedes"][0]["by"]
    good = rebuilt.read_bytes()
    rebuilt.write_bytes(good[:-8] + bytes(8))
    audit(tmp_path, corpus_dir, "--repair-from", peer).check(0)
    assert rebuilt.read_bytes() == good
    # the damaged copy put back where it was: a reader of the folder would read its rows too
    old = repair["supersedes"][-1]
    shutil.copy(archive / layout.damaged_copy(repair["run_id"], old["path"]), archive / old["path"])
    back = audit(tmp_path, corpus_dir).check(1)
    assert f"orphan {old['path']} " in back.output and f"superseded by {old['by']}" in back.output


def test_a_rebuild_that_gives_the_listed_bytes_back_restores_the_file(tmp_path, archive, peer, corpus_dir):
    """Written as the archive writes it, the rebuilt file is the listed one: it goes back to its path."""
    table = first_file(archive, "events")
    good = table.read_bytes()
    table.write_bytes(good[:-40] + bytes(40))
    result = audit(tmp_path, corpus_dir, "--repair-from", peer).check(0)
    assert f"repaired {table.relative_to(archive)} (hash_mismatch) from this archive's raw objects" in result.output
    assert table.read_bytes() == good
    (manifest,) = (archive / layout.MANIFESTS).glob("*-repair-*.json")
    assert "supersedes" not in json.loads(manifest.read_bytes())


def test_a_verifications_file_is_named_not_rebuilt(tmp_path, archive, peer, corpus_dir):
    """Its rows record every fetch, failed ones too: no raw object holds them."""
    table = first_file(archive, "verifications")
    table.write_bytes(table.read_bytes()[:-40] + bytes(40))
    before = contents(archive)
    result = audit(tmp_path, corpus_dir, "--repair-from", peer)
    result.check(1)
    rel = str(table.relative_to(archive))
    assert (
        f"not repaired {rel} (hash_mismatch): no peer gave a copy with its listed sha256, and it is not rebuilt: "
        "a verifications file records every fetch, failed ones too, which left no raw object" in result.output
    )
    assert result.output.strip().splitlines()[-1].startswith("rejected (exit 1): 0 repaired; 1 object left damaged")
    assert contents(archive) == before  # nothing moved, nothing committed


def test_a_table_file_is_not_rebuilt_from_raw_objects_that_are_damaged(tmp_path, archive, corpus_dir, refused_port):
    """The raw objects need a peer, and none can be read: exit 4, each file named with why."""
    for path in raw_paths(archive):
        path.write_bytes(path.read_bytes()[:-1])
    table = first_file(archive, "records")
    table.unlink()
    before = contents(archive)
    result = audit(tmp_path, corpus_dir, "--repair-from", f"http://127.0.0.1:{refused_port}")
    result.check(4)
    rel = str(table.relative_to(archive))
    assert f"not repaired {rel} (missing): no peer could be read, and it is not rebuilt: raw/bundles/" in result.output
    assert "does not match its manifest entry" in result.output
    assert contents(archive) == before


def test_a_damaged_published_checkpoint_is_published_again(tmp_path, archive, corpus_dir, refused_port):
    """From the newest committed checkpoint; no peer is needed, so none being reachable is no failure."""
    published = archive / layout.published_checkpoint("own-key")
    good = published.read_bytes()
    published.write_bytes(good.replace(b"\n", b"\n ", 1))
    found = audit(tmp_path, corpus_dir).check(1)
    assert "checkpoint_unpublished log/own-key/checkpoint own-key: " in found.output
    result = audit(tmp_path, corpus_dir, "--repair-from", f"http://127.0.0.1:{refused_port}").check(0)
    assert "repaired log/own-key/checkpoint (checkpoint_unpublished) from log/own-key/checkpoints/" in result.output
    assert published.read_bytes() == good
    (moved,) = (archive / layout.QUARANTINE / "damaged").rglob("checkpoint")
    assert moved.read_bytes() == good.replace(b"\n", b"\n ", 1)  # evidence
    audit(tmp_path, corpus_dir).check(0)


@pytest.mark.slow
def test_a_crawls_index_and_captures_no_peer_holds_are_rebuilt_from_its_warc_files(tmp_path, static_site, refused_port):
    """On the machine that crawled (its key, the shipped registry keys): the CDXJ index
    and the captures rows read back from the WARC file, checked against its entry; no
    peer is needed, so none being reachable is no failure."""
    base, suffixes, _ = static_site
    archive = tmp_path / "archive"
    assert run_cli_crawl(tmp_path, "--resolver", base, suffixes[0], "--out", str(archive)).returncode == 0
    (index,) = (archive / layout.WARC).glob("*.cdxj")
    good, rows = index.read_bytes(), table_rows(archive, "captures")
    index.write_bytes(good[:-10])
    captures = first_file(archive, "captures")
    captures.unlink()
    result = run_cli("audit", archive, "--repair-from", f"http://127.0.0.1:{refused_port}", home=tmp_path).check(0)
    assert f"repaired {index.relative_to(archive)} (size_mismatch) from this archive's raw objects" in result.output
    assert index.read_bytes() == good
    # the same rows; those rebuilt have their fetch_time to the second, as the records' WARC-Date holds it
    subset = layout.partition_of(str(captures.relative_to(archive)))[1]
    expected = [
        {**row, "fetch_time": row["fetch_time"].replace(microsecond=0)} if row["subset"] == subset else row
        for row in rows
    ]
    assert table_rows(archive, "captures") == sorted(expected, key=repr)
