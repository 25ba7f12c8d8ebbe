"""Stable reason codes for rejected documents, and the exception that carries them.

Codes are part of the public interface (they land in the ``verifications`` table and
in ``verify --json`` output): add new ones, never rename old ones.
"""

REASONS = {
    "malformed_json": "not parseable as JSON (syntax error or truncated)",
    "invalid_utf8": "bytes are not valid UTF-8",
    "invalid_unicode": "a string holds a lone surrogate that has no UTF-8 form",
    "non_finite_number": "NaN or Infinity literal, or a number that overflows a double",
    "duplicate_key": "an object names the same key twice",
    "too_deep": "nesting deeper than the configured limit",
    "too_large": "document larger than the configured byte limit",
    "not_compact": "document much larger than its compact JSON encoding (padded with whitespace)",
    "schema_violation": "a required field is missing or has the wrong type or value",
    "unsupported_algorithm": "a signature or key uses an algorithm other than ed25519",
    "canonical_hash_mismatch": "canonical_sha256 does not hash the canonical record",
    "record_mismatch": "a copy of the canonical record differs from the bundle's",
    "pith_number_mismatch": "a Pith number, short number or pith_short alias is not derived from the hash",
    "unknown_key": "a signature names a key that is not in the pinned keyring",
    "key_fingerprint_mismatch": "a key's hex, fingerprint or pinned identity disagree",
    "key_retired": "a signature is by a pinned key whose validity window had closed when the signed thing was "
    "created or signed (the registry rotated to another key)",
    "key_not_yet_valid": "a signature is dated before the pinned key's validity window opens",
    "unsupported_version": "the bundle declares a bundle_version or merge_version this archiver does not know: "
    "an upgrade is needed, nothing is guessed",
    "wrong_key_role": "a signature is by a pinned key whose role may not sign it (an archive key signing a "
    "registry record, or a registry key signing a manifest or attestation)",
    "receipt_signature_invalid": "the receipt signature does not verify under the pinned key",
    "event_hash_mismatch": "an event's content_sha256 does not hash its content",
    "event_id_mismatch": "an event_id is not 'sha256:' + content_sha256",
    "event_signature_invalid": "an event signature does not verify under the pinned key",
    "subject_mismatch": "an event's subject_pith_number is not the bundle's Pith number",
    "chain_broken": "an attestation's prev_event does not name the previous attestation",
    "state_hash_mismatch": "state_sha256 does not hash the state",
    "state_mismatch": "the state differs from the one recomputed by the deterministic merge",
    # no longer given (such bundles are verified with merge_confirmed false); kept for older archives' tables
    "merge_unverified": "the bundle has event types whose merge rule is only inferred",
    "bundle_hash_mismatch": "bundle_sha256 does not hash the bundle",
    "bundle_signature_invalid": "the bundle signature does not verify under the pinned key",
    "manifest_hash_mismatch": "an archive manifest's manifest_sha256 does not hash the manifest",
    "manifest_signature_invalid": "an archive manifest's signature does not verify under the pinned key",
    # archive history and storage attestations
    "not_append_only": "a new version of a record lacks events of its archived current version, or was built "
    "before it (a fork or a rollback): kept as evidence, not made current",
    "equivocation": "two resolvers served copies of one record whose events fork (neither is a prefix of the "
    "other): a split view; both copies kept as evidence",
    "attestation_mismatch": "a storage attestation names an object that its run's manifest does not list as attested",
    # transparency logs: checkpoints and inclusion proofs (docs/TRANSPARENCY.md)
    "checkpoint_invalid": "a checkpoint is not a signed note of origin, tree size and root hash lines",
    "checkpoint_signature_invalid": "a checkpoint carries no signature that verifies under the log's pinned key",
    "inclusion_proof_invalid": "an inclusion proof does not lead from the attestation to the checkpoint's root",
    # dataset releases (release.json)
    "release_hash_mismatch": "a release's release_sha256 does not hash its release.json",
    "release_signature_invalid": "a release's signature does not verify under the pinned archive key",
    "release_file_mismatch": "a file a release lists is missing, or differs from its size and sha256",
    # crawl outcomes recorded in the verifications table (no usable bytes to judge)
    "fetch_failed": "the document could not be fetched (HTTP error, timeout, dropped or truncated body)",
}


class Rejected(Exception):
    """A document failed a check: ``reason`` is a code from REASONS, ``path`` names
    what broke (``events[1].content_sha256``), ``detail`` says how, for people."""

    def __init__(self, reason: str, path: str = "", detail: str = ""):
        assert reason in REASONS, reason
        super().__init__(f"{reason} at {path or '<document>'}: {detail or REASONS[reason]}")
        self.reason = reason
        self.path = path
        self.detail = detail or REASONS[reason]
