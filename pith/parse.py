"""Hostile-input-safe JSON parsing.

Rejects what the reference parser would read differently from another one
(duplicate keys), what canonical JSON cannot carry (NaN, Infinity, lone surrogates),
and documents over the size or nesting limits, each with its own reason code.

The fast path proves, cheaply, that the reference reading is safe to speed up:
``orjson.dumps(parsed) == raw`` shows no member was dropped (so no duplicate key) and
that the text is compact with no escapes orjson would write otherwise; a float hook
says whether orjson's canonical bytes can be trusted (it formats floats differently).
Anything it cannot prove goes to the slow reference path, which names the problem.
Text with no float at all (the registry's bundles) is read by orjson itself, three to
four times faster than the float-noting reader: with no float, the two readings are
the same tree, and the round trip still proves the rest.

One size rule holds for every reader (the crawl, ``verify``, the audit): at most
``max_bytes``, and, since the registry serves compact JSON (its bundles are exactly
their compact encoding), no larger than ``padded_bound`` of the compact encoding. A
hostile server that pads a bundle with whitespace could otherwise push it past one
reader's size limit and not another's; padded text is ``not_compact``.
"""

import json
import threading
from dataclasses import dataclass
from typing import NoReturn

try:
    import orjson
except ImportError:  # pragma: no cover
    orjson = None  # type: ignore[assignment]

from .reasons import Reason, Rejected

DEFAULT_MAX_BYTES = 8 * 1024 * 1024  # the one byte limit of a bundle: what the crawl admits, verify and audit accept
DEFAULT_MAX_DEPTH = 64
# Text may exceed its compact encoding by 5% plus 4 KiB (docs/VERIFICATION.md): the
# default separators ', ' and ': ' of most JSON writers (+5% on the real bundles) pass,
# a 12 MiB stretch of whitespace does not.
PADDING_RATIO = 1.05
PADDING_BYTES = 4096

_NOT_BRACKET = bytes(b for b in range(256) if b not in b"{}[]")
_ONE_BRACKET_KIND = bytes.maketrans(b"{}", b"[]")


@dataclass(frozen=True)
class Limits:
    max_bytes: int = DEFAULT_MAX_BYTES
    max_depth: int = DEFAULT_MAX_DEPTH
    compact: bool = True  # reject text larger than padded_bound(its compact size): not_compact


def padded_bound(compact_size: int) -> int:
    """The most bytes a document whose compact encoding takes ``compact_size`` may take."""
    return int(compact_size * PADDING_RATIO) + PADDING_BYTES


@dataclass
class Document:
    """A parsed document; ``exact`` is true when orjson's canonical bytes equal the
    reference ones for it (no floats, no integers past 64 bits)."""

    data: object
    exact: bool
    size: int


def _without_escapes(raw: bytes) -> bytes:
    """JSON text with its escaped backslashes and quotes dropped: every quote left
    opens or closes a string."""
    if b"\\" in raw:
        return raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    return raw


def _outside_strings(unescaped: bytes) -> bytes:
    """What lies outside the strings of ``_without_escapes`` text: its structure, numbers
    and literals. One split serves both scans below (it is most of their cost)."""
    return b"".join(unescaped.split(b'"')[0::2])


def _bracket_depth(outside: bytes, max_depth: int) -> int | None:
    """Nesting depth from the bracket bytes of ``_outside_strings`` text, peeling
    innermost pairs (C speed). Both kinds count as one ('{' as '['): peeling '[]' and
    then '{}' in one round would take '{[]}' in a single step. None (brackets that do
    not pair) sends the caller to the tree."""
    brackets = outside.translate(_ONE_BRACKET_KIND, _NOT_BRACKET)
    depth = 0
    while brackets:
        peeled = brackets.replace(b"[]", b"")
        if len(peeled) == len(brackets):
            return None
        brackets = peeled
        depth += 1
        if depth > max_depth:
            return depth
    return depth


def _compact_reading(raw: bytes) -> object | None:
    """orjson's reading of ``raw`` when ``raw`` is orjson's compact encoding of it
    (None otherwise: bad UTF-8 or syntax, surrogates, past orjson's depth or integers,
    a dropped duplicate key, other spacing or escapes)."""
    try:
        data = orjson.loads(raw)
        return data if orjson.dumps(data) == raw else None
    except (ValueError, TypeError):
        return None


def _holds_float(outside: bytes) -> bool:
    """Whether compact text holds a float, from what lies ``_outside_strings``: there
    compact JSON holds ``.``, ``e`` or ``E`` only in a float, but for the e of true and
    false; orjson writes every float with one of them."""
    outside = outside.replace(b"true", b"").replace(b"false", b"")
    return b"." in outside or b"e" in outside or b"E" in outside


