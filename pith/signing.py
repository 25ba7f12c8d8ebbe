"""Signing: the other side of verification. Used to mint test corpora and to sign
the archiver's own manifests and storage attestations, always in Pith's formats."""

import base64
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

from .canonical import canon_sha256
from .keyring import ARCHIVE, SIGNING_KEY_TYPE, PinnedKey, key_from_entry
from .numbers import key_fingerprints
from .schema import SIGNATURE_STATUS
from .signed_event import EVENT_MESSAGE, EVENT_UNHASHED


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Signer:
    """An Ed25519 private key with the key_id it signs under."""

    key_id: str
    seed: bytes

    @classmethod
    def generate(cls, key_id: str) -> "Signer":
        return cls(key_id, bytes(SigningKey.generate()))

    @classmethod
    def from_seed(cls, key_id: str, seed: bytes) -> "Signer":
        return cls(key_id, bytes(SigningKey(seed)))

    # cached: deriving the key from its seed is a scalar multiplication, and a commit
    # signs one attestation per archived bundle
    @cached_property
    def _key(self) -> SigningKey:
        return SigningKey(self.seed)

    @cached_property
    def public_raw(self) -> bytes:
        return bytes(self._key.verify_key)

    @cached_property
    def fingerprint(self) -> str:
        return key_fingerprints(self.public_raw)["fingerprint_sha256_hex"]

    def pinned(self, role: str = ARCHIVE) -> PinnedKey:
        """The public half pinned with ``role``: by default an archive key, what the
        archiver's own key is (a signer minting test bundles is pinned as ``registry``)."""
        return key_from_entry(self.public_document(), role)

    def public_document(self) -> dict[str, Any]:
        """The public half, shaped like a bundle's ``public_keys`` entry."""
        return {
            "key_id": self.key_id,
            "algorithm": "ed25519",
            "format": "raw",
            "public_key_b64": base64.b64encode(self.public_raw).decode("ascii"),
            **key_fingerprints(self.public_raw),
        }

    def archive_key_document(self) -> dict[str, Any]:
        """The key document an archive publishes (keys/<key_id>.json, ``keys generate``):
        the public half, saying it is an archive key."""
        return {**self.public_document(), "role": ARCHIVE}

    def sign_b64(self, digest_hex: str) -> str:
        return base64.b64encode(self._key.sign(bytes.fromhex(digest_hex)).signature).decode("ascii")

    def signature(self, digest_hex: str, signed_message: str, signed_at: str | None = None) -> dict[str, Any]:
        return {
            "signature_status": SIGNATURE_STATUS,
            "algorithm": "ed25519",
            "key_id": self.key_id,
            "public_key_fingerprint": self.fingerprint,
            "signature_b64": self.sign_b64(digest_hex),
            "signed_message": signed_message,
            "signed_at": signed_at or utc_now(),
        }

    def sign_event(self, event: dict[str, Any], signed_at: str | None = None, exact: bool = False) -> dict[str, Any]:
        """Return ``event`` with content_sha256, event_id and signature set (``exact``:
        the caller knows it holds no float, pith.canonical)."""
        content = {k: v for k, v in event.items() if k not in EVENT_UNHASHED}
        digest = canon_sha256(content, exact)
        signed = dict(content)
        signed["signature"] = self.signature(digest, EVENT_MESSAGE, signed_at)
        signed["content_sha256"] = digest
        signed["event_id"] = "sha256:" + digest
        return signed

    # --- key files ---------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write the private key file (mode 0600): key_id and the 32-byte seed."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "key_type": SIGNING_KEY_TYPE,
            "key_id": self.key_id,
            "algorithm": "ed25519",
            "seed_b64": base64.b64encode(self.seed).decode("ascii"),
            "public": self.archive_key_document(),
        }
        path.touch(mode=0o600, exist_ok=True)
        path.write_text(json.dumps(doc, indent=2) + "\n", "utf-8")

    @classmethod
    def load(cls, path: str | Path) -> "Signer":
        doc = json.loads(Path(path).read_text("utf-8"))
        if doc.get("key_type") != SIGNING_KEY_TYPE:
            raise ValueError(f"{path}: not a pith-archiver signing key file")
        return cls.from_seed(doc["key_id"], base64.b64decode(doc["seed_b64"]))

    def __repr__(self) -> str:  # never let the seed reach a log line
        return f"Signer(key_id={self.key_id!r}, fingerprint={self.fingerprint!r})"
