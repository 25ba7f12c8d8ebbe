"""Fuzzing the parser and the verifier with hypothesis-driven mutation of the real
bundles (bytes and structure), and replaying the corpus kept in tests/fuzz_corpus/.

For every input: no exception escapes (``verify_bundle`` returns a Verdict whose
reason is a stable code), nothing hangs (pytest-timeout bounds each test), and a
mutated bundle verifies only if it still means the same bundle (every value equal
but the one unhashed ``bundle_signature.signed_at``). Memory stays within a constant
factor of the input, which the parser bounds by size and depth.

PITH_FUZZ_EXAMPLES (default 150) sets the examples per property; a long campaign is
``PITH_FUZZ_EXAMPLES=20000 python -m pytest tests/test_fuzz.py``. An input that once
found a problem goes into tests/fuzz_corpus/ with its expected reason in
expected.json (see tests/fuzz_corpus/README.md).
"""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pith.keyring import Keyring
from pith.parse import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH, parse
from pith.reasons import REASONS, Rejected
from pith.verify import verify_bundle
from tests.plugins.core import real_bundle_paths
from tests.tamper import locate
from tests.test_verify_properties import walk

CORPUS = Path(__file__).parent / "fuzz_corpus"
EXPECTED = json.loads((CORPUS / "expected.json").read_text("utf-8"))
EXAMPLES = int(os.environ.get("PITH_FUZZ_EXAMPLES", "150"))
REAL = {path.name: path.read_bytes() for path in real_bundle_paths()}
REGISTRY = Keyring.default()
UNHASHED = ("bundle_signature", "signed_at")
FUZZ = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def corpus_files() -> list[Path]:
    return sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.name not in ("README.md", "expected.json"))


def meaning(document) -> object:
    """What a verified bundle says, less the one value no hash covers."""
    if isinstance(document, dict) and isinstance(document.get(UNHASHED[0]), dict):
        document = {**document, UNHASHED[0]: {k: v for k, v in document[UNHASHED[0]].items() if k != UNHASHED[1]}}
    return document


REAL_MEANINGS = [meaning(json.loads(raw)) for raw in REAL.values()]


def check(raw: bytes):
    """The fuzz oracle: a Verdict, never an exception; a named reason; and a verified
    input is one of the real bundles, whatever bytes spell it."""
    verdict = verify_bundle(raw, REGISTRY)
    assert verdict.status in ("verified", "rejected")
    if verdict.ok:
        assert meaning(json.loads(raw)) in REAL_MEANINGS, "a changed bundle verified"
    else:
        assert verdict.reason in REASONS and verdict.reason not in ("fetch_failed",)
    return verdict


# --- the corpus ------------------------------------------------------------------------------


def test_every_corpus_file_has_an_expected_verdict():
    names = {str(path.relative_to(CORPUS)) for path in corpus_files()}
    assert names == set(EXPECTED), "add the file to expected.json, or remove the stale entry"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_replays_to_its_expected_verdict(name):
    verdict = check((CORPUS / name).read_bytes())
    assert (verdict.reason or verdict.status) == EXPECTED[name]


# --- byte mutation ---------------------------------------------------------------------------

TOKENS = [
    b"{",
    b"}",
    b"[",
    b"]",
    b'"',
    b",",
    b":",
    b"\\",
    b"\\u",
    b"\\ud800",
    b"\\udc00",
    b"\x00",
    b"\xff",
    b"\xc0\x80",
    b"\xed\xa0\x80",
    b"\xef\xbb\xbf",
    b"NaN",
    b"-Infinity",
    b"-0",
    b"1e400",
    b"1e-400",
    b"9" * 4301,
    b"[" * (DEFAULT_MAX_DEPTH + 1),
    b"null",
    b"true",
    b'"pith_number":',
    b" \t\r\n",
]
SEEDS = [*REAL.values(), *(path.read_bytes() for path in corpus_files() if path.stat().st_size < 200_000)]


@st.composite
def mutated_bytes(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(["flip", "byte", "delete", "insert", "duplicate", "token", "truncate", "splice"]))
        if kind == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "byte" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 64))]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "duplicate":
            data[at:at] = data[at : at + draw(st.integers(1, 256))]
        elif kind == "token":
            data[at:at] = draw(st.sampled_from(TOKENS))
        elif kind == "truncate":
            del data[at:]
        elif kind == "splice":
            other = draw(st.sampled_from(SEEDS))
            data[at:] = other[draw(st.integers(0, len(other))) :]
    return bytes(data)


