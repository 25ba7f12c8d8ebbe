"""Canonical JSON: ``json.dumps(x, sort_keys=True, separators=(",", ":"),
ensure_ascii=False)`` as UTF-8, and the SHA-256 hex digests taken over it.

orjson gives the same bytes for everything but floats and integers outside 64 bits
(tests/test_canonical.py proves it); documents holding those are serialized by the
reference encoder. ``exact=True`` means the caller knows there is no such number.
"""

import hashlib
import json

try:  # optional speed-up; the reference encoder is always correct
    import orjson
except ImportError:  # pragma: no cover - exercised only without orjson
    orjson = None  # type: ignore[assignment]


def reference_canon(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


if orjson is not None:
    _SORT = orjson.OPT_SORT_KEYS

    def canon(obj: object, exact: bool = False) -> bytes:
        if not exact:
            return reference_canon(obj)
        try:
            return orjson.dumps(obj, option=_SORT)
        except TypeError:  # an int past 64 bits: let the reference encoder write it
            return reference_canon(obj)
else:  # pragma: no cover

    def canon(obj: object, exact: bool = False) -> bytes:
        return reference_canon(obj)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canon_sha256(obj: object, exact: bool = False) -> str:
    return hashlib.sha256(canon(obj, exact)).hexdigest()
