"""Storage attestations: a crawl attests every version it archives, in Pith's event
format; the events verify with nothing but the archive's public key document and a
plain Ed25519 implementation; the chain runs across runs, per key; `verify` checks a
feed and its chain; the merge files attestations under storage_attestations."""

import base64
import hashlib
import json

import pytest
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from pith.attestation import Chain, check_feed
from pith.keyring import ARCHIVE, Keyring
from pith.merge import entry, merge
from pith.reasons import Rejected
from pith.signed_event import check_event
from pith.signing import Signer
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.archive.manifest import committed_manifests
from storage.serving.source import KEYRING_NAME
from tests.plugins.archives import corpus_raws, write_run
from tests.plugins.cli import run_cli
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.tables import read_rows

OTHER = Signer.from_seed("test-key-2", bytes(range(1, 33)))


# --- an independent check: json, hashlib and PyNaCl only, no pith code -------------


def independently_verified(line: bytes, key_document: dict) -> dict:
    """The attestation on ``line`` if it holds under the key document, by the rules of
    PITH-FORMAT.md alone; AssertionError or BadSignatureError otherwise."""
    event = json.loads(line)
    assert line == json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    content = {k: v for k, v in event.items() if k not in ("signature", "content_sha256", "event_id")}
    digest = hashlib.sha256(
        json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    ).hexdigest()
    assert event["content_sha256"] == digest and event["event_id"] == "sha256:" + digest
    raw_key = base64.b64decode(key_document["public_key_b64"])
    assert hashlib.sha256(raw_key).hexdigest()[:32] == key_document["fingerprint_sha256_hex"]
    signature = event["signature"]
    assert (signature["algorithm"], signature["signed_message"]) == ("ed25519", "open_graph_event_sha256_bytes")
    assert signature["key_id"] == event["signer"]["key_id"] == key_document["key_id"]
    assert signature["public_key_fingerprint"] == key_document["fingerprint_sha256_hex"]
    VerifyKey(raw_key).verify(bytes.fromhex(digest), base64.b64decode(signature["signature_b64"]))
    assert (event["event_type"], event["target"], event["signer"]["signer_type"]) == (
        "storage_attestation",
        "storage",
        "archive",
    )
    return event


def feed_lines(store, manifest) -> list[bytes]:
    [feed] = [e["path"] for e in manifest["objects"] if e["path"].startswith("attestations/")]
    assert feed == layout.attestation_feed(manifest["run_id"])
    return store.get_bytes(feed).splitlines()


