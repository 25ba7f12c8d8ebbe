"""The Merkle log core against RFC 9162's recursive definitions written out plainly
here (MTH, PATH, SUBPROOF), for every size and index up to 40, plus known answers."""

import hashlib

import pytest

from pith.merkle import Tree, leaf_hash, node_hash, verify_consistency, verify_inclusion
from pith.tiles import TileEdge


def sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def entries(n: int) -> list[bytes]:
    return [sha(b"entry %d" % i) for i in range(n)]


def split(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(d: list[bytes]) -> bytes:
    """RFC 9162 2.1.1, word for word."""
    if not d:
        return sha(b"")
    if len(d) == 1:
        return sha(b"\x00" + d[0])
    k = split(len(d))
    return sha(b"\x01" + mth(d[:k]) + mth(d[k:]))


def path(m: int, d: list[bytes]) -> list[bytes]:
    """RFC 9162 2.1.3.1."""
    if len(d) == 1:
        return []
    k = split(len(d))
    return path(m, d[:k]) + [mth(d[k:])] if m < k else path(m - k, d[k:]) + [mth(d[:k])]


def subproof(m: int, d: list[bytes], b: bool) -> list[bytes]:
    """RFC 9162 2.1.4.1."""
    if m == len(d):
        return [] if b else [mth(d)]
    k = split(len(d))
    return subproof(m, d[:k], b) + [mth(d[k:])] if m <= k else subproof(m - k, d[k:], False) + [mth(d[:k])]


SIZES = range(1, 41)


@pytest.fixture(scope="module")
def trees():
    data = entries(max(SIZES) + 1)
    return data, Tree(leaf_hash(e) for e in data[:-1])


def test_roots_match_the_recursive_definition(trees):
    data, tree = trees
    edge = TileEdge()  # the writer's view: partial tiles only
    assert tree.root(0) == edge.root() == sha(b"")
    for n in SIZES:
        list(edge.extend([data[n - 1]]))
        assert tree.root(n) == edge.root() == mth(data[:n]), n


def test_inclusion_proofs_match_and_verify(trees):
    data, tree = trees
    for n in SIZES:
        root = mth(data[:n])
        for m in range(n):
            proof = tree.inclusion_proof(m, n)
            assert proof == path(m, data[:n])
            assert verify_inclusion(leaf_hash(data[m]), m, n, proof, root)
            # (the size itself is bound by the signed checkpoint: against its root, a proof
            # for leaf m may also fit another size, as RFC 9162 allows)
            assert not verify_inclusion(leaf_hash(data[m]), m, n, proof, mth(data[: n + 1]))
            assert not verify_inclusion(leaf_hash(data[(m + 1) % n]), m, n, proof, root) or n == 1
            if proof:
                assert not verify_inclusion(leaf_hash(data[m]), m, n, proof[:-1], root)
                assert not verify_inclusion(leaf_hash(data[m]), m, n, [*proof, proof[0]], root)
            assert not verify_inclusion(leaf_hash(data[m]), n, n, proof, root)


def test_consistency_proofs_match_and_verify(trees):
    data, tree = trees
    for n in SIZES:
        for m in range(n + 1):
            proof = tree.consistency_proof(m, n)
            assert proof == ([] if m in (0, n) else subproof(m, data[:n], True)), (m, n)
            assert verify_consistency(m, n, proof, mth(data[:m]), mth(data[:n])), (m, n)
            if 0 < m < n:
                other = mth(entries(m + 1)[1:])  # a tree of m other leaves
                assert not verify_consistency(m, n, proof, other, mth(data[:n]))
                assert not verify_consistency(m, n, proof[:-1], mth(data[:m]), mth(data[:n]))
                assert not verify_consistency(m, n, proof, mth(data[:m]), mth(data[: n + 1]))
    assert not verify_consistency(3, 2, [], mth(data[:3]), mth(data[:2]))


def test_known_answers():
    """Fixed values for a few trees of the entries b"" and b"\\x00".."\\x06" (computed
    with the plain definitions above), so a change of hashing is caught."""
    leaves = [
        b"",
        b"\x00",
        b"\x10",
        b"\x20\x21",
        b"\x30\x31",
        b"\x40\x41\x42\x43",
        b"\x50\x51\x52\x53\x54\x55\x56\x57",
        b"\x60\x61\x62\x63\x64\x65\x66\x67\x68\x69\x6a\x6b\x6c\x6d\x6e\x6f",
    ]
    tree = Tree(leaf_hash(leaf) for leaf in leaves)
    assert leaf_hash(b"").hex() == "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
    assert node_hash(leaf_hash(b""), leaf_hash(b"\x00")) == mth(leaves[:2])
    # RFC 6962 test vectors of these eight entries (the Go and C++ CT code use them too)
    assert tree.root(1).hex() == "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
    assert tree.root(2).hex() == "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"
    assert tree.root(3).hex() == "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77"
    assert tree.root(4).hex() == "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"
    assert tree.root(5).hex() == "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4"
    assert tree.root(6).hex() == "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef"
    assert tree.root(7).hex() == "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c"
    assert tree.root(8).hex() == "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"
