"""Pinned Ed25519 keys. Trust comes from here, never from the keys a bundle carries.

Every pinned key has a role, the one kind of record it may sign: a ``registry`` key
signs bundles (receipts, registry events, the bundle signature); an ``archive`` key
signs what an archiver writes (manifests, storage attestations, checkpoints). A
signature by a key of the other role is ``wrong_key_role``, so a stolen archiver key,
hot on every worker, cannot forge registry records.

A pinned key may carry a validity window (``not_before``, ``not_after``, or the
registry's ``rotates_at`` as the end): when the registry rotates its key, what the old
key signed before the rotation stays verified, and anything it signs after is
``key_retired``.
"""

import base64
import binascii
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from nacl.bindings import crypto_sign_open
from nacl.exceptions import BadSignatureError

from .numbers import key_fingerprints
from .reasons import Reason, Rejected

REGISTRY_KEY = {
    "key_id": "pith-v1-2026-05",
    "algorithm": "ed25519",
    "public_key_b64": "stVStoiQhXFxp4s2pdzPNoqVNBMojDU/fJ2db5S3CbM=",
    "fingerprint_sha256_hex": "8d4b5ee74e4693bcd1df2446408b0d54",
}


REGISTRY = "registry"
ARCHIVE = "archive"
ROLES = (REGISTRY, ARCHIVE)
A_KEY = {REGISTRY: "a registry key", ARCHIVE: "an archive key"}  # for messages
SIGNING_KEY_TYPE = "pith_archiver_signing_key"  # a private key file (pith.signing.Signer.save)
KEYRING_FORMS = 'give a keyring file {"keys": [...]}, one key document (keys/<key_id>.json) or a private key file'

SIGNATURE_MEMBERS = frozenset(
    {
        "signature_status",
        "algorithm",
        "key_id",
        "public_key_fingerprint",
        "signature_b64",
        "signed_message",
        "signed_at",
    }
)


class KeyringError(ValueError):
    """A keyring file or key entry that cannot be used."""


UNDATED = object()  # a signature whose signed thing carries no date to hold to a window


def instant(text: object) -> datetime | None:
    """An RFC 3339 timestamp as an aware datetime; None when ``text`` is not one."""
    if not isinstance(text, str) or not text[:4].isdigit():
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


@dataclass(frozen=True)
class PinnedKey:
    key_id: str
    raw: bytes
    fingerprint: str  # fingerprint_sha256_hex
    role: str = REGISTRY
    not_before: datetime | None = None  # signatures made earlier are key_not_yet_valid
    not_after: datetime | None = None  # what the key signs dated later is key_retired

    def check_window(self, path: str, created_at: object = UNDATED, signed_at: object = UNDATED) -> None:
        """Hold a signature to this key's validity window. ``created_at`` dates what was
        signed (nothing created after the key retired can carry its signature);
        ``signed_at`` dates the signing itself (both ends of the window apply). Either,
        when given, must be a timestamp once the window bounds it."""
        if self.not_after is None and self.not_before is None:
            return
        for label, text, ends in (("created_at", created_at, False), ("signed_at", signed_at, True)):
            if text is UNDATED or (not ends and self.not_after is None):
                continue
            moment = instant(text)
            if moment is None:
                raise Rejected(Reason.SCHEMA_VIOLATION, path, f"{label} {text!r} is not an RFC 3339 timestamp")
            if self.not_after is not None and moment > self.not_after:
                raise Rejected(
                    Reason.KEY_RETIRED,
                    path,
                    f"{self.key_id} retired at {_stamp(self.not_after)}; this was {label.split('_')[0]} at {text}",
                )
            if ends and self.not_before is not None and moment < self.not_before:
                raise Rejected(
                    Reason.KEY_NOT_YET_VALID,
                    path,
                    f"{self.key_id} is valid from {_stamp(self.not_before)}; this was signed at {text}",
                )

    def verify(self, message: bytes, signature: bytes) -> bool:
        try:
            crypto_sign_open(signature + message, self.raw)
        except (BadSignatureError, ValueError, TypeError):
            return False
        return True

    def document(self) -> dict[str, Any]:
        """This key shaped like a bundle's ``public_keys`` entry (with its window, if any)."""
        window = {
            name: _stamp(value)
            for name, value in (("not_before", self.not_before), ("not_after", self.not_after))
            if value is not None
        }
        return {
            "key_id": self.key_id,
            "algorithm": "ed25519",
            "format": "raw",
            "public_key_b64": base64.b64encode(self.raw).decode("ascii"),
            **key_fingerprints(self.raw),
            **window,
        }