@pytest.mark.slow
def test_a_crawl_attests_every_version_it_archives(tmp_path, corpus_dir, corpus_catalog, mirror):
    archive = tmp_path / "archive"
    result = run_cli_crawl(
        tmp_path,
        "--resolver",
        mirror().url,
        "--keyring",
        str(corpus_dir / KEYRING_NAME),
        "--no-default-keys",
        "--out",
        str(archive),
        corpus_catalog.suffixes[0],
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stat("archived") == len(corpus_catalog)

    # the public key document, as published, is the crawl's key (made on first use)
    private = json.loads((tmp_path / "config" / "pith-archiver" / "signing-key.json").read_text())
    [published] = (archive / "keys").glob("*.json")
    key_document = json.loads(published.read_text())
    assert key_document == private["public"] and published.name == f"{private['key_id']}.json"

    manifest = json.loads(next((archive / "manifests").glob("*.json")).read_text())
    lines = (archive / layout.attestation_feed(manifest["run_id"])).read_bytes().splitlines()
    events = [independently_verified(line, key_document) for line in lines]
    assert len(events) == len(corpus_catalog)
    assert [e["prev_event"] for e in events] == [None] + [e["event_id"] for e in events[:-1]]
    records = {r["bundle_sha256"]: r for r in read_rows(archive, "records")}
    for event in events:
        payload = event["payload"]
        stored = (archive / payload["raw_path"]).read_bytes()
        assert (hashlib.sha256(stored).hexdigest(), len(stored)) == (payload["raw_sha256"], payload["size"])
        record = records[payload["bundle_sha256"]]
        assert (record["raw_path"], record["canonical_sha256"], record["pith_number"]) == (
            payload["raw_path"],
            payload["canonical_sha256"],
            event["subject_pith_number"],
        )
        assert payload["run_id"] == manifest["run_id"] and event["created_at"] == payload["stored_at"]
        assert payload["storage_uri"] == f"{archive.as_uri()}/{payload['raw_path']}"
        assert event["signer"]["signer_id"] == archive.as_uri()
    assert {e["payload"]["bundle_sha256"] for e in events} == set(records)

    # listed in the manifest, with the attestations table
    listed = {e["path"]: e for e in manifest["objects"]}
    assert layout.attestation_feed(manifest["run_id"]) in listed
    table = read_rows(archive, "attestations")
    assert [r["event_id"] for r in table] == [e["event_id"] for e in events]
    assert {r["key_id"] for r in table} == {key_document["key_id"]}
    assert sum(e["rows"] for e in listed.values() if e.get("table") == "attestations") == len(events)


def test_verify_checks_feeds_and_their_chain(tmp_path, corpus_dir, corpus_keyring, test_signer):
    archive = tmp_path / "archive"
    store = LocalStore(archive)
    raws = list(corpus_raws(corpus_dir).values())[:4]
    write_run(store, test_signer, corpus_keyring, raws[:3])
    [first] = (archive / "attestations").glob("*.jsonl")
    write_run(store, test_signer, corpus_keyring, raws[3:])
    [second] = set((archive / "attestations").glob("*.jsonl")) - {first}
    key_document = archive / layout.key_document(test_signer.key_id)

    def verify(*paths):
        return run_cli("verify", "--keyring", str(key_document), *map(str, paths))

    result = verify(first, second)
    assert result.returncode == 0, result.output
    assert result.output.splitlines() == [
        f"VERIFIED    feed  {first}  3 attestations",
        f"VERIFIED    feed  {second}  1 attestation",
        "2 verified, 0 rejected",
    ]
    assert verify(second).returncode == 0  # it continues a feed not given: taken as it is
    whole = verify(archive / "attestations")  # a folder: its feeds, in order
    assert whole.returncode == 0 and whole.output.splitlines()[-1] == "2 verified, 0 rejected", whole.output

    lines = first.read_bytes().splitlines(keepends=True)
    ids = [json.loads(line)["event_id"] for line in lines]
    for name, changed, reason in [
        ("dropped.jsonl", [lines[0], lines[2]], f"chain_broken at lines[1].prev_event: expected {ids[0]}"),
        ("reordered.jsonl", [lines[0], lines[2], lines[1]], f"chain_broken at lines[1].prev_event: expected {ids[0]}"),
        (
            "flipped.jsonl",
            [lines[0], lines[1].replace(b'"size":', b'"size":1'), lines[2]],
            "event_hash_mismatch at lines[1].content_sha256",
        ),
    ]:
        (tmp_path / name).write_bytes(b"".join(changed))
        result = verify(tmp_path / name, second)
        assert result.returncode == 1 and reason in result.output, (name, result.output)
    # the last attestation of the first feed gone: the second feed no longer joins it
    (tmp_path / "truncated.jsonl").write_bytes(b"".join(lines[:2]))
    result = verify(tmp_path / "truncated.jsonl", second)
    assert result.returncode == 1
    assert f"REJECTED    feed  {second}  chain_broken at lines[0].prev_event: a second chain" in result.output
    # the registry key alone does not make the archive's attestations verify
    result = run_cli("verify", "--json", str(first))
    assert result.returncode == 1 and json.loads(result.stdout.splitlines()[0])["reason"] == "unknown_key"


def test_the_chain_continues_across_runs_per_key(store, real_raw, registry_keyring, test_signer, test_keyring):
    raws = [raw for _, raw in sorted(real_raw.items())]
    write_run(store, test_signer, registry_keyring, raws[:2])
    write_run(store, OTHER, registry_keyring, raws[2:])  # another worker, its own key and chain
    write_run(store, test_signer, registry_keyring, raws[2:])  # a new version for this key: chained on

    ours = sorted(committed_manifests(store, test_keyring), key=lambda m: m["committed_at"])  # ids: by the second
    first, second = ([json.loads(line) for line in feed_lines(store, m)] for m in ours)
    assert [e["prev_event"] for e in first] == [None, first[0]["event_id"]]
    assert [e["prev_event"] for e in second] == [first[1]["event_id"]]
    [theirs] = committed_manifests(store, Keyring([OTHER.pinned()]))
    assert [json.loads(line)["prev_event"] for line in feed_lines(store, theirs)] == [None]

    # all the feeds, read in any order, join into one chain per key, each from a null start
    both = Keyring([test_signer.pinned(), OTHER.pinned()])
    chain = Chain()
    manifests = [ours[1], theirs, ours[0]]
    assert sum(check_feed(m["run_id"], feed_lines(store, m), both, chain) for m in manifests) == 4
    assert chain.breaks(rooted=True) == []
    alone = Chain()  # the second feed without the first: it continues a feed not given
    check_feed("second", feed_lines(store, ours[1]), both, alone)
    assert alone.breaks(rooted=False) == []
    [(segment, why)] = alone.breaks(rooted=True)
    assert (segment.source, segment.where, why) == (
        "second",
        "lines[0]",
        f"names {first[1]['event_id']}, which ends no feed of test-key-1",
    )

    assert sorted(r["key_id"] for r in read_rows(store, "attestations")) == ["test-key-1"] * 3 + ["test-key-2"]


def test_attestations_verify_as_events_and_merge_into_storage_attestations(
    tmp_path, real_raw, real_docs, registry_keyring, test_signer
):
    store = LocalStore(tmp_path / "archive")
    write_run(store, test_signer, registry_keyring, list(real_raw.values()))
    [feed] = (tmp_path / "archive" / "attestations").glob("*.jsonl")
    attestations = [json.loads(line) for line in feed.read_bytes().splitlines()]
    keyring = Keyring.build([tmp_path / "archive" / layout.key_document(test_signer.key_id)], default_keys=False)
    for attestation in attestations:
        bundle = next(d for d in real_docs.values() if d["pith_number"] == attestation["subject_pith_number"])
        assert (
            check_event(attestation, keyring, "attestation", bundle["pith_number"], role=ARCHIVE)
            == attestation["content_sha256"]
        )
        state = merge(bundle["pith_number"], bundle["source_aliases"], bundle["events"] + [attestation]).state
        assert state["current"]["storage_attestations"] == [entry(attestation)]
        assert state["current"]["graph_snapshots"] == bundle["state"]["current"]["graph_snapshots"]
        assert state["applied_event_ids"][-1] == attestation["event_id"]
    with pytest.raises(Rejected, match="unknown_key"):
        check_event(attestations[0], Keyring.default(), "attestation", None, role=ARCHIVE)
    with pytest.raises(Rejected, match="wrong_key_role"):  # the archive key signs no registry event
        check_event(attestations[0], keyring, "attestation", None)


def test_a_bad_signature_fails_the_independent_check(tmp_path, real_raw, registry_keyring, test_signer):
    write_run(LocalStore(tmp_path / "archive"), test_signer, registry_keyring, list(real_raw.values())[:1])
    [feed] = (tmp_path / "archive" / "attestations").glob("*.jsonl")
    event = json.loads(feed.read_bytes())
    signature = base64.b64decode(event["signature"]["signature_b64"])
    event["signature"]["signature_b64"] = base64.b64encode(bytes([signature[0] ^ 1]) + signature[1:]).decode()
    line = json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    with pytest.raises(BadSignatureError):
        independently_verified(line, test_signer.public_document())


def test_attestations_hashed_the_fast_way_hash_as_the_reference_encoder_does(tmp_path, test_signer):
    """Attestations are hashed and spooled with orjson (their payload holds no float):
    text that JSON escapes, or non-ASCII, and a size past 64 bits still give the
    reference encoder's bytes, in the event and on the feed's lines."""
    from storage.transparency.attestations import AttestationFeed, FeedSpool, Stored

    odd = Stored("pith:2024:ÅB\u2028\x1f\"\\/é", "b" * 64, "c" * 64, "raw/bundles/bb/é.json", "d" * 64, 2**70)
    plain = Stored("pith:2024:ABC", "b" * 64, "c" * 64, "raw/bundles/bb/b.json", "d" * 64, 12_345)
    feed = AttestationFeed(test_signer, "file:///archives/čas \u0007", None)
    spool = FeedSpool(tmp_path)
    for event in feed.seal([(odd, "2026-11-27T05:00:00+00:00"), (plain, "2026-11-27T05:00:01+00:00")], "run-1"):
        spool.add(event)
    spool.close()
    events = [independently_verified(line, test_signer.public_document()) for line in spool.entries()]
    assert [e["payload"]["size"] for e in events] == [2**70, 12_345]
    assert events[1]["prev_event"] == events[0]["event_id"]
