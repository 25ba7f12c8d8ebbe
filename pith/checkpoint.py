"""Checkpoints: a log's size and root hash, signed, in the C2SP ``tlog-checkpoint``
format as a C2SP ``signed-note``, so that witnesses and the tools of Certificate
Transparency, the Go checksum database and sigsum can read and keep them.

The note text is three lines, each ending in a newline: the origin (which log), the
tree size in decimal, the root hash in standard base64. A blank line follows, then
one line per signature: ``\u2014 <name> <base64(key hash || signature)>``, where the
key hash is the first 4 bytes of ``SHA-256(name || "\\n" || 0x01 || public key)``
(0x01: Ed25519) and the signature is Ed25519 over the note text. Our name is the
origin (``log_origin``), and the pinned key that signed is found
by its key hash. Signature lines of other keys (a witness's cosignature) are
allowed and ignored here (``pith.signed_note`` checks cosignatures).
"""

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass
from urllib.parse import quote

from nacl.signing import SigningKey

from .keyring import ARCHIVE, Keyring, PinnedKey
from .merkle import HASH_SIZE
from .reasons import Reason, Rejected
from .signing import Signer

ED25519 = b"\x01"
DASH = "\u2014 "
_SIZE = re.compile(r"0|[1-9][0-9]{0,19}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._~/:@!$&'()*,;=%-]")  # a URL path without spaces or '+'
MAX_NOTE_BYTES = 1 << 16


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes

    def text(self) -> str:
        return f"{self.origin}\n{self.size}\n{base64.b64encode(self.root).decode('ascii')}\n"


def log_origin(key_id: str, name: str | None = None) -> str:
    """The origin of a key's log: ``name`` when given (a schema-less URL such as
    ``archive.example.org/pith``), else ``pith-archiver/<key id>``; either way with
    any character that a note's key name cannot hold (a space, '+') percent-encoded,
    and never derived from where the archive sits, so it survives a move."""
    origin = name or f"pith-archiver/{quote(key_id, safe='')}"
    return _UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), origin).strip("/")


def key_hash(name: str, public_raw: bytes) -> bytes:
    return hashlib.sha256(name.encode("utf-8") + b"\n" + ED25519 + public_raw).digest()[:4]


def sign_checkpoint(checkpoint: Checkpoint, signer: Signer) -> str:
    """The checkpoint as a signed note, signed by ``signer`` under the origin's name."""
    text = checkpoint.text()
    signature = SigningKey(signer.seed).sign(text.encode("utf-8")).signature
    blob = base64.b64encode(key_hash(checkpoint.origin, signer.public_raw) + signature).decode("ascii")
    return f"{text}\n{DASH}{checkpoint.origin} {blob}\n"


def parse_checkpoint(text: str) -> Checkpoint:
    """The checkpoint a note text holds (extension lines after the root are ignored)."""
    lines = text.split("\n")
    if len(lines) < 4 or lines[-1] != "" or any(not line for line in lines[:-1]):
        raise Rejected(
            Reason.CHECKPOINT_INVALID, "checkpoint", "expected origin, size and root lines, each ending in \\n"
        )
    origin, size, root = lines[:3]
    if not _SIZE.fullmatch(size):
        raise Rejected(Reason.CHECKPOINT_INVALID, "checkpoint.size", f"not a decimal tree size: {size[:40]!r}")
    try:
        digest = base64.b64decode(root, validate=True)
    except binascii.Error:
        digest = b""
    if len(digest) != HASH_SIZE or base64.b64encode(digest).decode("ascii") != root:
        raise Rejected(Reason.CHECKPOINT_INVALID, "checkpoint.root", "not the base64 of a 32-byte hash")
    return Checkpoint(origin, int(size), digest)


def open_checkpoint(note: str | bytes, keyring: Keyring) -> tuple[Checkpoint, PinnedKey]:
    """The checkpoint in a signed note and the pinned key that signed it; Rejected when
    the note is malformed or no pinned key of the log (the origin's key id) signed it."""
    if isinstance(note, bytes):
        if len(note) > MAX_NOTE_BYTES:
            raise Rejected(Reason.CHECKPOINT_INVALID, "note", f"larger than {MAX_NOTE_BYTES} bytes")
        try:
            note = note.decode("utf-8")
        except UnicodeDecodeError:
            raise Rejected(Reason.CHECKPOINT_INVALID, "note", "not UTF-8") from None
    cut = note.rfind("\n\n")
    if cut < 0 or not note.endswith("\n"):
        raise Rejected(Reason.CHECKPOINT_INVALID, "note", "no blank line before the signatures, or no final newline")
    text, signatures = note[: cut + 1], note[cut + 2 : -1].split("\n")
    checkpoint = parse_checkpoint(text)
    lines = [_signature_line(line, f"note.signatures[{index}]") for index, line in enumerate(signatures)]
    ours = [(index, blob) for index, (name, blob) in enumerate(lines) if name == checkpoint.origin]
    if not ours:
        raise Rejected(Reason.UNKNOWN_KEY, "note.signatures", f"no signature under the log's name {checkpoint.origin}")
    pinned = {key_hash(checkpoint.origin, key.raw): key for key in keyring}
    for index, blob in ours:
        key = pinned.get(blob[:4])
        if key is None:
            continue
        if key.role != ARCHIVE:  # a registry key signs records, never an archive's log
            raise Rejected(
                Reason.WRONG_KEY_ROLE, f"note.signatures[{index}]", f"{key.key_id} is pinned as a {key.role} key"
            )
        if not key.verify(text.encode("utf-8"), blob[4:]):
            raise Rejected(
                Reason.CHECKPOINT_SIGNATURE_INVALID, f"note.signatures[{index}]", f"does not verify under {key.key_id}"
            )
        return checkpoint, key
    raise Rejected(
        Reason.UNKNOWN_KEY, "note.signatures", f"no pinned key signed the log {checkpoint.origin} (key hash unknown)"
    )


def _signature_line(line: str, path: str) -> tuple[str, bytes]:
    name, _, encoded = line[len(DASH) :].partition(" ") if line.startswith(DASH) else ("", "", "")
    try:
        blob = base64.b64decode(encoded, validate=True)
    except binascii.Error:
        blob = b""
    if not name or " " in encoded or len(blob) < 5:
        raise Rejected(Reason.CHECKPOINT_INVALID, path, "expected '\u2014 <name> <base64 key hash and signature>'")
    return name, blob
