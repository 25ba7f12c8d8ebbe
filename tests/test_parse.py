"""Hostile input: every malformed document is rejected with its own reason code, never
an exception of another kind, whichever of parse()'s two paths it takes."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pith.parse import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, Limits, padded_bound, parse
from pith.reasons import Rejected


def rejection(raw: bytes, limits: Limits = Limits()) -> tuple[str, str]:
    with pytest.raises(Rejected) as caught:
        parse(raw, limits)
    return caught.value.reason, caught.value.path


def nested(depth: int, leaf: bytes = b"1") -> bytes:
    """``depth`` containers, alternating list and object, around ``leaf``."""
    for level in range(depth):
        leaf = b"[" + leaf + b"]" if level % 2 else b'{"a":' + leaf + b"}"
    return leaf


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b" ",
        b'{"a":1',
        b'{"a":}',
        b"[1,]",
        b"{'a':1}",
        b"[1 2]",
        b'{"a":1}x',
        b"\xef\xbb\xbf{}",
        b'["tab\there"]',
        b"[01]",
        b"[.5]",
    ],
)
def test_malformed(raw):
    assert rejection(raw) == ("malformed_json", "")


def test_truncated_real_bundle_at_every_tenth(real_raw):
    raw = next(iter(real_raw.values()))
    for cut in range(1, 10):
        assert rejection(raw[: len(raw) * cut // 10]) == ("malformed_json", "")


@pytest.mark.parametrize(
    "raw", [b'["\xff"]', b'{"\xc3":1}', b'["\xc0\xaf"]', b'["\xed\xa0\x80"]', b'["\xf4\x90\x80\x80"]', b'["ok"]\x80']
)
def test_invalid_utf8(raw):
    """Stray, truncated and overlong sequences, CESU-encoded surrogates, past U+10FFFF."""
    assert rejection(raw) == ("invalid_utf8", "")


@pytest.mark.parametrize("raw", [b'["\\ud800"]', b'{"\\udc00":1}', b'["\\ud83d\\ud83d"]', b'["a\\udfffb"]'])
def test_lone_surrogate(raw):
    assert rejection(raw) == ("invalid_unicode", "")


def test_surrogate_pair_is_one_character():
    assert parse(b'["\\ud83d\\ude00"]').data == ["\U0001f600"]


@pytest.mark.parametrize(
    "raw",
    [
        b"[NaN]",
        b"[Infinity]",
        b"[-Infinity]",
        b'{"a":{"b":NaN}}',
        b"[1e400]",
        b"[-1e400]",
        b"[1.5e999]",
        b' [ 1e400 ] ',
    ],
)
def test_non_finite(raw):
    assert rejection(raw) == ("non_finite_number", "")


def test_underflow_reads_as_zero_like_the_reference():
    assert parse(b"[1e-400]").data == json.loads(b"[1e-400]") == [0.0]


@pytest.mark.parametrize(
    "raw, key",
    [
        (b'{"a":1,"a":2}', "a"),
        (b'{"a":1,"a":1}', "a"),  # same value twice is still two members
        (b'{"x":{"b":[],"c":0,"b":[]}}', "b"),
        (b'[{"ok":1},{"k":true,"k":false}]', "k"),
        (b'{ "a" : 1 , "a" : 2 }', "a"),
    ],
)
def test_duplicate_keys(raw, key):
    assert rejection(raw) == ("duplicate_key", key)


def test_duplicate_key_inside_a_compact_real_bundle(real_raw):
    """Compact, orjson-shaped text is the fast path's input: a duplicate must not slip
    through it (a parser keeping the first value and one keeping the last disagree)."""
    raw = next(iter(real_raw.values()))
    forged = raw.replace(b'"primary_cat":', b'"primary_cat":"math.GM","primary_cat":', 1)
    assert forged != raw
    assert rejection(forged) == ("duplicate_key", "primary_cat")


def test_depth_limit_is_exact_on_both_paths():
    """Depth counts objects and lists; compact and pretty text of the same document
    must get the same answer at the limit and one past it."""
    for depth in (2, 3, 10, DEFAULT_MAX_DEPTH):
        limits = Limits(max_depth=depth, compact=False)  # the indented text of deep nesting is mostly padding
        for raw in (nested(depth), json.dumps(json.loads(nested(depth)), indent=1).encode()):
            assert parse(raw, limits).data == json.loads(raw)
        for raw in (nested(depth + 1), json.dumps(json.loads(nested(depth + 1)), indent=1).encode()):
            assert rejection(raw, limits) == ("too_deep", "")


def test_brackets_inside_strings_do_not_hide_depth():
    """Closing brackets quoted before a nest and opening ones after it cancel it out
    in a count of all bracket bytes: '["]",[[]],"["]' is three deep, not two."""
    assert rejection(b'["]",[[]],"["]', Limits(max_depth=2)) == ("too_deep", "")
    hidden = b"[]"
    for _ in range(DEFAULT_MAX_DEPTH):
        hidden = b'["]",' + hidden + b',"["]'
    assert rejection(hidden) == ("too_deep", "")


def test_brackets_and_escapes_inside_strings_do_not_add_depth():
    raw = b'{"a":"[[[{{{","b":"\\"]]]\\\\","c":[["}}}"]]}'
    assert parse(raw, Limits(max_depth=3)).data == json.loads(raw)


def container_depth(value) -> int:
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
    return 0 if children is None else 1 + max(map(container_depth, children), default=0)


bracket_text = st.text(alphabet='[]{}"\\ab', max_size=6)
bracketed = st.recursive(
    st.none() | st.integers() | bracket_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(bracket_text, inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(bracketed.filter(lambda v: isinstance(v, (dict, list))), st.booleans())
def test_depth_limit_is_exact_whatever_the_strings_hold(value, compact):
    """Strings full of brackets, quotes and backslashes, on the fast path (compact) and
    the reference path: accepted at exactly their depth, rejected one below it."""
    raw = json.dumps(value, separators=(",", ":") if compact else (", ", ": "), ensure_ascii=False).encode()
    depth = container_depth(value)
    assert parse(raw, Limits(max_depth=depth)).data == value
    if depth > 1:
        assert rejection(raw, Limits(max_depth=depth - 1)) == ("too_deep", "")


@pytest.mark.parametrize("depth", [DEFAULT_MAX_DEPTH + 1, 2_000, 200_000])
def test_excessive_nesting_never_exhausts_the_stack(depth):
    assert rejection(b"[" * depth + b"]" * depth) == ("too_deep", "")
    assert rejection(b'{"a":' * depth + b"1" + b"}" * depth) == ("too_deep", "")


def test_oversize_uses_the_configured_limit(real_raw):
    raw = next(iter(real_raw.values()))
    assert parse(raw, Limits(max_bytes=len(raw))).size == len(raw)
    assert rejection(raw, Limits(max_bytes=len(raw) - 1)) == ("too_large", "")


def test_oversize_default_limit():
    padded = b"[]".ljust(DEFAULT_MAX_BYTES)
    assert parse(padded, Limits(compact=False)).data == []
    assert rejection(padded + b" ", Limits(compact=False)) == ("too_large", "")
    assert rejection(padded) == ("not_compact", "")


def test_padding_bound_is_exact(real_raw):
    """A bundle may exceed its compact encoding by padded_bound's margin, not a byte more."""
    for raw in real_raw.values():
        bound = padded_bound(len(raw))
        at_bound = raw[:1] + b" " * (bound - len(raw)) + raw[1:]
        assert parse(at_bound).size == bound
        assert rejection(at_bound[:1] + b" " + at_bound[1:]) == ("not_compact", "")


