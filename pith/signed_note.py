"""C2SP ``signed-note``: the one reader of the notes the logs publish (a checkpoint
with its signature and cosignatures), the verifier keys that pin who signs them, and
the ``tlog-cosignature`` lines a witness adds.

A note is a text ending in a newline, a blank line, then only signature lines
``\u2014 <key name> <base64(key hash || signature)>``; the text is everything before the
last blank line. Every signature is checked over that exact text, never over a
re-serialised checkpoint, so a line nobody signed cannot pass as signed.

A verifier key (vkey) is ``<name>+<hex key hash>+<base64(type || public key)>``,
type 0x01 for a note signature (a log's), 0x04 for a cosignature (a witness's). A
cosignature/v1 line signs, with the witness's Ed25519 key, the lines
``cosignature/v1``, ``time <seconds>`` and the note's text; its blob is the 8-byte
big-endian time then the 64-byte signature.
"""

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass

from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey

from .reasons import Reason, Rejected

NOTE_KEY = 0x01
COSIGNATURE_KEY = 0x04
DASH = "\u2014 "
MAX_NOTE_BYTES = 1 << 16
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f]")  # a note holds no control character but the newline


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


@dataclass(frozen=True)
class NoteSignature:
    name: str
    key_hash: bytes
    signature: bytes  # what follows the key hash


@dataclass(frozen=True)
class SignedNote:
    text: str  # every byte before the last blank line, its final newline included
    signatures: tuple[NoteSignature, ...]

    def lines_of(self, key: VerifierKey) -> list[int]:
        """The indexes of the signature lines under ``key``'s name and key hash."""
        return [at for at, line in enumerate(self.signatures) if (line.name, line.key_hash) == (key.name, key.key_hash)]


def read_note(note: str | bytes) -> SignedNote:
    """The text and signature lines of a note; Rejected (checkpoint_invalid) when it is
    larger than MAX_NOTE_BYTES, not UTF-8, holds a control character, has no blank line
    before its signatures, or any line after that blank line is not a signature line."""
    raw = note if isinstance(note, bytes) else note.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_NOTE_BYTES:
        raise Rejected(Reason.CHECKPOINT_INVALID, "note", f"larger than {MAX_NOTE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Rejected(Reason.CHECKPOINT_INVALID, "note", "not UTF-8") from None
    control = _CONTROL.search(text)
    if control:
        raise Rejected(Reason.CHECKPOINT_INVALID, "note", f"holds the control character {control.group()!r}")
    cut = text.rfind("\n\n")
    if cut < 0 or not text.endswith("\n") or cut + 2 == len(text):
        raise Rejected(Reason.CHECKPOINT_INVALID, "note", "no blank line before signature lines, or no final newline")
    lines = enumerate(text[cut + 2 : -1].split("\n"))
    return SignedNote(text[: cut + 1], tuple(_signature(line, f"note.signatures[{at}]") for at, line in lines))


def _signature(line: str, path: str) -> NoteSignature:
    name, _, encoded = line[len(DASH) :].partition(" ") if line.startswith(DASH) else ("", "", "")
    try:
        blob = base64.b64decode(encoded, validate=True)
    except binascii.Error:
        blob = b""
    if not name or "+" in name or any(c.isspace() for c in name) or base64.b64encode(blob).decode() != encoded:
        raise Rejected(Reason.CHECKPOINT_INVALID, path, "not a signature line ('\u2014 <name> <base64>')")
    if len(blob) < 4:
        raise Rejected(Reason.CHECKPOINT_INVALID, path, "a signature shorter than its 4-byte key hash")
    return NoteSignature(name, blob[:4], blob[4:])


def verifies(note: SignedNote, key: VerifierKey) -> bool:
    """Does the note carry a valid signature by ``key`` (a line of its name and key
    hash): over the note's text for a log key, over cosignature/v1, its time and the
    text for a cosigner? False when no line is the key's; Rejected when its line does
    not verify or repeats, as C2SP signed-note has a known key's bad line reject the
    whole note."""
    lines = note.lines_of(key)
    if len(lines) > 1:
        raise Rejected(Reason.CHECKPOINT_INVALID, f"note.signatures[{lines[1]}]", f"a second line of {key.name}")
    if not lines:
        return False
    blob = note.signatures[lines[0]].signature
    if key.kind == COSIGNATURE_KEY:
        message, signature = cosigned_message(note.text, int.from_bytes(blob[:8], "big")), blob[8:]
    else:
        message, signature = note.text.encode("utf-8"), blob
    try:
        VerifyKey(key.public_raw).verify(message, signature)
    except (BadSignatureError, ValueError):
        raise Rejected(
            Reason.CHECKPOINT_SIGNATURE_INVALID,
            f"note.signatures[{lines[0]}]",
            f"the line of {key.name} does not verify over the note's text",
        ) from None
    return True


def cosigned_message(text: str, timestamp: int) -> bytes:
    return f"cosignature/v1\ntime {timestamp}\n{text}".encode()


def sign_note(text: str, name: str, seed: bytes) -> str:
    """``text`` (ending in a newline) as a note signed under ``name`` by the Ed25519 key
    of ``seed``."""
    key = SigningKey(seed)
    vkey = VerifierKey(name, NOTE_KEY, bytes(key.verify_key))
    return f"{text}\n{_line(name, vkey.key_hash + key.sign(text.encode('utf-8')).signature)}"


def cosignature_line(seed: bytes, name: str, text: str, timestamp: int) -> str:
    """A witness's cosignature/v1 line of the note text ``text``, at ``timestamp``."""
    key = SigningKey(seed)
    vkey = VerifierKey(name, COSIGNATURE_KEY, bytes(key.verify_key))
    signature = key.sign(cosigned_message(text, timestamp)).signature
    return _line(name, vkey.key_hash + timestamp.to_bytes(8, "big") + signature)


def _line(name: str, blob: bytes) -> str:
    return f"{DASH}{name} {base64.b64encode(blob).decode('ascii')}\n"
