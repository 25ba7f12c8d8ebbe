"""C2SP ``signed-note`` verifier keys and ``tlog-cosignature`` lines: what a log
publishes so others can pin it, and what a witness adds to a checkpoint.

A verifier key (vkey) is ``<name>+<hex key hash>+<base64(type || public key)>``,
type 0x01 for a note signature (a log's), 0x04 for a cosignature (a witness's). A
cosignature/v1 line signs, with the witness's Ed25519 key, the lines
``cosignature/v1``, ``time <seconds>`` and the checkpoint's text; its blob is the
8-byte big-endian time then the 64-byte signature.
"""

import base64
import binascii
import hashlib
from dataclasses import dataclass

from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from .checkpoint import DASH, Checkpoint

NOTE_KEY = 0x01
COSIGNATURE_KEY = 0x04


class NoteKeyError(ValueError):
    """A verifier key that is not one: its reason is the message."""


@dataclass(frozen=True)
class VerifierKey:
    name: str
    kind: int
    public_raw: bytes

    @property
    def key_hash(self) -> bytes:
        return hashlib.sha256(self.name.encode("utf-8") + b"\n" + bytes([self.kind]) + self.public_raw).digest()[:4]

    def __str__(self) -> str:
        material = base64.b64encode(bytes([self.kind]) + self.public_raw).decode("ascii")
        return f"{self.name}+{self.key_hash.hex()}+{material}"


def parse_vkey(text: str) -> VerifierKey:
    """A vkey of an Ed25519 note key or cosigner; NoteKeyError when malformed, of
    another type, or its key hash does not match."""
    name, _, rest = text.strip().partition("+")
    hex_hash, _, material = rest.partition("+")
    try:
        raw = base64.b64decode(material, validate=True)
        expected = bytes.fromhex(hex_hash)
    except (binascii.Error, ValueError):
        raise NoteKeyError(f"not a vkey (name+hexkeyhash+base64): {text[:60]!r}") from None
    if not name or " " in name or len(expected) != 4 or len(raw) != 33 or raw[0] not in (NOTE_KEY, COSIGNATURE_KEY):
        raise NoteKeyError(f"not an Ed25519 vkey: {text[:60]!r}")
    key = VerifierKey(name, raw[0], raw[1:])
    if key.key_hash != expected:
        raise NoteKeyError(f"the vkey of {name} names key hash {hex_hash}, its key gives {key.key_hash.hex()}")
    return key


def signature_lines(note: str) -> list[tuple[str, bytes]]:
    """``(name, blob)`` of each well-formed signature line of a note (others skipped)."""
    lines = []
    for line in note[note.rfind("\n\n") + 2 :].splitlines():
        name, _, encoded = line[len(DASH) :].partition(" ") if line.startswith(DASH) else ("", "", "")
        try:
            blob = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            continue
        if name and len(blob) > 4:
            lines.append((name, blob))
    return lines


def signs(key: VerifierKey, note: str, checkpoint: Checkpoint) -> bool:
    """Does ``note`` carry a signature of ``checkpoint``'s text by the log key ``key``
    (a line named after the key, with its key hash)?"""
    if key.kind != NOTE_KEY or key.name != checkpoint.origin:
        return False
    text = checkpoint.text().encode("utf-8")
    for name, blob in signature_lines(note):
        if name == key.name and blob[:4] == key.key_hash:
            try:
                VerifyKey(key.public_raw).verify(text, blob[4:])
                return True
            except (BadSignatureError, ValueError):
                return False
    return False


def cosigned_message(checkpoint: Checkpoint, timestamp: int) -> bytes:
    return f"cosignature/v1\ntime {timestamp}\n{checkpoint.text()}".encode()


def cosigns(key: VerifierKey, checkpoint: Checkpoint, blob: bytes) -> bool:
    """Does ``blob`` (the key hash, time and signature of a line named ``key.name``)
    cosign ``checkpoint`` under ``key``?"""
    if key.kind != COSIGNATURE_KEY or len(blob) != 4 + 8 + 64 or blob[:4] != key.key_hash:
        return False
    try:
        VerifyKey(key.public_raw).verify(cosigned_message(checkpoint, int.from_bytes(blob[4:12], "big")), blob[12:])
    except (BadSignatureError, ValueError):
        return False
    return True


def cosigners(note: str, checkpoint: Checkpoint, witnesses: dict[str, VerifierKey]) -> set[str]:
    """The names of the ``witnesses`` (name -> cosigner vkey) whose cosignature of
    ``checkpoint`` the note carries."""
    by_key = {(key.name, key.key_hash): name for name, key in witnesses.items()}
    return {
        by_key[(line_name, blob[:4])]
        for line_name, blob in signature_lines(note)
        if (line_name, blob[:4]) in by_key and cosigns(witnesses[by_key[(line_name, blob[:4])]], checkpoint, blob)
    }


def cosignature_line(seed: bytes, name: str, checkpoint: Checkpoint, timestamp: int) -> str:
    """A witness's cosignature/v1 line of ``checkpoint``, at ``timestamp``."""
    key = SigningKey(seed)
    vkey = VerifierKey(name, COSIGNATURE_KEY, bytes(key.verify_key))
    signature = key.sign(cosigned_message(checkpoint, timestamp)).signature
    blob = vkey.key_hash + timestamp.to_bytes(8, "big") + signature
    return f"{DASH}{name} {base64.b64encode(blob).decode('ascii')}\n"
