"""The shape rules every signed Pith document shares, held before any hash or signature
is computed: a member of the expected type, a SHA-256 written as 64 lowercase hex digits,
an exact value, a signature block naming what it signs, and an RFC 3339 UTC timestamp.
A broken rule is ``schema_violation`` at the path of the member that broke it."""

import re
from typing import Any

from .reasons import Reason, Rejected

SIGNATURE_STATUS = "signed_v1"  # every signature block, receipt and manifest says it
# RFC 3339 in UTC, as every timestamp in the real bundles is written.
TIMESTAMP_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z")


def need(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], path: str) -> Any:
    """``obj[key]``, which must be of ``kind`` (a bool is not an int)."""
    value = obj.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        want = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise Rejected(Reason.SCHEMA_VIOLATION, f"{path}{key}", f"expected {want}, found {type(value).__name__}")
    return value


def need_hex(obj: dict[str, Any], key: str, path: str) -> str:
    """``obj[key]``, a SHA-256 in lowercase hex."""
    value: str = need(obj, key, str, path)
    if len(value) != 64 or value.strip("0123456789abcdef"):
        raise Rejected(Reason.SCHEMA_VIOLATION, f"{path}{key}", "expected 64 lowercase hex digits")
    return value


def need_equal(obj: dict[str, Any], key: str, expected: object, path: str) -> None:
    if obj.get(key) != expected:
        raise Rejected(Reason.SCHEMA_VIOLATION, f"{path}{key}", f"expected {expected!r}, found {obj.get(key)!r}")


def need_timestamp(obj: dict[str, Any], key: str, path: str) -> str:
    """``obj[key]``, an RFC 3339 UTC timestamp."""
    value: str = need(obj, key, str, path)
    if not TIMESTAMP_RE.fullmatch(value):
        raise Rejected(Reason.SCHEMA_VIOLATION, f"{path}{key}", "expected an RFC 3339 UTC timestamp")
    return value


def signature_block(obj: dict[str, Any], key: str, message: str, path: str) -> dict[str, Any]:
    """``obj[key]``, a signature block that says it signs ``message``."""
    sig: dict[str, Any] = need(obj, key, dict, path)
    need_equal(sig, "signed_message", message, f"{path}{key}.")
    need_equal(sig, "signature_status", SIGNATURE_STATUS, f"{path}{key}.")
    return sig
