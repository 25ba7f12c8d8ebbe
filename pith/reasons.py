"""The one catalogue of codes: why a document is rejected (``Reason``, with the
exception that carries it) and what an audit or a cosigning finds (``Finding``).

Codes are part of the public interface (they land in the ``verifications`` table, in
``verify --json`` and ``audit --json`` output): add new ones, never rename old ones. A
code means one thing wherever it is given: a finding that is also a rejection
(``chain_broken``, ``checkpoint_invalid``) is spelled as the rejection. Both catalogues
are tested against the docs' tables, both ways (tests/test_codes.py).
"""

from enum import StrEnum


class Reason(StrEnum):
    """A rejection's code: the value is what tables and JSON output carry."""

    MALFORMED_JSON = "malformed_json"
    INVALID_UTF8 = "invalid_utf8"
    INVALID_UNICODE = "invalid_unicode"
    NON_FINITE_NUMBER = "non_finite_number"
    DUPLICATE_KEY = "duplicate_key"
    TOO_DEEP = "too_deep"
    TOO_LARGE = "too_large"
    NOT_COMPACT = "not_compact"
    SCHEMA_VIOLATION = "schema_violation"
    UNSUPPORTED_ALGORITHM = "unsupported_algorithm"
    CANONICAL_HASH_MISMATCH = "canonical_hash_mismatch"
    RECORD_MISMATCH = "record_mismatch"
    PITH_NUMBER_MISMATCH = "pith_number_mismatch"
    UNKNOWN_KEY = "unknown_key"
    KEY_FINGERPRINT_MISMATCH = "key_fingerprint_mismatch"
    KEY_RETIRED = "key_retired"
    KEY_NOT_YET_VALID = "key_not_yet_valid"
    UNSUPPORTED_VERSION = "unsupported_version"
    WRONG_KEY_ROLE = "wrong_key_role"
    RECEIPT_SIGNATURE_INVALID = "receipt_signature_invalid"
    EVENT_HASH_MISMATCH = "event_hash_mismatch"
    EVENT_ID_MISMATCH = "event_id_mismatch"
    EVENT_SIGNATURE_INVALID = "event_signature_invalid"
    SUBJECT_MISMATCH = "subject_mismatch"
    CHAIN_BROKEN = "chain_broken"
    STATE_HASH_MISMATCH = "state_hash_mismatch"
    STATE_MISMATCH = "state_mismatch"
    MERGE_UNVERIFIED = "merge_unverified"
    BUNDLE_HASH_MISMATCH = "bundle_hash_mismatch"
    BUNDLE_SIGNATURE_INVALID = "bundle_signature_invalid"
    MANIFEST_HASH_MISMATCH = "manifest_hash_mismatch"
    MANIFEST_SIGNATURE_INVALID = "manifest_signature_invalid"
    NOT_APPEND_ONLY = "not_append_only"
    EQUIVOCATION = "equivocation"
    ATTESTATION_MISMATCH = "attestation_mismatch"
    CHECKPOINT_INVALID = "checkpoint_invalid"
    CHECKPOINT_SIGNATURE_INVALID = "checkpoint_signature_invalid"
    INCLUSION_PROOF_INVALID = "inclusion_proof_invalid"
    QUORUM_UNMET = "quorum_unmet"
    RELEASE_HASH_MISMATCH = "release_hash_mismatch"
    RELEASE_SIGNATURE_INVALID = "release_signature_invalid"
    RELEASE_FILE_MISMATCH = "release_file_mismatch"
    RELEASE_UNLISTED_FILE = "release_unlisted_file"
    WACZ_MALFORMED = "wacz_malformed"
    WACZ_UNSAFE_MEMBER = "wacz_unsafe_member"
    WACZ_RESOURCE_MISMATCH = "wacz_resource_mismatch"
    FETCH_FAILED = "fetch_failed"
    WRONG_RECORD = "wrong_record"


