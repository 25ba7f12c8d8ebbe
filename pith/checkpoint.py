"""Checkpoints: a log's size and root hash, signed, in the C2SP ``tlog-checkpoint``
format as a C2SP ``signed-note`` (read by ``pith.signed_note``), so that witnesses and
the tools of Certificate Transparency, the Go checksum database and sigsum can read and
keep them.

The note text is three lines, each ending in a newline: the origin (which log), the
tree size in decimal, the root hash in standard base64; C2SP allows extension lines
after them, which the signatures cover like the rest of the text. A blank line
follows, then one line per signature: ``\u2014 <name> <base64(key hash || signature)>``,
where the key hash is the first 4 bytes of ``SHA-256(name || "\\n" || 0x01 || public
key)`` (0x01: Ed25519) and the signature is Ed25519 over the note text. Our name is the
origin (``log_origin``), and the pinned key that signed is found by its key hash.
Signature lines of other keys (a witness's cosignature) are allowed and ignored here
(``pith.policy`` counts cosignatures).
"""

import base64
import binascii
import re
from dataclasses import dataclass
from urllib.parse import quote

from .keyring import ARCHIVE, Keyring, PinnedKey
from .merkle import HASH_SIZE
from .reasons import Reason, Rejected
from .signed_note import NOTE_KEY, VerifierKey, read_note, sign_note, verifies
from .signing import Signer

UINT64_MAX = (1 << 64) - 1
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,19}")  # ASCII only: str.isdigit and int() take any script's digits
_UNSAFE = re.compile(r"[^A-Za-z0-9._~/:@!$&'()*,;=%-]")  # a URL path without spaces or '+'


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


def uint64(text: str) -> int | None:
    """A C2SP size or index: ASCII decimal digits, no leading zero, at most 2^64-1
    (None when ``text`` is not one)."""
    return int(text) if _DECIMAL.fullmatch(text) and int(text) <= UINT64_MAX else None


def sign_checkpoint(checkpoint: Checkpoint, signer: Signer) -> str:
    """The checkpoint as a signed note, signed by ``signer`` under the origin's name."""
    return sign_note(checkpoint.text(), checkpoint.origin, signer.seed)


def parse_checkpoint(text: str) -> Checkpoint:
    """The checkpoint a note's text holds (the extension lines after the root, which the
    note's signatures cover, mean nothing to us)."""
    lines = text.split("\n")
    if len(lines) < 4 or lines[-1] != "" or any(not line for line in lines[:-1]):
        raise Rejected(
            Reason.CHECKPOINT_INVALID, "checkpoint", "expected origin, size and root lines, each ending in \\n"
        )
    origin, size, root = lines[:3]
    if uint64(size) is None:
        raise Rejected(
            Reason.CHECKPOINT_INVALID, "checkpoint.size", f"not a decimal tree size below 2^64: {size[:40]!r}"
        )
    try:
        digest = base64.b64decode(root, validate=True)
    except binascii.Error:
        digest = b""
    if len(digest) != HASH_SIZE or base64.b64encode(digest).decode("ascii") != root:
        raise Rejected(Reason.CHECKPOINT_INVALID, "checkpoint.root", "not the base64 of a 32-byte hash")
    return Checkpoint(origin, int(size), digest)


def open_checkpoint(note: str | bytes, keyring: Keyring) -> tuple[Checkpoint, PinnedKey]:
    """The checkpoint in a signed note and the pinned key that signed its exact text;
    Rejected when the note is malformed or no pinned key of the log (the origin's
    key id) signed it."""
    signed = read_note(note)
    checkpoint = parse_checkpoint(signed.text)
    if not any(line.name == checkpoint.origin for line in signed.signatures):
        raise Rejected(Reason.UNKNOWN_KEY, "note.signatures", f"no signature under the log's name {checkpoint.origin}")
    for key in keyring:
        vkey = VerifierKey(checkpoint.origin, NOTE_KEY, key.raw)
        lines = signed.lines_of(vkey)
        if lines and key.role != ARCHIVE:  # a registry key signs records, never an archive's log
            raise Rejected(
                Reason.WRONG_KEY_ROLE, f"note.signatures[{lines[0]}]", f"{key.key_id} is pinned as a {key.role} key"
            )
        if verifies(signed, vkey):
            return checkpoint, key
    raise Rejected(
        Reason.UNKNOWN_KEY, "note.signatures", f"no pinned key signed the log {checkpoint.origin} (key hash unknown)"
    )
