"""Inclusion proofs of storage attestations: one JSON document that lets anyone check,
offline and in O(log n), that an attestation is in its archiver key's log as a signed
checkpoint pins it.

The document holds ``pith_number``, the whole signed ``attestation``, its
``leaf_index`` in the key's log, the ``tree_size`` of the checkpoint, the
``inclusion_proof`` (base64 hashes, from the leaf up, as RFC 9162 2.1.3) and the
``checkpoint`` (the signed note text). The log's entry is the attestation's canonical
JSON (its line in the feed), so the leaf hash is ``SHA-256(0x00 || canon(attestation))``.
"""

import base64
import binascii
from typing import Any

from .attestation import check_attestation
from .canonical import canon
from .checkpoint import Checkpoint, open_checkpoint
from .keyring import Keyring
from .merkle import HASH_SIZE, leaf_hash, verify_inclusion
from .reasons import Reason, Rejected

MEMBERS = ("pith_number", "attestation", "leaf_index", "tree_size", "inclusion_proof", "checkpoint")


def proof_document(
    attestation: dict[str, Any], leaf_index: int, proof: list[bytes], note: str, tree_size: int
) -> dict[str, Any]:
    return {
        "pith_number": attestation["subject_pith_number"],
        "attestation": attestation,
        "leaf_index": leaf_index,
        "tree_size": tree_size,
        "inclusion_proof": [base64.b64encode(node).decode("ascii") for node in proof],
        "checkpoint": note,
    }


def check_proof(document: object, keyring: Keyring) -> Checkpoint:
    """The checkpoint the proof holds against, once the attestation verifies under a
    pinned key, the checkpoint is signed by that same key and the proof leads from the
    attestation to the checkpoint's root; Rejected names the first thing that fails."""
    if not isinstance(document, dict) or sorted(document) != sorted(MEMBERS):
        raise Rejected(Reason.SCHEMA_VIOLATION, "proof", f"expected an object of exactly {', '.join(MEMBERS)}")
    for name, kind in (
        ("pith_number", str),
        ("leaf_index", int),
        ("tree_size", int),
        ("inclusion_proof", list),
        ("checkpoint", str),
    ):
        if not isinstance(document[name], kind) or isinstance(document[name], bool):
            raise Rejected(Reason.SCHEMA_VIOLATION, f"proof.{name}", f"expected {kind.__name__}")
    check_attestation(document["attestation"], keyring, "attestation")
    attestation = document["attestation"]
    if attestation["subject_pith_number"] != document["pith_number"]:
        raise Rejected(Reason.SUBJECT_MISMATCH, "attestation.subject_pith_number", f"not {document['pith_number']}")
    checkpoint, key = open_checkpoint(document["checkpoint"], keyring)
    if key.key_id != attestation["signature"]["key_id"]:
        raise Rejected(
            Reason.INCLUSION_PROOF_INVALID,
            "checkpoint",
            f"is the log of {key.key_id}, the attestation is signed by {attestation['signature']['key_id']}",
        )
    if document["tree_size"] != checkpoint.size:
        raise Rejected(
            Reason.INCLUSION_PROOF_INVALID, "proof.tree_size", f"the checkpoint's tree has {checkpoint.size}"
        )
    path = [_hash(node, f"proof.inclusion_proof[{i}]") for i, node in enumerate(document["inclusion_proof"])]
    if not verify_inclusion(
        leaf_hash(canon(attestation)), document["leaf_index"], checkpoint.size, path, checkpoint.root
    ):
        raise Rejected(
            Reason.INCLUSION_PROOF_INVALID,
            "proof.inclusion_proof",
            f"does not lead from leaf {document['leaf_index']} to the root of {checkpoint.size} leaves",
        )
    return checkpoint


def _hash(encoded: object, path: str) -> bytes:
    try:
        node = base64.b64decode(encoded, validate=True) if isinstance(encoded, str) else b""
    except binascii.Error:
        node = b""
    if len(node) != HASH_SIZE:
        raise Rejected(Reason.SCHEMA_VIOLATION, path, "expected the base64 of a 32-byte hash")
    return node
