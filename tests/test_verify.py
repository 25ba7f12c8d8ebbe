"""Verification of whole bundles: the real ones verify, each catalogued single
mutation draws exactly its reason code and path, and trust comes only from the
pinned keyring."""

import json
from pathlib import Path

import pytest

from pith.keyring import ARCHIVE, REGISTRY, Keyring
from pith.reasons import REASONS
from pith.signing import Signer
from pith.verify import verify_bundle
from storage.serving.record import compact_json
from tests.plugins.cli import run_cli
from tests.plugins.core import real_bundle_paths
from tests.tamper import (
    ADVERTISED,
    ARCHIVER,
    MUTATIONS,
    NEW_EVENT_TYPES,
    RAW_MUTATIONS,
    _resigned,
    locate,
    tampered,
    wholly_resigned,
    windowed_keys,
    with_new_event,
)

REAL_SUFFIXES = [path.name.split(".")[0] for path in real_bundle_paths()]
CATALOGUE = {**MUTATIONS, **RAW_MUTATIONS}


@pytest.fixture(scope="module")
def ring(registry_keyring, test_signer) -> Keyring:
    """The registry key, the test key that re-signs tampered bundles, an archive key,
    and two registry keys with validity windows."""
    return Keyring([*registry_keyring, test_signer.pinned(REGISTRY), ARCHIVER.pinned(ARCHIVE), *windowed_keys()])


def write_keyring(path: Path, *entries: dict) -> Path:
    path.write_text(json.dumps({"keys": list(entries)}))
    return path


# --- the real bundles --------------------------------------------------------------------


def test_real_bundles_verify(real_raw, real_docs, registry_keyring):
    for suffix, raw in real_raw.items():
        verdict = verify_bundle(raw, registry_keyring)
        assert (verdict.status, verdict.reason, verdict.path) == ("verified", "", "")
        assert verdict.pith_number == real_docs[suffix]["pith_number"]
        assert verdict.pith_number.endswith(":" + suffix)
        assert verdict.bundle_sha256 == real_docs[suffix]["bundle_signature"]["bundle_sha256"]
        assert verdict.state_sha256 == real_docs[suffix]["state"]["state_sha256"]
        assert verdict.exact is True  # no floats: orjson's bytes are the canonical ones, for the rows too


def with_numbers_json_writers_spell_differently(raw: bytes, signer: Signer) -> bytes:
    """The bundle with one more event whose payload holds numbers orjson writes otherwise
    than the reference encoder (1e-07 as 1e-7, 1e-05 as 0.00001) or not at all (past 64
    bits), every hash and signature made over the reference bytes by ``signer``."""
    bundle = json.loads(with_new_event(raw, signer, "correction"))
    bundle["events"][-1]["payload"]["scores"] = [1e-07, 1e-05, 2**70, 0.5]
    return compact_json(_resigned(bundle, signer, keep_state=False))


def test_numbers_orjson_spells_otherwise_still_verify(real_raw, ring, test_signer):
    """Parsing notes the floats (and integers past 64 bits): for such a bundle every hash
    is taken over the reference encoder's bytes, not orjson's, so nothing is falsely
    rejected, and the verdict says orjson's bytes are not the canonical ones."""
    for raw in real_raw.values():
        verdict = verify_bundle(with_numbers_json_writers_spell_differently(raw, test_signer), ring)
        assert (verdict.status, verdict.reason, verdict.exact) == ("verified", "", False)
        assert verdict.bundle["events"][-1]["payload"]["scores"] == [1e-07, 1e-05, 2**70, 0.5]


def test_real_bundles_verify_through_the_cli(real_docs):
    result = run_cli("verify")
    assert result.returncode == 0
    assert result.stdout.count("VERIFIED") == len(real_docs) == 3
    for doc in real_docs.values():
        assert doc["pith_number"] in result.stdout
    assert result.stdout.splitlines()[-1] == "3 verified, 0 rejected"


# --- the error-coded corpus --------------------------------------------------------------

# Codes that other documents or the crawl draw, never verify_bundle; a new code must
# join this set or get a mutation in tests/tamper.py.
NOT_FROM_BUNDLES = {
    "chain_broken",
    "manifest_hash_mismatch",
    "manifest_signature_invalid",
    "fetch_failed",
    "wrong_record",
    "not_append_only",
    "equivocation",
    "attestation_mismatch",
    "checkpoint_invalid",
    "checkpoint_signature_invalid",
    "inclusion_proof_invalid",
    "quorum_unmet",
    "merge_unverified",
    "release_hash_mismatch",
    "release_signature_invalid",
    "release_file_mismatch",
    "release_unlisted_file",
    "wacz_malformed",
    "wacz_unsafe_member",
    "wacz_resource_mismatch",
}  # merge_unverified is no longer given: see test_new_event_types_are_verified_unconfirmed