REASONS: dict[Reason, str] = {
    Reason.MALFORMED_JSON: "not parseable as JSON (syntax error or truncated)",
    Reason.INVALID_UTF8: "bytes are not valid UTF-8",
    Reason.INVALID_UNICODE: "a string holds a lone surrogate that has no UTF-8 form",
    Reason.NON_FINITE_NUMBER: "NaN or Infinity literal, or a number that overflows a double",
    Reason.DUPLICATE_KEY: "an object names the same key twice",
    Reason.TOO_DEEP: "nesting deeper than the configured limit",
    Reason.TOO_LARGE: "document larger than the configured byte limit",
    Reason.NOT_COMPACT: "document much larger than its compact JSON encoding (padded with whitespace)",
    Reason.SCHEMA_VIOLATION: "a required field is missing or has the wrong type or value",
    Reason.UNSUPPORTED_ALGORITHM: "a signature or key uses an algorithm other than ed25519",
    Reason.CANONICAL_HASH_MISMATCH: "canonical_sha256 does not hash the canonical record",
    Reason.RECORD_MISMATCH: "a copy of the canonical record differs from the bundle's",
    Reason.PITH_NUMBER_MISMATCH: "a Pith number, short number or pith_short alias is not derived from the hash",
    Reason.UNKNOWN_KEY: "a signature names a key that is not in the pinned keyring",
    Reason.KEY_FINGERPRINT_MISMATCH: "a key's hex, fingerprint or pinned identity disagree",
    Reason.KEY_RETIRED: "a signature is by a pinned key whose validity window had closed when the signed thing was "
    "created or signed (the registry rotated to another key)",
    Reason.KEY_NOT_YET_VALID: "a signature is dated before the pinned key's validity window opens",
    Reason.UNSUPPORTED_VERSION: "the bundle declares a bundle_version or merge_version this archiver does not know: "
    "an upgrade is needed, nothing is guessed",
    Reason.WRONG_KEY_ROLE: "a signature is by a pinned key whose role may not sign it (an archive key signing a "
    "registry record, or a registry key signing a manifest or attestation)",
    Reason.RECEIPT_SIGNATURE_INVALID: "the receipt signature does not verify under the pinned key",
    Reason.EVENT_HASH_MISMATCH: "an event's content_sha256 does not hash its content",
    Reason.EVENT_ID_MISMATCH: "an event_id is not 'sha256:' + content_sha256",
    Reason.EVENT_SIGNATURE_INVALID: "an event signature does not verify under the pinned key",
    Reason.SUBJECT_MISMATCH: "an event's subject_pith_number is not the bundle's Pith number",
    Reason.CHAIN_BROKEN: "an attestation's prev_event does not name the previous attestation",
    Reason.STATE_HASH_MISMATCH: "state_sha256 does not hash the state",
    Reason.STATE_MISMATCH: "the state differs from the one recomputed by the deterministic merge",
    # no longer given (such bundles are verified with merge_confirmed false); kept for older archives' tables
    Reason.MERGE_UNVERIFIED: "the bundle has event types whose merge rule is only inferred",
    Reason.BUNDLE_HASH_MISMATCH: "bundle_sha256 does not hash the bundle",
    Reason.BUNDLE_SIGNATURE_INVALID: "the bundle signature does not verify under the pinned key",
    Reason.MANIFEST_HASH_MISMATCH: "an archive manifest's manifest_sha256 does not hash the manifest",
    Reason.MANIFEST_SIGNATURE_INVALID: "an archive manifest's signature does not verify under the pinned key",
    # archive history and storage attestations
    Reason.NOT_APPEND_ONLY: "a new version of a record lacks events of its archived current version, or was built "
    "before it (a fork or a rollback): kept as evidence, not made current",
    Reason.EQUIVOCATION: "two resolvers served copies of one record whose events fork (neither is a prefix of the "
    "other): a split view; both copies kept as evidence",
    Reason.ATTESTATION_MISMATCH: "a storage attestation names an object that its run's manifest does not list "
    "as attested",
    # transparency logs: checkpoints and inclusion proofs (docs/TRANSPARENCY.md)
    Reason.CHECKPOINT_INVALID: "a checkpoint is not a signed note of origin, tree size and root hash lines",
    Reason.CHECKPOINT_SIGNATURE_INVALID: "a checkpoint carries no signature that verifies under the log's pinned key",
    Reason.INCLUSION_PROOF_INVALID: "an inclusion proof does not lead from the attestation to the checkpoint's root",
    Reason.QUORUM_UNMET: "a checkpoint's witness cosignatures do not meet the quorum of the policy it is checked under",
    # dataset releases (release.json)
    Reason.RELEASE_HASH_MISMATCH: "a release's release_sha256 does not hash its release.json",
    Reason.RELEASE_SIGNATURE_INVALID: "a release's signature does not verify under the pinned archive key",
    Reason.RELEASE_FILE_MISMATCH: "a file a release lists is missing, or differs from its size and sha256",
    Reason.RELEASE_UNLISTED_FILE: "a release's data/ or index/ folder holds a file its release.json does not list",
    # WACZ packages (verify X.wacz)
    Reason.WACZ_MALFORMED: "a WACZ is not a readable ZIP, or lacks datapackage.json or datapackage-digest.json, or "
    "one of them is not a JSON object",
    Reason.WACZ_UNSAFE_MEMBER: "a WACZ member's name leaves the package or repeats, or it is encrypted or packed "
    "otherwise than stored or deflated, or it declares more bytes than its packed size can hold (a zip bomb)",
    Reason.WACZ_RESOURCE_MISMATCH: "a WACZ member differs from the sha256 and size datapackage.json gives, is "
    "missing, or is not listed there",
    # crawl outcomes recorded in the verifications table (no usable bytes to judge)
    Reason.FETCH_FAILED: "the document could not be fetched (HTTP error, timeout, dropped or truncated body)",
    Reason.WRONG_RECORD: "a source answered for one record with another record's document (its pith_number names "
    "another record): a bad copy from that source, never archived as the record asked for",
}