def _stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _window_end(entry: dict[str, Any], name: str) -> datetime | None:
    value = entry.get(name)
    if value is None:
        return None
    moment = instant(value)
    if moment is None:
        raise KeyringError(f"key {entry['key_id']}: {name} {value!r} is not an RFC 3339 timestamp with a zone")
    return moment


def key_from_entry(entry: dict[str, Any], role: str = REGISTRY) -> PinnedKey:
    """Build a key from a ``public_keys``-shaped entry, checking any fingerprints given;
    ``role`` is its role when the entry names none."""
    if not isinstance(entry, dict) or not isinstance(entry.get("key_id"), str):
        raise KeyringError("a key entry needs a string key_id")
    role = entry.get("role", role)
    if role not in ROLES:
        raise KeyringError(f"key {entry['key_id']}: role {role!r} is not one of {', '.join(ROLES)}")
    if entry.get("algorithm", "ed25519") != "ed25519":
        raise KeyringError(f"key {entry['key_id']}: algorithm {entry.get('algorithm')!r} is not ed25519")
    try:
        raw = base64.b64decode(entry.get("public_key_b64", ""), validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise KeyringError(f"key {entry['key_id']}: public_key_b64 is not base64") from None
    if len(raw) != 32:
        raise KeyringError(f"key {entry['key_id']}: an ed25519 public key is 32 bytes, not {len(raw)}")
    derived = key_fingerprints(raw)
    for field, value in derived.items():
        if field in entry and entry[field] != value:
            raise KeyringError(f"key {entry['key_id']}: {field} does not match the key")
    not_before = _window_end(entry, "not_before")
    not_after = _window_end(entry, "not_after") or _window_end(entry, "rotates_at")
    if not_before and not_after and not_before >= not_after:
        raise KeyringError(f"key {entry['key_id']}: not_before is not before its end")
    return PinnedKey(entry["key_id"], raw, derived["fingerprint_sha256_hex"], role, not_before, not_after)


class Keyring:
    """Keys by key_id. A signature naming an absent key_id is ``unknown_key``."""

    def __init__(self, keys: Iterable[PinnedKey] = ()) -> None:
        self._keys: dict[str, PinnedKey] = {}
        for key in keys:
            self.add(key)

    @classmethod
    def default(cls) -> "Keyring":
        return cls([key_from_entry(REGISTRY_KEY)])

    @classmethod
    def build(cls, files: Iterable[str | Path] = (), default_keys: bool = True, role: str | None = None) -> "Keyring":
        """The built-in registry key (unless not ``default_keys``) and the keys of
        ``files``; ``role`` as in ``load``."""
        ring = cls.default() if default_keys else cls()
        for path in files:
            ring.load(path, role)
        return ring

    def add(self, key: PinnedKey) -> None:
        known = self._keys.get(key.key_id)
        if known is not None and known.raw != key.raw:
            raise KeyringError(f"key_id {key.key_id} is pinned twice with different keys")
        if known is not None and known.role != key.role:
            raise KeyringError(
                f"key {key.key_id} is pinned both as {A_KEY[known.role]} and as {A_KEY[key.role]}: a key has one role"
            )
        if known is not None:  # pinned twice: the narrower window of the two holds
            starts = [moment for moment in (known.not_before, key.not_before) if moment is not None]
            ends = [moment for moment in (known.not_after, key.not_after) if moment is not None]
            key = replace(key, not_before=max(starts, default=None), not_after=min(ends, default=None))
        self._keys[key.key_id] = key

    def load(self, path: str | Path, role: str | None = None) -> None:
        """Pin the keys of a keyring file (``{"keys": [...]}``, registry keys unless an
        entry names its ``role``), of one key document (an archive's keys/<key_id>.json
        or ``keys generate`` output: an archive key unless it says otherwise), or the
        public half of an archiver's private key file (an archive key). ``role``, for a
        file given for one purpose, is the role of every entry that names none."""
        try:
            text = Path(path).read_text("utf-8")
        except OSError as exc:
            raise KeyringError(f"{path}: cannot read it ({exc.strerror or exc})") from None
        except ValueError:
            raise KeyringError(f"{path}: not UTF-8 text, so not a keyring; {KEYRING_FORMS}") from None
        self.load_text(str(path), text, role)

    def load_text(self, source: str, text: str, role: str | None = None) -> None:
        """``load``, of a document read from ``source`` (a URL, an S3 object)."""
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise KeyringError(f"{source}: not JSON ({exc}); {KEYRING_FORMS}") from None
        if isinstance(doc, dict) and doc.get("key_type") == SIGNING_KEY_TYPE:
            doc = doc.get("public")
        if isinstance(doc, dict) and isinstance(doc.get("keys"), list):
            entries, role = doc["keys"], role or REGISTRY
        elif isinstance(doc, dict) and "key_id" in doc:
            entries, role = [doc], role or ARCHIVE
        else:
            raise KeyringError(f"{source}: not a keyring; {KEYRING_FORMS}")
        try:
            for entry in entries:
                self.add(key_from_entry(entry, role))
        except KeyringError as exc:
            raise KeyringError(f"{source}: {exc}") from None

    def get(self, key_id: object) -> PinnedKey | None:
        return self._keys.get(key_id) if isinstance(key_id, str) else None

    def __contains__(self, key_id: object) -> bool:
        return self.get(key_id) is not None

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[PinnedKey]:
        return iter(self._keys.values())

    def check_signature(
        self,
        sig: dict[str, Any],
        message: bytes,
        path: str,
        invalid_reason: Reason,
        members: frozenset[str] | None = None,
        *,
        role: str,
        created_at: object = UNDATED,
        signed_at: object = UNDATED,
    ) -> PinnedKey:
        """Verify a signature object (``key_id``, ``public_key_fingerprint``,
        ``algorithm``, ``signature_b64``) over ``message`` with the pinned key, which
        must have ``role`` (a key of the other role is ``wrong_key_role``) and hold
        ``created_at`` / ``signed_at`` in its window (PinnedKey.check_window).

        ``members``, for a signature block that no hash covers, is the set of members it
        may hold: anything else would ride along unsigned. The base64 must be canonical
        for the same reason (its spare bits could spell one signature many ways)."""
        if members is not None:
            extra = sorted(set(sig) - members)
            if extra:
                raise Rejected(Reason.SCHEMA_VIOLATION, f"{path}.{extra[0]}", "not a member of a signature block")
        if sig.get("algorithm") != "ed25519":
            raise Rejected(Reason.UNSUPPORTED_ALGORITHM, f"{path}.algorithm", f"{sig.get('algorithm')!r}")
        key = self.get(sig.get("key_id"))
        if key is None:
            raise Rejected(Reason.UNKNOWN_KEY, f"{path}.key_id", f"{sig.get('key_id')!r} is not pinned")
        if sig.get("public_key_fingerprint") != key.fingerprint:
            raise Rejected(
                Reason.KEY_FINGERPRINT_MISMATCH,
                f"{path}.public_key_fingerprint",
                f"pinned {key.key_id} has fingerprint {key.fingerprint}",
            )
        if key.role != role:
            raise Rejected(
                Reason.WRONG_KEY_ROLE,
                f"{path}.key_id",
                f"{key.key_id} is pinned as {A_KEY[key.role]}; only {A_KEY[role]} may sign this",
            )
        encoded = sig.get("signature_b64")
        try:
            if not isinstance(encoded, str):
                raise TypeError(encoded)
            signature = base64.b64decode(encoded, validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise Rejected(invalid_reason, f"{path}.signature_b64", "not base64") from None
        if len(signature) != 64 or not key.verify(message, signature):
            raise Rejected(invalid_reason, f"{path}.signature_b64", f"does not verify under {key.key_id}")
        if base64.b64encode(signature).decode("ascii") != encoded:
            raise Rejected(
                Reason.SCHEMA_VIOLATION,
                f"{path}.signature_b64",
                "not canonical base64 (its spare bits could spell the same signature many ways)",
            )
        key.check_window(f"{path}.key_id", created_at, signed_at)
        return key
