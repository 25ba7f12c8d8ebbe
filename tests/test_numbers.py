"""Pith numbers from canonical hashes, against the format's definition written out
here: the first 26 characters of the base32 of the whole 32-byte digest."""

import base64

from hypothesis import given, settings
from hypothesis import strategies as st

from pith.numbers import pith_number, pith_suffix, short_pith_number


def defined_suffix(digest: bytes) -> str:
    return base64.b32encode(digest).decode("ascii")[:26]


@settings(max_examples=500, deadline=None)
@given(st.binary(min_size=32, max_size=32))
def test_suffix_is_the_base32_of_the_whole_digest_cut_to_26(digest):
    assert pith_suffix(digest.hex()) == defined_suffix(digest)


def test_the_real_bundles_numbers(real_docs):
    for suffix, doc in real_docs.items():
        canonical = doc["canonical_sha256"]
        assert pith_suffix(canonical) == defined_suffix(bytes.fromhex(canonical)) == suffix
        assert pith_number(canonical, doc["canonical_record"]["metadata"]["submitted_at"]) == doc["pith_number"]
        assert short_pith_number(suffix) == doc["short_pith_number"]
