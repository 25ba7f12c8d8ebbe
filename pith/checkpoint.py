"""Checkpoints: a log's size and root hash, signed, in the C2SP ``tlog-checkpoint``
format as a C2SP ``signed-note``, so that witnesses and the tools of Certificate
Transparency, the Go checksum database and sigsum can read and keep them.

The note text is three lines, each ending in a newline: the origin (which log), the
tree size in decimal, the root hash in standard base64. A blank line follows, then
one line per signature: ``\u2014 <name> <base64(key hash || signature)>``, where the
key hash is the first 4 bytes of ``SHA-256(name || "\\n" || 0x01 || public key)``
(0x01: Ed25519) and the signature is Ed25519 over the note text. Our name is the
origin, and the origin ends with the archiver key's id, so a pinned key is found
from the note alone. Signature lines of other keys (a witness's cosignature) are
allowed and ignored.
"""

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

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

    @property
    def key_id(self) -> str:
        """The archiver key whose log this is: the origin's last segment."""
        return unquote(self.origin.rpartition("/")[2])

    def text(self) -> str:
        return f"{self.origin}\n{self.size}\n{base64.b64encode(self.root).decode('ascii')}\n"


def log_origin(archive_uri: str, key_id: str) -> str:
    """The origin line of a key's log in an archive: the archive's location without its
    scheme, then the key id, percent-encoded so that it holds no space or '+'."""
    location = archive_uri.partition("://")[2] or archive_uri
    location = _UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), location)
    return f"{location.strip('/')}/{quote(key_id, safe='')}"


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
    key = keyring.get(checkpoint.key_id)
    if key is None:
        raise Rejected(Reason.UNKNOWN_KEY, "note.origin", f"the log's key {checkpoint.key_id!r} is not pinned")
    if key.role != ARCHIVE:  # a registry key signs records, never an archive's log
        raise Rejected(Reason.WRONG_KEY_ROLE, "note.origin", f"{key.key_id} is pinned as a {key.role} key")
    ours = key_hash(checkpoint.origin, key.raw)
    for index, line in enumerate(signatures):
        name, blob = _signature_line(line, f"note.signatures[{index}]")
        if name == checkpoint.origin and blob[:4] == ours:
            if not key.verify(text.encode("utf-8"), blob[4:]):
                raise Rejected(
                    Reason.CHECKPOINT_SIGNATURE_INVALID,
                    f"note.signatures[{index}]",
                    f"does not verify under {key.key_id}",
                )
            return checkpoint, key
    raise Rejected(
        Reason.CHECKPOINT_SIGNATURE_INVALID,
        "note.signatures",
        f"no signature by the pinned key {key.key_id} under the name {checkpoint.origin}",
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
