"""Canonical JSON must be byte-equal to the reference form of PITH-FORMAT.md, and the
parser must read every JSON text as the reference ``json`` module does: every hash in
a bundle is over these bytes, so one differing byte is a false rejection (or worse)."""

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pith.canonical import canon, canon_sha256, sha256_hex
from pith.parse import parse
from pith.reasons import Rejected


def reference(value) -> bytes:
    """The format's definition, written out here as the independent oracle."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def has_float(value) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(has_float(v) for v in value.values())
    if isinstance(value, list):
        return any(has_float(v) for v in value)
    return False


TEXTS = [
    "plain ascii",
    "é ñ ü ß",  # Latin-1 range, written raw
    "中文 日本語 한국어",  # BMP CJK
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 😀 \U0010ffff",  # astral plane, up to the last code point
    "".join(map(chr, range(0x20))),  # every C0 control: \\uXXXX or the short escapes
    "\x7f\x80\x9f",  # DEL and C1 controls: written raw
    "\u2028\u2029\ufeff\ufffe\uffff",  # separators, BOM, non-characters: raw
    '"quoted" \\back\\slash/ solidus',
]
FLOATS = [
    0.0,
    -0.0,
    1.0,
    0.1,
    1e16,
    1e-7,
    5e-324,
    1e22,
    1e21,
    123456789.125,
    1.7976931348623157e308,
    -2.5e-308,
    2.0**53,
    0.30000000000000004,
]
INTS = [0, -1, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1, 2**64, -(2**63) - 1, 10**30, -(10**40)]
ORDERED_KEYS = {"\uffff": 1, "\U00010000": 2, "a": 3, "A": 4, "é": 5, "": 6, "aa": 7, "\x00": 8}


@pytest.mark.parametrize("text", TEXTS)
def test_text_matches_reference_both_ways(text):
    value = {text: [text]}
    assert canon(value) == reference(value)
    assert canon(value, exact=True) == reference(value)


def test_keys_sort_by_code_point_not_utf16():
    """U+FFFF sorts before U+10000 by code point; UTF-16 order would reverse them."""
    assert canon(ORDERED_KEYS, exact=True) == reference(ORDERED_KEYS)
    assert canon(ORDERED_KEYS).index("\uffff".encode()) < canon(ORDERED_KEYS).index("\U00010000".encode())


@pytest.mark.parametrize("number", FLOATS)
def test_floats_match_reference(number):
    assert canon([number]) == reference([number])


@pytest.mark.parametrize("number", INTS)
def test_integers_match_reference_both_ways(number):
    """Past 64 bits the fast serializer cannot write an integer; the fallback must."""
    assert canon({"n": number}) == reference({"n": number})
    assert canon({"n": number}, exact=True) == reference({"n": number})


def test_sha256_is_over_the_canonical_bytes():
    value = {"b": "é", "a": 2**70}
    assert canon_sha256(value) == canon_sha256(value, exact=True) == sha256_hex(reference(value))


# --- hypothesis: arbitrary JSON values --------------------------------------------------

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4), max_leaves=20
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(json_values)
def test_canon_is_the_reference(value):
    assert canon(value) == reference(value)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(json_values)
def test_exact_canon_is_the_reference_without_floats(value):
    if not has_float(value):
        assert canon(value, exact=True) == reference(value)


LAYOUTS = [
    {"separators": (",", ":")},
    {"separators": (",", ":"), "ensure_ascii": False},
    {"indent": 2, "ensure_ascii": False},
    {"separators": (" ,\n", " :\t")},
]


@settings(max_examples=300, deadline=None)
@given(json_values, st.sampled_from(LAYOUTS))
def test_parse_reads_any_text_as_the_reference(value, layout):
    """Whatever path parse() takes, the data and its canonical bytes (with the exact
    flag it reports) are those of the reference reading."""
    raw = json.dumps(value, **layout).encode("utf-8")
    expected = reference(json.loads(raw))
    document = parse(raw)
    assert reference(document.data) == expected
    assert canon(document.data, document.exact) == expected


number_literals = st.from_regex(r"-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?", fullmatch=True)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(number_literals, st.booleans())
def test_parse_reads_any_number_literal_as_the_reference(literal, compact):
    """Number spellings json.dumps never writes (1E5, 1e+05, -0, 0.10): same value and
    bytes as the reference, or a non_finite_number rejection where it overflows."""
    raw = (f"[{literal}]" if compact else f"[ {literal} ]").encode()
    value = json.loads(raw)
    if isinstance(value[0], float) and math.isinf(value[0]):
        with pytest.raises(Rejected) as caught:
            parse(raw)
        assert caught.value.reason == "non_finite_number"
        return
    document = parse(raw)
    assert canon(document.data, document.exact) == reference(value)
