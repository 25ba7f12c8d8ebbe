"""Manifests: signed the Pith way, committed without overwriting, trusted only when
they verify; what no committed manifest lists is an orphan the audit reports."""

import json

import pytest

from pith.canonical import canon
from pith.signing import Signer
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.archive.manifest import (
    ManifestInvalid,
    build_manifest,
    commit_manifest,
    committed_manifests,
    read_committed,
    read_manifests,
    sign_manifest,
    verify_manifest,
)
from storage.archive.reader import CommittedArchive
from storage.archive.stores import ObjectExists
from storage.audit import Audit

RUN = "20261122T053000Z-w0-0123abcd"


def manifest_for(store, signer, run_id=RUN, paths=("raw/bundles/ab/one.json",), stats=None):
    """Write ``paths`` with small contents and return the signed manifest listing them."""
    entries = [store.put_bytes(path, path.encode()) for path in paths]
    body = build_manifest(
        run_id=run_id,
        worker="w0",
        started_at="2026-11-22T05:30:00Z",
        objects=entries,
        stats=stats or {"fetched": len(paths)},
        params={"seeds": ["https://pith.science/"]},
    )
    return sign_manifest(body, signer)


def spare_bits(encoded: str) -> str:
    """The same 64 signature bytes spelled another way: base64's last character before
    the padding carries 4 bits no decoder reads."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = alphabet.index(encoded[-3])
    return encoded[:-3] + alphabet[last ^ 1] + encoded[-2:]


def test_a_signed_manifest_verifies(test_signer, test_keyring, tmp_path):
    manifest = manifest_for(LocalStore(tmp_path), test_signer)
    assert verify_manifest(canon(manifest), test_keyring) == manifest
    signature = manifest["signature"]
    assert signature["signed_message"] == "manifest_sha256_bytes"
    assert signature["key_id"] == test_signer.key_id and len(signature["manifest_sha256"]) == 64
    assert manifest["software"]["name"] == "pith-archiver" and manifest["table_schema_version"]
    # whitespace does not matter: the hash is over the canonical form
    assert verify_manifest(json.dumps(manifest, indent=2).encode(), test_keyring) == manifest


@pytest.mark.parametrize(
    "change, reason",
    [
        (lambda m: m["objects"][0].update(sha256="0" * 64), "manifest_hash_mismatch"),
        (lambda m: m["stats"].update(fetched=99), "manifest_hash_mismatch"),
        (lambda m: m["objects"].pop(), "manifest_hash_mismatch"),
        (
            lambda m: m["signature"].update(signature_b64=m["signature"]["signature_b64"][::-1]),
            "manifest_signature_invalid",
        ),
        (lambda m: m["signature"].update(key_id="someone-else"), "unknown_key"),
        (lambda m: m["signature"].update(signed_message="bundle_sha256_bytes"), "schema_violation"),
        # the signature block is outside the hash: nothing may ride in it unsigned
        (lambda m: m["signature"].update(note="unsigned payload"), "schema_violation"),
        (
            lambda m: m["signature"].update(signature_b64=spare_bits(m["signature"]["signature_b64"])),
            "schema_violation",
        ),
    ],
)
def test_an_altered_manifest_does_not_verify(test_signer, test_keyring, tmp_path, change, reason):
    manifest = json.loads(canon(manifest_for(LocalStore(tmp_path), test_signer)))
    change(manifest)
    with pytest.raises(ManifestInvalid) as caught:
        verify_manifest(canon(manifest), test_keyring)
    assert caught.value.reason == reason


@pytest.mark.parametrize("table, rows", [("records", None), (None, 3), ("records", -1), (7, 3)])
def test_a_table_entry_needs_its_table_and_row_count(test_signer, test_keyring, table, rows):
    entry = {
        "path": "tables/records/year=2019/part.parquet",
        "sha256": "ab" * 32,
        "size": 10,
        "table": table,
        "rows": rows,
    }
    body = build_manifest(run_id=RUN, worker="w0", started_at="2026-11-22T05:30:00Z", objects=[], stats={}, params={})
    signed = sign_manifest({**body, "objects": [{k: v for k, v in entry.items() if v is not None}]}, test_signer)
    with pytest.raises(ManifestInvalid) as caught:
        verify_manifest(canon(signed), test_keyring)
    assert caught.value.reason == "schema_violation" and caught.value.path.startswith("objects[0].")


def test_a_manifest_signed_by_an_unpinned_key_does_not_verify(test_keyring, tmp_path):
    stranger = Signer.from_seed("test-key-1", bytes(range(1, 33)))  # same key_id, other key
    with pytest.raises(ManifestInvalid) as caught:
        verify_manifest(canon(manifest_for(LocalStore(tmp_path), stranger)), test_keyring)
    assert caught.value.reason == "key_fingerprint_mismatch"


def test_commit_never_overwrites_a_manifest(store, test_signer, test_keyring):
    first = manifest_for(store, test_signer)
    info = commit_manifest(store, first)
    assert info.path == layout.manifest(RUN)
    second = manifest_for(store, test_signer, stats={"fetched": 2})
    with pytest.raises(ObjectExists):
        commit_manifest(store, second)
    assert store.get_bytes(info.path) == canon(first) + b"\n"
    assert commit_manifest(store, first) == info  # the same commit again is a no-op
    assert list(committed_manifests(store, test_keyring)) == [first]


def test_manifest_entries_match_the_stored_objects(store, test_signer, test_keyring):
    commit_manifest(store, manifest_for(store, test_signer, paths=("raw/bundles/ab/one.json", "tables/t/p.parquet")))
    objects = CommittedArchive.read(store, test_keyring).objects
    assert sorted(objects) == ["raw/bundles/ab/one.json", "tables/t/p.parquet"]
    for path, entry in objects.items():
        assert store.digest(path) == entry


def test_torn_and_misnamed_manifests_are_reported_not_trusted(store, test_signer, test_keyring):
    good = manifest_for(store, test_signer)
    commit_manifest(store, good)
    torn_path = layout.manifest("20261122T060000Z-w1-00000001")
    store.put_bytes(torn_path, (canon(good) + b"\n")[:-40])
    misnamed_path = layout.manifest("20261122T070000Z-w2-00000002")
    store.put_bytes(misnamed_path, canon(good))
    store.put_bytes("manifests/notes.txt", b"not a manifest name: ignored")
    reads = {read.path: read for read in read_manifests(store, test_keyring)}
    assert sorted(reads) == [layout.manifest(RUN), torn_path, misnamed_path]
    assert reads[torn_path].error.reason == "malformed_json"
    assert reads[misnamed_path].error.reason == "manifest_misnamed"
    assert list(committed_manifests(store, test_keyring)) == [good]


def audit_orphans(store, keyring) -> list[str]:
    return sorted(found.path for found in Audit(store, keyring, keyring).run() if found.code == "orphan")


def test_what_no_committed_manifest_lists_is_an_orphan(store, test_signer, test_keyring):
    commit_manifest(store, manifest_for(store, test_signer, paths=("raw/bundles/ab/one.json", "tables/t/p.parquet")))
    leftovers = [
        "raw/bundles/cd/crashed.json",
        "tables/t/part-crashed.parquet",
        "quarantine/ef/x.json",
        "attestations/crashed.jsonl",
        "manifests/.tmp-abc",
        "keys/other.json",
    ]
    for path in leftovers:
        store.put_bytes(path, b"left behind")
    assert audit_orphans(store, test_keyring) == sorted(leftovers)
    assert sorted(CommittedArchive.read(store, test_keyring).objects) == [
        "raw/bundles/ab/one.json",
        "tables/t/p.parquet",
    ]


def test_the_objects_of_a_manifest_signed_by_an_unpinned_key_are_not_orphans(store, test_signer, test_keyring):
    other = Signer.from_seed("other-archiver", bytes(32))
    commit_manifest(store, manifest_for(store, other))  # its key is not pinned here
    committed = read_committed(store, test_keyring)
    assert committed.manifests == [] and [r.error.reason for r in committed.untrusted] == ["unknown_key"]
    assert audit_orphans(store, test_keyring) == []
    assert [found.code for found in Audit(store, test_keyring, test_keyring).run()] == ["manifest_unpinned"]
