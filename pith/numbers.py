"""Identifiers derived from hashes: Pith numbers, short numbers, key fingerprints."""

import base64
import hashlib
import re

SUFFIX_LENGTH = 26
SHORT_LENGTHS = (8, 12, 16)
SUFFIX_RE = re.compile(r"^[A-Z2-7]{26}$")
PITH_NUMBER_RE = re.compile(r"^pith:(\d{4}):([A-Z2-7]{26})$")
SHORT_RE = re.compile(r"^pith:([A-Z2-7]{8})$")


def b32(data: bytes) -> str:
    return base64.b32encode(data).decode("ascii")


def pith_suffix(canonical_sha256: str) -> str:
    return b32(bytes.fromhex(canonical_sha256))[:SUFFIX_LENGTH]


def pith_number(canonical_sha256: str, submitted_at: str) -> str:
    return f"pith:{submitted_at[:4]}:{pith_suffix(canonical_sha256)}"


def short_pith_number(suffix: str) -> str:
    return "pith:" + suffix[:8]


def suffix_of(pith: str) -> str:
    """The 26-character suffix of a full Pith number (``pith:YYYY:SUFFIX``)."""
    return pith.rsplit(":", 1)[-1]


def key_fingerprints(raw_key: bytes) -> dict:
    digest = hashlib.sha256(raw_key).digest()
    return {
        "public_key_hex": raw_key.hex(),
        "fingerprint_sha256_hex": digest.hex()[:32],
        "fingerprint_sha256_b32_first128bits": b32(digest)[:26],
    }