def test_catalogue_covers_every_reason_a_bundle_can_draw():
    assert {m.reason for m in CATALOGUE.values()} == set(REASONS) - NOT_FROM_BUNDLES


@pytest.mark.parametrize("suffix", REAL_SUFFIXES)
@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_each_mutation_draws_exactly_its_reason_and_path(real_raw, ring, test_signer, suffix, name):
    raw = real_raw[suffix]
    bad = tampered(raw, name, test_signer)
    assert bad != raw
    verdict = verify_bundle(bad, ring)
    assert (verdict.status, verdict.reason, verdict.path) == ("rejected", CATALOGUE[name].reason, CATALOGUE[name].path)
    assert not verdict.ok


def test_resigning_alone_leaves_a_valid_bundle(real_docs, test_signer):
    """The re-signing that carries a mutation to a deeper check is sound on its own, so
    in a re-signed mutation the change is the only thing wrong."""
    for doc in real_docs.values():
        resigned = compact_json(wholly_resigned(doc, test_signer))
        assert verify_bundle(resigned, Keyring([test_signer.pinned(REGISTRY)])).ok


def test_resigning_mutations_need_a_signer(real_raw):
    raw = next(iter(real_raw.values()))
    with pytest.raises(ValueError, match="signer"):
        tampered(raw, "subject_changed")


# --- trust (issue 2, item 5) ---------------------------------------------------------------


def test_wholly_resigned_by_an_advertised_key_is_unknown_key(real_docs, registry_keyring):
    forger = Signer.generate("registry-looking-key")
    for doc in real_docs.values():
        forged = wholly_resigned(doc, forger)
        assert forged["public_keys"][0]["key_id"] == forger.key_id  # it advertises its own key
        verdict = verify_bundle(compact_json(forged), registry_keyring)
        assert (verdict.reason, verdict.path) == ("unknown_key", "events[0].payload.receipt.key_id")


def test_pinning_the_same_key_makes_it_verify(real_docs, test_signer, registry_keyring):
    """Trust follows the keyring: one bundle, three keyrings, three verdicts; pinned
    with the archive role, a key may not sign registry records."""
    raw = compact_json(wholly_resigned(next(iter(real_docs.values())), test_signer))
    assert verify_bundle(raw, Keyring([test_signer.pinned(REGISTRY)])).ok
    assert verify_bundle(raw, registry_keyring).reason == "unknown_key"
    verdict = verify_bundle(raw, Keyring([test_signer.pinned(ARCHIVE)]))
    assert (verdict.reason, verdict.path) == ("wrong_key_role", "events[0].payload.receipt.key_id")


@pytest.mark.parametrize(
    "name, block",
    [
        ("receipt_signed_by_impostor", "events[0].payload.receipt"),
        ("event_signed_by_impostor", "events[1].signature"),
        ("bundle_signed_by_impostor", "bundle_signature"),
    ],
)
def test_pinned_key_id_signed_by_another_key_is_a_signature_failure(real_raw, registry_keyring, name, block):
    for raw in real_raw.values():
        forged = tampered(raw, name)
        parent, key = locate(json.loads(forged), block)
        assert parent[key]["key_id"] == "pith-v1-2026-05"  # it claims the pinned key
        verdict = verify_bundle(forged, registry_keyring)
        assert (verdict.reason, verdict.path) == (MUTATIONS[name].reason, f"{block}.signature_b64")
        assert verdict.reason.endswith("_signature_invalid")


def test_impostor_key_advertised_under_the_pinned_key_id(real_raw, registry_keyring):
    verdict = verify_bundle(tampered(next(iter(real_raw.values())), "public_key_swapped"), registry_keyring)
    assert (verdict.reason, verdict.path) == ("key_fingerprint_mismatch", "public_keys[0].public_key_b64")


def test_no_default_keys_makes_the_real_bundles_unknown_key(tmp_path, test_signer):
    keys = write_keyring(tmp_path / "test.json", test_signer.public_document())
    result = run_cli("verify", "--no-default-keys", "--keyring", str(keys), "--json")
    assert result.returncode == 1
    verdicts = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(verdicts) == 3
    assert {(v["status"], v["reason"], v["path"]) for v in verdicts} == {
        ("rejected", "unknown_key", "events[0].payload.receipt.key_id")
    }


def test_keyring_file_adds_keys(tmp_path, real_docs, test_signer):
    bundle = tmp_path / "resigned.json"
    bundle.write_bytes(compact_json(wholly_resigned(next(iter(real_docs.values())), test_signer)))
    keys = write_keyring(tmp_path / "test.json", test_signer.public_document())
    assert run_cli("verify", str(bundle)).returncode == 1
    assert run_cli("verify", "--keyring", str(keys), str(bundle)).returncode == 0
    assert run_cli("verify", "--no-default-keys", "--keyring", str(keys), str(bundle)).returncode == 0


