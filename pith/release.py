"""A dataset release's ``release.json``, as anyone checks it: well formed, hashed and
signed by a pinned archive key (the archiver that made the release). What it lists (each
file's size and sha256) is then checked against the files by whoever holds them."""

from typing import Any

from .canonical import canon_sha256
from .keyring import ARCHIVE, SIGNATURE_MEMBERS, Keyring
from .parse import Limits, parse
from .reasons import Reason, Rejected

RELEASE_TYPE = "pith_archiver_release"
SIGNED_MESSAGE = "release_sha256_bytes"
RELEASE_LIMITS = Limits(max_bytes=1 << 28)


def check_release(raw: bytes, keyring: Keyring) -> dict[str, Any]:
    """The release document in ``raw`` once its hash and signature hold; Rejected otherwise."""
    document = parse(raw, RELEASE_LIMITS)
    release = document.data
    if not isinstance(release, dict) or release.get("release_type") != RELEASE_TYPE:
        raise Rejected(Reason.SCHEMA_VIOLATION, "release_type", f"expected {RELEASE_TYPE!r}")
    signature = release.get("signature")
    files = release.get("files")
    if not isinstance(signature, dict) or not isinstance(signature.get("release_sha256"), str):
        raise Rejected(Reason.SCHEMA_VIOLATION, "signature.release_sha256", "missing")
    if not isinstance(files, list) or not all(isinstance(f, dict) for f in files):
        raise Rejected(Reason.SCHEMA_VIOLATION, "files", "expected a list of file entries")
    claimed = signature["release_sha256"]
    if canon_sha256({k: v for k, v in release.items() if k != "signature"}, document.exact) != claimed:
        raise Rejected(Reason.RELEASE_HASH_MISMATCH, "signature.release_sha256", "does not hash the release")
    keyring.check_signature(
        signature,
        bytes.fromhex(claimed),
        "signature",
        Reason.RELEASE_SIGNATURE_INVALID,
        SIGNATURE_MEMBERS | {"release_sha256"},
        role=ARCHIVE,
    )
    return release