@pytest.mark.parametrize("number", [2**64, -(2**63) - 1, 10**100, -(10**300)])
def test_big_integers_read_exactly(number):
    raw = json.dumps({"n": number}, separators=(",", ":")).encode()
    document = parse(raw)
    assert document.data == {"n": number}
    assert document.exact is False  # the fast serializer cannot write them


def test_integer_past_the_interpreter_digit_limit_is_malformed():
    """The reference parser refuses integers of over 4300 digits (CPython's limit)."""
    assert rejection(b"[" + b"7" * 5000 + b"]") == ("malformed_json", "")


def test_compact_real_bundles_take_the_fast_path(real_raw, real_docs):
    for suffix, raw in real_raw.items():
        document = parse(raw)
        assert document.data == real_docs[suffix]
        assert document.exact is True


@pytest.mark.parametrize(
    "layout",
    [{"indent": 2}, {"indent": "\t"}, {"separators": (", ", ": ")}, {"separators": (",", ":"), "ensure_ascii": True}],
)
def test_other_layouts_take_the_reference_path_and_read_the_same(real_raw, real_docs, layout):
    """Whitespace or escapes orjson would not write disprove the fast path's premise:
    the reference path takes over (exact is then False) and reads the same document."""
    for suffix, doc in real_docs.items():
        raw = json.dumps(doc, **layout).encode()
        if raw == real_raw[suffix]:
            continue  # ensure_ascii on an ASCII bundle: the same bytes
        document = parse(raw, Limits(compact=False))
        assert document.data == doc
        assert document.exact is False


def test_floats_are_never_exact():
    """orjson writes some floats otherwise than json.dumps (1e-07): such documents must
    be hashed by the reference serializer even when their text is compact."""
    assert parse(b"[1e-7]").exact is False
    assert parse(b'{"a":0.5}').exact is False
    assert parse(b'{"a":5}').exact is True


_TEXT = st.lists(st.sampled_from(list('ab.eE"\\/é\n\x01 ') + ["true", "false", "1.5", "e7"]), max_size=8).map("".join)
_FLOAT_FREE = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(document=_FLOAT_FREE, float_value=st.floats(allow_nan=False, allow_infinity=False))
def test_float_free_documents_are_read_alike_and_exact_and_a_float_anywhere_is_not(document, float_value):
    """Compact text with no float is read by orjson itself (whatever its strings hold:
    dots, e's, escaped quotes and backslashes, true and false); the same document with a
    float beside it goes to the float-noting reader, and is never exact."""
    import orjson

    raw = orjson.dumps(document)
    read = parse(raw)
    assert read.data == json.loads(raw) and read.exact is True
    with_float = orjson.dumps([document, float_value])
    read = parse(with_float)
    assert read.data == json.loads(with_float) and read.exact is False
