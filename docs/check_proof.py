#!/usr/bin/env python3
"""Check a pith-archiver inclusion proof with nothing but the standard library and an
Ed25519 implementation (PyNaCl): no pith-archiver code. See docs/TRANSPARENCY.md.

    pip install pynacl
    pith-archiver prove ARCHIVE RECORD --json > proof.json
    python3 check_proof.py proof.json ARCHIVE/keys/*.json   # the key documents: the attestation's is used

Exit 0 and one line when the proof holds; exit 1 and the reason when it does not.
"""

import base64
import hashlib
import json
import sys

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey


class ProofRejected(Exception):
    pass


def require(condition: bool, why: str) -> None:
    if not condition:
        raise ProofRejected(why)


def canonical(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def ed25519_valid(public_key: bytes, message: bytes, signature: bytes) -> bool:
    try:
        VerifyKey(public_key).verify(message, signature)
    except (BadSignatureError, ValueError):
        return False
    return True


def check_attestation(attestation: dict, key_id: str, public_key: bytes) -> bytes:
    """The log entry of a storage attestation signed by the key: its canonical JSON."""
    content = {k: v for k, v in attestation.items() if k not in ("signature", "content_sha256", "event_id")}
    digest = hashlib.sha256(canonical(content)).digest()
    require(attestation["content_sha256"] == digest.hex(), "content_sha256 does not hash the attestation")
    require(attestation["event_id"] == "sha256:" + digest.hex(), "event_id is not sha256:<content_sha256>")
    signature = attestation["signature"]
    require(signature["key_id"] == key_id and signature["algorithm"] == "ed25519", "not signed by the given key")
    require(
        ed25519_valid(public_key, digest, base64.b64decode(signature["signature_b64"])),
        "the attestation's signature does not verify",
    )
    return canonical(attestation)


def check_checkpoint(note: str, public_key: bytes) -> tuple[int, bytes]:
    """``(tree size, root hash)`` of a checkpoint note signed by the key under the log's
    name, its origin (C2SP tlog-checkpoint in a C2SP signed note)."""
    cut = note.rfind("\n\n")
    require(cut > 0 and note.endswith("\n"), "not a signed note")
    text, signature_lines = note[: cut + 1], note[cut + 2 : -1].split("\n")
    origin, size, root = text.split("\n")[:3]
    key_hash = hashlib.sha256(origin.encode("utf-8") + b"\n" + b"\x01" + public_key).digest()[:4]
    signed = False
    for line in signature_lines:  # every line after the blank line is a signature: nothing unsigned
        dash, _, rest = line.partition(" ")
        name, _, blob = rest.partition(" ")
        require(dash == "\u2014" and name != "" and blob != "", f"not a signature line: {line[:40]!r}")
        blob = base64.b64decode(blob)
        if name == origin and blob[:4] == key_hash:
            signed = ed25519_valid(public_key, text.encode("utf-8"), blob[4:])
    require(signed, "the checkpoint carries no valid signature of the key")
    ascii_decimal = size.isascii() and size.isdigit() and (size == "0" or not size.startswith("0"))
    require(ascii_decimal, "the tree size is not an ASCII decimal")
    root_hash = base64.b64decode(root)
    require(len(root_hash) == 32, "the root is not a 32-byte hash")
    return int(size), root_hash


def root_from_inclusion(entry: bytes, index: int, size: int, path: list[bytes]) -> bytes:
    """RFC 9162 section 2.1.3.2: the root the path leads to from the entry's leaf hash."""
    require(0 <= index < size, "the leaf index is outside the tree")
    fn, sn = index, size - 1
    node = hashlib.sha256(b"\x00" + entry).digest()
    for sibling in path:
        require(sn > 0, "the path is too long")
        if fn % 2 == 1 or fn == sn:
            node = hashlib.sha256(b"\x01" + sibling + node).digest()
            while fn % 2 == 0 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            node = hashlib.sha256(b"\x01" + node + sibling).digest()
        fn, sn = fn >> 1, sn >> 1
    require(sn == 0, "the path is too short")
    return node


def check(proof: dict, key_document: dict) -> str:
    """What the proof shows, once it holds under the archive's key document."""
    key_id, public_key = key_document["key_id"], base64.b64decode(key_document["public_key_b64"])
    attestation = proof["attestation"]
    entry = check_attestation(attestation, key_id, public_key)
    require(attestation["subject_pith_number"] == proof["pith_number"], "the attestation is of another record")
    size, root = check_checkpoint(proof["checkpoint"], public_key)
    require(proof["tree_size"] == size, "the proof's tree size is not the checkpoint's")
    path = [base64.b64decode(node) for node in proof["inclusion_proof"]]
    require(
        root_from_inclusion(entry, proof["leaf_index"], size, path) == root,
        "the inclusion proof does not lead to the checkpoint's root",
    )
    return (
        f"{proof['pith_number']}: stored as {attestation['payload']['storage_uri']}, "
        f"leaf {proof['leaf_index']} of {size} in the log of {key_id}"
    )


def key_named(proof: dict, key_documents: list[dict]) -> dict:
    """Of the key documents given (an archive's keys/*.json), the one the attestation names."""
    named = proof["attestation"]["signature"]["key_id"]
    for key_document in key_documents:
        if key_document.get("key_id") == named:
            return key_document
    raise ProofRejected(f"signed by {named}, and no key document given is {named}'s")


if __name__ == "__main__":
    keys = []
    with open(sys.argv[1], encoding="utf-8") as proof_file:
        proof_document = json.load(proof_file)
    for key_path in sys.argv[2:]:
        with open(key_path, encoding="utf-8") as key_file:
            keys.append(json.load(key_file))
    try:
        print(check(proof_document, key_named(proof_document, keys)))
    except (ProofRejected, AttributeError, KeyError, TypeError, ValueError) as exc:
        sys.exit(f"REJECTED: {exc}")