class Finding(StrEnum):
    """An audit finding's code (``storage.audit``, ``storage.log_proofs``), or a witness's
    answer to ``cosign``: the first word of each line those commands print."""

    MANIFEST_INVALID = "manifest_invalid"
    MANIFEST_UNPINNED = "manifest_unpinned"
    MISSING = "missing"
    SIZE_MISMATCH = "size_mismatch"
    HASH_MISMATCH = "hash_mismatch"
    BUNDLE_REJECTED = "bundle_rejected"
    ROWS_MISMATCH = "rows_mismatch"
    ATTESTATION_INVALID = "attestation_invalid"
    CHAIN_BROKEN = Reason.CHAIN_BROKEN.value
    WARC_INVALID = "warc_invalid"
    ORPHAN = "orphan"
    # the transparency-log checks (storage.log_proofs); the first two are also what a witness reports
    LOG_ROLLED_BACK = "log_rolled_back"
    LOG_FORKED = "log_forked"
    LOG_BROKEN = "log_broken"
    CHECKPOINT_INVALID = Reason.CHECKPOINT_INVALID.value
    TILE_MISMATCH = "tile_mismatch"
    CHECKPOINT_UNPUBLISHED = "checkpoint_unpublished"
    # a witness's other answers to cosign (storage.transparency.cosign)
    WITNESS_REFUSED = "witness_refused"
    WITNESS_UNREACHABLE = "witness_unreachable"


class Rejected(Exception):
    """A document failed a check: ``reason`` is a code from REASONS, ``path`` names
    what broke (``events[1].content_sha256``), ``detail`` says how, for people."""

    def __init__(self, reason: Reason, path: str = "", detail: str = ""):
        reason = Reason(reason)  # ValueError for a code that is not one
        super().__init__(f"{reason} at {path or '<document>'}: {detail or REASONS[reason]}")
        self.reason = reason
        self.path = path
        self.detail = detail or REASONS[reason]
