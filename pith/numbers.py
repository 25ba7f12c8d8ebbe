"""Identifiers derived from hashes: Pith numbers, short numbers, key fingerprints."""

import base64
import hashlib
import re
from functools import lru_cache

SUFFIX_LENGTH = 26
SHORT_LENGTHS = (8, 12, 16)
SUFFIX_RE = re.compile(r"^[A-Z2-7]{26}$")
PITH_NUMBER_RE = re.compile(r"^pith:([0-9]{4}):([A-Z2-7]{26})$")  # \d would take any script's digits
SHORT_RE = re.compile(r"^pith:([A-Z2-7]{8})$")


def b32(data: bytes) -> str:
    return base64.b32encode(data).decode("ascii")


def pith_suffix(canonical_sha256: str) -> str:
    """The base32 of the digest, cut to 26 characters: 130 bits, all in its first 17
    bytes (encoding only those costs a verified bundle half as much)."""
    return b32(bytes.fromhex(canonical_sha256[:34]))[:SUFFIX_LENGTH]


def pith_number(canonical_sha256: str, submitted_at: str) -> str:
    return number_from_suffix(pith_suffix(canonical_sha256), submitted_at)


def number_from_suffix(suffix: str, submitted_at: str) -> str:
    return f"pith:{submitted_at[:4]}:{suffix}"


def short_pith_number(suffix: str) -> str:
    return "pith:" + suffix[:8]


def suffix_of(pith: str) -> str:
    """The 26-character suffix of a full Pith number (``pith:YYYY:SUFFIX``)."""
    return pith.rsplit(":", 1)[-1]


@lru_cache(maxsize=256)  # a crawl sees the same few keys in every bundle
def _fingerprints(raw_key: bytes) -> tuple[str, str, str]:
    digest = hashlib.sha256(raw_key).digest()
    return raw_key.hex(), digest.hex()[:32], b32(digest)[:26]


def key_fingerprints(raw_key: bytes) -> dict[str, str]:
    hex_key, fingerprint, fingerprint_b32 = _fingerprints(raw_key)
    return {
        "public_key_hex": hex_key,
        "fingerprint_sha256_hex": fingerprint,
        "fingerprint_sha256_b32_first128bits": fingerprint_b32,
    }