@pytest.mark.timeout(300)
@FUZZ
@given(mutated_bytes())
def test_byte_mutations_never_escape_and_never_verify_changed(raw):
    check(raw)


# --- structure mutation ----------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)


def nested(depth: int):
    return [] if depth <= 1 else [nested(depth - 1)]


hostile_values = st.sampled_from(
    [
        nested(DEFAULT_MAX_DEPTH),
        10**4000,
        -0.0,
        5e-324,
        1e308,
        "\ud7ff\ue000\U0010ffff",
        "\x00",
        "a" * 100_000,
        {"": None},
        [],
        {},
    ]
).map(copy.deepcopy)  # a fresh copy each time: a mutation must never reach into a shared value (a cycle)


@st.composite
def mutated_documents(draw) -> bytes:
    document = json.loads(draw(st.sampled_from(list(REAL.values()))))
    paths = [path for path, _ in walk(document) if path]
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        try:
            parent, key = locate(document, path)
            action = draw(st.sampled_from(["replace", "hostile", "delete", "add"]))
            if action == "delete":
                del parent[key]
            elif action == "add" and isinstance(parent, dict):
                parent[draw(st.text(max_size=12))] = draw(json_values)
            else:
                parent[key] = draw(hostile_values if action == "hostile" else json_values)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change removed or replaced what this path named
    indent = draw(st.sampled_from([None, 0, 2]))
    return json.dumps(document, indent=indent, ensure_ascii=draw(st.booleans())).encode("utf-8")


@pytest.mark.timeout(300)
@FUZZ
@given(mutated_documents())
def test_structure_mutations_never_escape_and_never_verify_changed(raw):
    check(raw)


@pytest.mark.timeout(300)
@FUZZ
@given(st.binary(max_size=2048) | st.text(max_size=512).map(lambda text: text.encode("utf-8", "surrogatepass")))
def test_arbitrary_bytes_are_parsed_or_rejected_by_name(raw):
    try:
        parse(raw)
    except Rejected as rejected:
        assert rejected.reason in REASONS
    check(raw)


# --- bounds ----------------------------------------------------------------------------------

RSS_PROBE = """
import resource
from pith.keyring import Keyring
from pith.verify import verify_bundle
raw = {shape}
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
verdict = verify_bundle(raw, Keyring.default())
print(verdict.reason, len(raw), (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""
WORST_SHAPES = {  # 2 MiB each; the factor is the same at the 8 MiB limit (docs/RELIABILITY.md)
    "nesting": 'b"[" * (1 << 20) + b"]" * (1 << 20)',
    "empty objects": 'b"[" + b"{}," * ((1 << 21) // 3) + b"{}]"',
    "pretty-printed objects": 'b"[\\n" + b" {},\\n" * ((1 << 21) // 5) + b" {}\\n]"',
}
MEMORY_FACTOR = 48  # bytes of peak memory per byte of input, at worst


@pytest.mark.parametrize("shape", sorted(WORST_SHAPES))
def test_memory_stays_within_a_constant_factor_of_the_input(shape):
    """Peak resident memory of a fresh process verifying the shape that costs the
    parser most per byte (each object its own dict, pairs first on the reference path)."""
    probe = subprocess.run(
        [sys.executable, "-c", RSS_PROBE.format(shape=WORST_SHAPES[shape])],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    reason, size, grown = probe.stdout.split()
    assert reason in ("too_deep", "schema_violation", "not_compact")
    assert int(grown) <= MEMORY_FACTOR * int(size), f"{shape}: {int(grown) / int(size):.1f} bytes per byte"


def test_past_the_limits_nothing_is_read():
    assert verify_bundle(b" " * (DEFAULT_MAX_BYTES + 1), REGISTRY).reason == "too_large"
    deep = b"[" * (DEFAULT_MAX_DEPTH + 1) + b"]" * (DEFAULT_MAX_DEPTH + 1)
    assert verify_bundle(deep, REGISTRY).reason == "too_deep"
    assert verify_bundle(deep[1:-1], REGISTRY).reason == "schema_violation"  # exactly at the limit: read
