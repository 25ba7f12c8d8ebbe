"""Signing a new open graph event in the registry's format: what the archiver's
storage attestations are (``pith.attestation``), and what the test kit mints records with."""

from typing import Any

from .signing import Signer


def new_event(
    signer: Signer,
    event_type: str,
    subject: str,
    target: str,
    payload: dict[str, Any],
    created_at: str,
    signed_at: str,
    prev_event: str | None = None,
    signer_id: str = "pith.science",
    signer_type: str = "pith_registry",
    exact: bool = False,
) -> dict[str, Any]:
    """``exact``: the payload holds no float (pith.canonical)."""
    event: dict[str, object] = {
        "event_type": event_type,
        "subject_pith_number": subject,
        "target": target,
        "payload": payload,
        "signer": {
            "signer_id": signer_id,
            "signer_type": signer_type,
            "key_id": signer.key_id,
            "public_key_fingerprint": signer.fingerprint,
        },
        "created_at": created_at,
        "supersedes": [],
        "prev_event": prev_event,
        "schema_version": "1.0",
    }
    return signer.sign_event(event, signed_at, exact)
