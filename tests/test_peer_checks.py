"""What a sync checks on its verifying processes (``storage.syncing.sync.PeerChecks``):
a peer's log entry, under the peer's pinned key only; an object fetched from the peer,
against the entry that names it (its digest, then its bundle's), then under the
registry's keys; what crosses back is the version prepared for the writer, never the
parsed bundle."""

import orjson
import pytest

from pith.canonical import canon, sha256_hex
from pith.keyring import Keyring
from pith.reasons import Finding, Reason
from pith.signing import Signer, utc_now
from pith.verify import verify_bundle
from pith_archiver.ordered_pool import eager_map
from storage.archive import layout
from storage.syncing.peer_log import Attested, LogEntry, PeerFailed
from storage.syncing.sync import PeerChecks
from storage.transparency.attestations import AttestationFeed, Stored
from tests.plugins.archives import corpus_raws, tampered

PEER = Signer.from_seed("peer-key-1", bytes(range(1, 33)))
RUN = "20261128T120000Z-peer-0123abcd"


@pytest.fixture
def checks(corpus_keyring) -> PeerChecks:
    peer_keys = Keyring([PEER.pinned()])
    return PeerChecks(Keyring([*corpus_keyring, *peer_keys]), peer_keys)


@pytest.fixture
def raw(corpus_dir) -> bytes:
    return next(iter(corpus_raws(corpus_dir).values()))


def attested(raw: bytes, keyring: Keyring, bundle_sha256: str | None = None) -> Attested:
    """The log entry of ``raw``, as the peer attests it (or with another bundle digest)."""
    verdict, digest = verify_bundle(raw, keyring), sha256_hex(raw)
    assert verdict.pith_number and verdict.bundle_sha256
    return Attested(7, verdict.pith_number, layout.raw_bundle(digest), digest, bundle_sha256 or verdict.bundle_sha256)


def entry_of(signer: Signer, raw: bytes, keyring: Keyring) -> bytes:
    """A storage attestation of ``raw`` by ``signer``, as the peer's log holds it."""
    entry, canonical = attested(raw, keyring), verify_bundle(raw, keyring).canonical_sha256
    assert canonical
    stored = Stored(entry.pith_number, entry.bundle_sha256, canonical, entry.raw_path, entry.raw_sha256, len(raw))
    (event,) = AttestationFeed(signer, "file:///peer", None).seal([(stored, utc_now())], RUN)
    return canon(event, exact=True)


def test_an_object_as_its_entry_attests_comes_back_prepared_without_its_bundle(checks, raw, corpus_keyring):
    with eager_map(checks, 2) as check_map:  # on two processes, as a sync checks
        (checked,) = check_map([(raw, attested(raw, corpus_keyring))])
    assert checked.verdict.ok and checked.verdict.bundle is None and checked.raw_sha256 == sha256_hex(raw)
    assert checked.prepared is not None and checked.prepared.verdict == checked.verdict
    assert checked.prepared.stored("p").raw_sha256 == sha256_hex(raw)


def test_an_object_that_is_not_the_one_its_entry_attests_is_rejected(checks, raw, corpus_keyring):
    other = tampered(raw)
    checked = checks((other, attested(raw, corpus_keyring)))
    assert checked.prepared is None and checked.raw_sha256 == sha256_hex(other)
    assert (checked.verdict.reason, checked.verdict.path) == (Reason.ATTESTATION_MISMATCH, "raw_sha256")


def test_an_object_whose_bundle_is_not_the_attested_one_is_rejected_though_it_verifies(checks, raw, corpus_keyring):
    checked = checks((raw, attested(raw, corpus_keyring, bundle_sha256="ab" * 32)))
    assert checked.prepared is None and not checked.verdict.ok
    assert (checked.verdict.reason, checked.verdict.path) == (Reason.ATTESTATION_MISMATCH, "bundle_sha256")


def test_an_object_that_does_not_verify_is_rejected_with_its_reason(checks, raw, corpus_keyring):
    other = tampered(raw)
    checked = checks((other, Attested(7, "", layout.raw_bundle(sha256_hex(other)), sha256_hex(other), "ab" * 32)))
    assert checked.prepared is None and checked.verdict.bundle is None
    assert checked.verdict.reason not in ("", Reason.ATTESTATION_MISMATCH)


def test_a_log_entry_signed_by_the_logs_key_gives_its_spool_line(checks, raw, corpus_keyring):
    line = checks(LogEntry(entry_of(PEER, raw, corpus_keyring), 7, "peer-origin", PEER.key_id))
    assert isinstance(line, bytes) and line.endswith(b"\n")
    assert Attested(*orjson.loads(line)) == attested(raw, corpus_keyring)


def test_a_log_entry_signed_by_a_key_not_pinned_for_the_peer_fails_the_peer(checks, raw, corpus_keyring):
    stranger = Signer.from_seed("stranger", bytes(range(3, 35)))
    entry = LogEntry(entry_of(stranger, raw, corpus_keyring), 7, "peer-origin", PEER.key_id)
    with pytest.raises(PeerFailed) as failed:
        checks(entry)
    assert failed.value.code == Finding.ATTESTATION_INVALID
    with eager_map(checks, 2) as check_map, pytest.raises(PeerFailed) as crossed:
        list(check_map([entry]))
    assert str(crossed.value) == str(failed.value)  # it crosses back from the checking process whole