def test_keyring_option_repeats(tmp_path, real_docs, test_signer):
    other = Signer.generate("second-key")
    bundles = []
    for index, signer in enumerate((test_signer, other)):
        path = tmp_path / f"b{index}.json"
        path.write_bytes(compact_json(wholly_resigned(next(iter(real_docs.values())), signer)))
        bundles.append(str(path))
    first = write_keyring(tmp_path / "first.json", test_signer.public_document())
    second = write_keyring(tmp_path / "second.json", other.public_document())
    assert run_cli("verify", "--keyring", str(first), *bundles).returncode == 1
    assert run_cli("verify", "--keyring", str(first), "--keyring", str(second), *bundles).returncode == 0


REGISTRY_DOCUMENT = Keyring.default().get("pith-v1-2026-05").document()


def _wrong_fingerprint(entry):
    return {**entry, "fingerprint_sha256_hex": "0" * 32}


@pytest.mark.parametrize(
    "content, message",
    [
        (lambda s: {"keys": [_wrong_fingerprint(s.public_document())]}, "fingerprint_sha256_hex does not match"),
        (lambda s: {"keys": [{**s.public_document(), "public_key_hex": "ab" * 32}]}, "public_key_hex does not match"),
        (lambda s: {"keys": [{**s.public_document(), "algorithm": "rsa"}]}, "not ed25519"),
        (lambda s: {"keys": [{**s.public_document(), "public_key_b64": "AAAA"}]}, "32 bytes"),
        (lambda s: {"keys": [{**ADVERTISED.public_document(), "key_id": "pith-v1-2026-05"}]}, "pinned twice"),
        (
            lambda s: {"keys": [{**s.public_document(), "role": "admin"}]},
            "role 'admin' is not one of registry, archive",
        ),
        (lambda s: {"keys": [REGISTRY_DOCUMENT, {**REGISTRY_DOCUMENT, "role": "archive"}]}, "a key has one role"),
        (lambda s: {"keys": s.public_document()}, "not a keyring; give a keyring file"),
        (lambda s: [s.public_document()], "not a keyring; give a keyring file"),
    ],
)
def test_unusable_keyring_is_a_usage_error(tmp_path, test_signer, content, message):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps(content(test_signer)))
    result = run_cli("verify", "--keyring", str(keys))
    assert result.returncode == 2
    assert message in result.stderr
    assert "VERIFIED" not in result.stdout


def test_a_keyring_files_entries_are_registry_keys_unless_it_is_given_for_archive_keys(tmp_path, test_signer):
    keys = write_keyring(tmp_path / "workers.json", test_signer.public_document())
    assert Keyring.build([keys], default_keys=False).get(test_signer.key_id).role == REGISTRY
    assert Keyring.build([keys], default_keys=False, role=ARCHIVE).get(test_signer.key_id).role == ARCHIVE
    single = tmp_path / "one.json"
    single.write_text(json.dumps(test_signer.public_document()))  # a key document as archives published it
    assert Keyring.build([single], default_keys=False).get(test_signer.key_id).role == ARCHIVE


