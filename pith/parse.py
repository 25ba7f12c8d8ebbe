"""Hostile-input-safe JSON parsing.

Rejects what the reference parser would read differently from another one
(duplicate keys), what canonical JSON cannot carry (NaN, Infinity, lone surrogates),
and documents over the size or nesting limits, each with its own reason code.

The fast path parses with orjson and then proves, from the raw bytes, that orjson
saw the same document the reference ``json`` module would: no duplicate keys (the
count of keys outside strings equals the count orjson kept), and no float or
over-64-bit integer (where the two parsers' numbers could differ). Anything it
cannot prove goes to the reference parser, which is the authority.
"""

import json
import re
from dataclasses import dataclass

try:
    import orjson
except ImportError:  # pragma: no cover
    orjson = None

from .reasons import Rejected

DEFAULT_MAX_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_DEPTH = 64

# Outside strings, only numbers and true/false/null remain besides punctuation:
# a '.', an exponent or a 19-digit run marks a number the fast path cannot vouch for.
_RISKY_NUMBER = re.compile(rb"[.eE]|\d{19}")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"{}[]")


@dataclass(frozen=True)
class Limits:
    max_bytes: int = DEFAULT_MAX_BYTES
    max_depth: int = DEFAULT_MAX_DEPTH


@dataclass
class Document:
    """A parsed document; ``exact`` is true when orjson's canonical bytes equal the
    reference ones for it (no floats, no integers past 64 bits)."""
    data: object
    exact: bool
    size: int


def _outside_strings(raw: bytes) -> bytes:
    """The bytes of a valid JSON text that are not inside string literals."""
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    return b"".join(raw.split(b'"')[0::2])


def _depth(structure: bytes) -> int:
    depth = deepest = 0
    for byte in structure.translate(None, _NOT_BRACKETS):
        if byte in (0x7B, 0x5B):
            depth += 1
            if depth > deepest:
                deepest = depth
        else:
            depth -= 1
    return deepest


def _reject_constant(name):
    raise Rejected("non_finite_number", "", f"{name} is not valid JSON")


def _no_duplicates(pairs):
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise Rejected("duplicate_key", key, f"key {key!r} appears twice in one object")
            seen.add(key)
    return obj


def _reference_parse(raw: bytes, limits: Limits) -> Document:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Rejected("invalid_utf8", "", f"byte {exc.start}: {exc.reason}") from None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except RecursionError:
        raise Rejected("too_deep", "", "nesting exhausted the parser") from None
    except json.JSONDecodeError as exc:
        raise Rejected("malformed_json", "", f"line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except ValueError as exc:  # int conversion limits and the like
        raise Rejected("malformed_json", "", str(exc)) from None
    _check_reference_tree(data, limits.max_depth)
    return Document(data, exact=False, size=len(raw))


def _check_reference_tree(data, max_depth: int) -> None:
    """Depth, infinite floats (1e400 parses as inf) and lone surrogates."""
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise Rejected("too_deep", "", f"nesting deeper than {max_depth}")
        if isinstance(node, dict):
            for key, value in node.items():
                _check_text(key)
                stack.append((value, depth + 1))
        elif isinstance(node, list):
            stack.extend((value, depth + 1) for value in node)
        elif isinstance(node, float):
            if node != node or node in (float("inf"), float("-inf")):
                raise Rejected("non_finite_number", "", f"{node!r} has no JSON form")
        elif isinstance(node, str):
            _check_text(node)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise Rejected("invalid_unicode", "", "string holds a lone surrogate") from None


def parse(raw: bytes, limits: Limits = Limits()) -> Document:
    """Parse ``raw`` bytes or raise Rejected with a reason code."""
    if len(raw) > limits.max_bytes:
        raise Rejected("too_large", "", f"{len(raw)} bytes > limit {limits.max_bytes}")
    if orjson is None:  # pragma: no cover
        return _reference_parse(raw, limits)
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _reference_parse(raw, limits)  # names the error, or accepts what orjson cannot
    structure = _outside_strings(raw)
    if _RISKY_NUMBER.search(structure.replace(b"true", b"").replace(b"false", b"")):
        return _reference_parse(raw, limits)
    if structure.count(b":") != _outside_strings(orjson.dumps(data)).count(b":"):
        return _reference_parse(raw, limits)  # a key orjson dropped: find and name it
    if structure.count(b"{") + structure.count(b"[") > limits.max_depth and _depth(structure) > limits.max_depth:
        raise Rejected("too_deep", "", f"nesting deeper than {limits.max_depth}")
    return Document(data, exact=True, size=len(raw))
