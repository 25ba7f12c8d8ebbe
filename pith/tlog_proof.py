"""Offline proofs in the C2SP ``tlog-proof`` format: a storage attestation, its index,
the inclusion proof and the (cosigned) checkpoint, checked against a witness policy
(``pith.policy``) with nothing else::

    c2sp.org/tlog-proof@v1
    extra <base64 of the log entry: the attestation's canonical JSON>
    index <leaf index>
    <base64 proof hash, one a line, from the leaf up>

    <the checkpoint, a signed note with its cosignatures>
"""

import base64
import binascii
from typing import Any

from .attestation import check_attestation
from .checkpoint import Checkpoint, parse_checkpoint, uint64
from .keyring import ARCHIVE, Keyring, PinnedKey
from .merkle import HASH_SIZE, leaf_hash, verify_inclusion
from .numbers import key_fingerprints
from .parse import parse
from .policy import Policy
from .reasons import Reason, Rejected
from .signed_note import read_note, verifies

HEADER = "c2sp.org/tlog-proof@v1"
MAX_PROOF_BYTES = 1 << 20


def tlog_proof(entry: bytes, index: int, proof: list[bytes], note: str) -> str:
    lines = [HEADER, f"extra {base64.b64encode(entry).decode('ascii')}", f"index {index}"]
    lines += [base64.b64encode(node).decode("ascii") for node in proof]
    return "\n".join(lines) + "\n\n" + note


def check_tlog_proof(text: str, policy: Policy) -> tuple[Checkpoint, dict[str, Any], set[str]]:
    """``(checkpoint, attestation, witnesses that cosigned)`` once the proof holds:
    the checkpoint's note is signed, over its exact text, by a log of the policy, the
    entry (a storage attestation signed by that log's key) is at the index, and the
    cosignatures meet the quorum."""
    head, _, note = text.partition("\n\n")
    lines = head.split("\n")
    if len(lines) < 3 or lines[0] != HEADER or not lines[1].startswith("extra ") or not lines[2].startswith("index "):
        raise Rejected(Reason.SCHEMA_VIOLATION, "proof", f"expected {HEADER}, an extra line and an index line")
    entry, index = _b64(lines[1][6:], "proof.extra", None), uint64(lines[2][6:])
    if index is None:
        raise Rejected(Reason.SCHEMA_VIOLATION, "proof.index", f"not an ASCII decimal below 2^64: {lines[2][6:40]!r}")
    path = [_b64(line, f"proof.hashes[{at}]", HASH_SIZE) for at, line in enumerate(lines[3:])]
    signed = read_note(note)
    checkpoint = parse_checkpoint(signed.text)
    logged = policy.logs.get(checkpoint.origin)
    if logged is None:
        raise Rejected(Reason.UNKNOWN_KEY, "checkpoint.origin", f"the policy lists no log {checkpoint.origin}")
    if not verifies(signed, logged[0]):
        raise Rejected(Reason.CHECKPOINT_SIGNATURE_INVALID, "checkpoint", f"not signed by the log {checkpoint.origin}")
    attestation = parse(entry).data
    if not isinstance(attestation, dict) or not isinstance(attestation.get("signature"), dict):
        raise Rejected(Reason.SCHEMA_VIOLATION, "proof.extra", "not a signed storage attestation")
    signed_by = attestation["signature"].get("key_id")
    raw = logged[0].public_raw
    pinned = PinnedKey(str(signed_by), raw, key_fingerprints(raw)["fingerprint_sha256_hex"], ARCHIVE)
    check_attestation(attestation, Keyring([pinned]), "extra")
    if not verify_inclusion(leaf_hash(entry), index, checkpoint.size, path, checkpoint.root):
        raise Rejected(
            Reason.INCLUSION_PROOF_INVALID, "proof", f"does not lead from leaf {index} to the checkpoint's root"
        )
    cosigned = policy.cosigned(signed)
    if not policy.met(cosigned):
        raise Rejected(
            Reason.QUORUM_UNMET,
            "checkpoint",
            f"cosigned by {', '.join(sorted(cosigned)) or 'no witness'}, short of the quorum {policy.quorum}",
        )
    return checkpoint, attestation, cosigned


def _b64(text: str, path: str, size: int | None) -> bytes:
    try:
        data = base64.b64decode(text, validate=True)
    except binascii.Error:
        data = b""
    if not data or (size is not None and len(data) != size):
        raise Rejected(Reason.SCHEMA_VIOLATION, path, "not base64" + (f" of {size} bytes" if size else ""))
    return data