def test_keyring_that_is_not_json_is_a_usage_error(tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text("{not json")
    assert run_cli("verify", "--keyring", str(keys)).returncode == 2


# --- wrong types (issue 2, item 6) -------------------------------------------------------


@pytest.mark.parametrize(
    "path, value",
    [
        ("pith_number", 2019),
        ("canonical_record", "record"),
        ("canonical_record.metadata", []),
        ("canonical_record.metadata.submitted_at", 2019),
        ("canonical_sha256", "not hex"),
        ("source_aliases", {}),
        ("source_aliases[0]", "arxiv"),
        ("public_keys", None),
        ("public_keys[0]", 7),
        ("public_keys[0].public_key_b64", 5),
        ("events", {}),
        ("events[1]", "event"),
        ("events[1].event_type", 5),
        ("events[1].payload", []),
        ("events[1].signer", "pith.science"),
        ("events[1].content_sha256", True),
        ("events[1].signature", "sig"),
        ("events[1].signature.signed_message", "something else"),
        ("events[0].payload.receipt", "receipt"),
        ("state", []),
        ("state.current", "current"),
        ("state.state_sha256", 17),
        ("bundle_signature", "sig"),
        ("bundle_signature.bundle_sha256", None),
        ("bundle_signature.signature_status", "unsigned"),
    ],
)
def test_wrong_type_is_a_schema_violation_at_its_path(real_docs, registry_keyring, path, value):
    doc = json.loads(json.dumps(next(iter(real_docs.values()))))
    parent, key = locate(doc, path)
    parent[key] = value
    verdict = verify_bundle(compact_json(doc), registry_keyring)
    assert (verdict.reason, verdict.path) == ("schema_violation", path)


@pytest.mark.parametrize("raw", [b"[]", b'"bundle"', b"7", b"null", b"true"])
def test_document_that_is_not_an_object(raw, registry_keyring):
    verdict = verify_bundle(raw, registry_keyring)
    assert (verdict.status, verdict.reason, verdict.path) == ("rejected", "schema_violation", "")


def test_missing_members_are_schema_violations(real_docs, registry_keyring):
    doc = json.loads(json.dumps(next(iter(real_docs.values()))))
    del doc["events"][1]["signer"]
    verdict = verify_bundle(compact_json(doc), registry_keyring)
    assert (verdict.reason, verdict.path) == ("schema_violation", "events[1].signer")


# --- event types whose merge rule is only inferred ------------------------------------------


@pytest.mark.parametrize("event_type", NEW_EVENT_TYPES)
def test_new_event_types_are_verified_unconfirmed(real_raw, ring, test_signer, event_type):
    """Every hash and signature holds, the state signed: verified and kept, saying the
    merge is inferred and that the inferred rule recomputes exactly the signed state."""
    for raw in real_raw.values():
        verdict = verify_bundle(with_new_event(raw, test_signer, event_type), ring)
        assert (verdict.status, verdict.reason) == ("verified", "")
        assert (verdict.merge_confirmed, verdict.inferred_types, verdict.merge_inferred_match) == (
            False,
            (event_type,),
            True,
        )
        assert verdict.as_dict()["inferred_types"] == [event_type]
    confirmed = verify_bundle(next(iter(real_raw.values())), ring)
    assert (confirmed.merge_confirmed, confirmed.inferred_types, confirmed.merge_inferred_match) == (True, (), None)
    assert "merge_confirmed" not in confirmed.as_dict()


def test_a_signed_state_the_inferred_rule_does_not_give_is_kept_and_says_so(real_raw, ring, test_signer):
    """The registry merged the new type its own way (here: not into the list the rule
    infers): its signed state is archived, merge_inferred_match false."""
    bundle = json.loads(with_new_event(next(iter(real_raw.values())), test_signer, "correction"))
    entry = bundle["state"]["current"]["corrections"].pop()
    bundle["state"]["current"]["record_created"]["corrections"] = [entry]
    verdict = verify_bundle(compact_json(_resigned(bundle, test_signer, keep_state=True)), ring)
    assert (verdict.status, verdict.merge_confirmed, verdict.merge_inferred_match) == ("verified", False, False)


def test_an_unknown_event_type_is_inferred_too(real_raw, ring, test_signer):
    verdict = verify_bundle(with_new_event(next(iter(real_raw.values())), test_signer, "peer_review"), ring)
    assert (verdict.status, verdict.inferred_types, verdict.merge_inferred_match) == (
        "verified",
        ("peer_review",),
        True,
    )


@pytest.mark.parametrize(
    "name",
    [
        "receipt_signature_flipped",
        "event_created_at_changed",
        "event_signature_flipped",
        "state_count_changed",
        "built_at_changed",
        "bundle_signature_flipped",
    ],
)
def test_inferred_merge_still_checks_every_signature_and_hash(real_raw, ring, test_signer, name):
    """An inferred event type excuses nothing: any other fault is rejected for that fault."""
    attested = with_new_event(next(iter(real_raw.values())), test_signer)
    verdict = verify_bundle(tampered(attested, name), ring)
    assert (verdict.reason, verdict.path) == (MUTATIONS[name].reason, MUTATIONS[name].path)


def test_inferred_merge_through_the_cli(tmp_path, real_docs, test_signer):
    bundle = tmp_path / "attested.json"
    bundle.write_bytes(with_new_event(compact_json(next(iter(real_docs.values()))), test_signer, "author_attestation"))
    keys = write_keyring(tmp_path / "test.json", test_signer.public_document())
    result = run_cli("verify", "--keyring", str(keys), str(bundle))
    assert result.returncode == 0, result.output
    assert "merge inferred (author_attestation; reproduces the signed state)" in result.stdout
    assert result.stdout.splitlines()[-1] == "1 verified (1 with a merge rule only inferred), 0 rejected"
    as_json = run_cli("verify", "--json", "--keyring", str(keys), str(bundle))
    line = json.loads(as_json.stdout.splitlines()[0])
    assert (line["merge_confirmed"], line["inferred_types"], line["merge_inferred_match"]) == (
        False,
        ["author_attestation"],
        True,
    )