def _reject_constant(name: str) -> NoReturn:
    raise Rejected(Reason.NON_FINITE_NUMBER, "", f"{name} is not valid JSON")


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise Rejected(Reason.DUPLICATE_KEY, key, f"key {key!r} appears twice in one object")
            seen.add(key)
    return obj


def _reference_parse(raw: bytes, limits: Limits) -> Document:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Rejected(Reason.INVALID_UTF8, "", f"byte {exc.start}: {exc.reason}") from None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except RecursionError:
        raise Rejected(Reason.TOO_DEEP, "", "nesting exhausted the parser") from None
    except json.JSONDecodeError as exc:
        raise Rejected(Reason.MALFORMED_JSON, "", f"line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except ValueError as exc:  # int conversion limits and the like
        raise Rejected(Reason.MALFORMED_JSON, "", str(exc)) from None
    _check_reference_tree(data, limits.max_depth)
    return Document(data, exact=False, size=len(raw))


def _check_reference_tree(data: object, max_depth: int) -> None:
    """Depth (of objects and lists, as the fast path counts it), infinite floats
    (1e400 parses as inf) and lone surrogates."""
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth and isinstance(node, (dict, list)):
            raise Rejected(Reason.TOO_DEEP, "", f"nesting deeper than {max_depth}")
        if isinstance(node, dict):
            for key, value in node.items():
                _check_text(key)
                stack.append((value, depth + 1))
        elif isinstance(node, list):
            stack.extend((value, depth + 1) for value in node)
        elif isinstance(node, float):
            if node != node or node in (float("inf"), float("-inf")):
                raise Rejected(Reason.NON_FINITE_NUMBER, "", f"{node!r} has no JSON form")
        elif isinstance(node, str):
            _check_text(node)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise Rejected(Reason.INVALID_UNICODE, "", "string holds a lone surrogate") from None


class _FloatNotingDecoder(json.JSONDecoder):
    """The fast path's reader: json.loads's, counting floats and refusing NaN and
    Infinity. One per thread, reused: building a decoder costs more than reading a
    small document."""

    _local = threading.local()

    def __init__(self) -> None:
        super().__init__(parse_float=self._note_float, parse_constant=_reject_constant)
        self.floats = 0

    def _note_float(self, text: str) -> float:
        self.floats += 1
        return float(text)

    @classmethod
    def for_this_thread(cls) -> "_FloatNotingDecoder":
        decoder = getattr(cls._local, "decoder", None)
        if decoder is None:
            decoder = cls._local.decoder = cls()
        decoder.floats = 0
        return decoder


def _check_padding(document: Document, raw: bytes, limits: Limits) -> Document:
    """``document`` (read by the reference path), unless its text is padded."""
    if limits.compact and len(raw) > PADDING_BYTES:
        compact = len(json.dumps(document.data, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
        if len(raw) > padded_bound(compact):
            raise Rejected(
                Reason.NOT_COMPACT,
                "",
                f"{len(raw)} bytes where the compact encoding takes {compact} "
                f"(at most {padded_bound(compact)} allowed)",
            )
    return document


def parse(raw: bytes, limits: Limits = Limits()) -> Document:
    """Parse ``raw`` bytes or raise Rejected with a reason code."""
    if len(raw) > limits.max_bytes:
        raise Rejected(Reason.TOO_LARGE, "", f"{len(raw)} bytes > limit {limits.max_bytes}")
    if orjson is None:  # pragma: no cover
        return _check_padding(_reference_parse(raw, limits), raw, limits)
    data = _compact_reading(raw)
    outside = _outside_strings(_without_escapes(raw))
    if data is not None and not _holds_float(outside):
        depth = _bracket_depth(outside, limits.max_depth)
        if depth is None or depth > limits.max_depth:
            _check_reference_tree(data, limits.max_depth)
        return Document(data, exact=True, size=len(raw))
    decoder = _FloatNotingDecoder.for_this_thread()
    try:
        data = decoder.decode(raw.decode("utf-8"))
        compact = orjson.dumps(data) == raw
    except Rejected:
        raise
    except (ValueError, TypeError, RecursionError):  # bad UTF-8 or syntax, surrogates, ints past 64 bits
        return _check_padding(_reference_parse(raw, limits), raw, limits)
    if not compact:
        return _check_padding(_reference_parse(raw, limits), raw, limits)
    depth = _bracket_depth(outside, limits.max_depth)
    if depth is None or depth > limits.max_depth:
        _check_reference_tree(data, limits.max_depth)
    return Document(data, exact=not decoder.floats, size=len(raw))
