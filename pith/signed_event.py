"""Checking one signed open graph event: its content hash, its id, its subject and its
signature by a pinned key of the expected role. Bundles hold the registry's events;
storage attestation feeds and repair events are the archive's own (pith.attestation)."""

from typing import Any

from .canonical import canon_sha256
from .keyring import REGISTRY, SIGNATURE_MEMBERS, Keyring
from .reasons import Reason, Rejected
from .schema import need, need_hex, signature_block

EVENT_UNHASHED = ("signature", "content_sha256", "event_id")  # members the content hash leaves out
EVENT_MESSAGE = "open_graph_event_sha256_bytes"  # what an event's signature signs: its content hash


def check_event(
    event: Any, keyring: Keyring, path: str, subject: str | None, exact: bool = False, role: str = REGISTRY
) -> str:
    """Check one signed event (hash, id, subject, signature by a key of ``role``);
    return its content hash. Shared by bundles and by storage attestation feeds."""
    if not isinstance(event, dict):
        raise Rejected(Reason.SCHEMA_VIOLATION, path, "an event is an object")
    prefix = f"{path}."
    need(event, "event_type", str, prefix)
    need(event, "payload", dict, prefix)
    signer = need(event, "signer", dict, prefix)
    content_sha256 = need_hex(event, "content_sha256", prefix)
    content = {k: v for k, v in event.items() if k not in EVENT_UNHASHED}
    if canon_sha256(content, exact) != content_sha256:
        raise Rejected(Reason.EVENT_HASH_MISMATCH, f"{prefix}content_sha256", "does not hash the event")
    if event.get("event_id") != "sha256:" + content_sha256:
        raise Rejected(Reason.EVENT_ID_MISMATCH, f"{prefix}event_id", "expected 'sha256:' + content_sha256")
    if subject is not None and event.get("subject_pith_number") != subject:
        raise Rejected(Reason.SUBJECT_MISMATCH, f"{prefix}subject_pith_number", f"expected {subject}")
    signature = signature_block(event, "signature", EVENT_MESSAGE, prefix)
    if signer.get("key_id") != signature.get("key_id") or signer.get("public_key_fingerprint") != signature.get(
        "public_key_fingerprint"
    ):
        raise Rejected(Reason.KEY_FINGERPRINT_MISMATCH, f"{prefix}signer", "signer and signature name different keys")
    # outside the content hash: in a feed nothing else covers it
    keyring.check_signature(
        signature,
        bytes.fromhex(content_sha256),
        f"{prefix}signature",
        Reason.EVENT_SIGNATURE_INVALID,
        SIGNATURE_MEMBERS,
        role=role,
        created_at=event.get("created_at"),
    )
    return content_sha256
