"""Merkle tree logs hashed as RFC 9162 (Certificate Transparency 2.0) section 2.1, so
that a log's proofs check with any implementation of that RFC.

A leaf is hashed ``SHA-256(0x00 || input)``, an interior node ``SHA-256(0x01 || left
|| right)``; a tree of ``n > 1`` leaves splits at the largest power of two below ``n``.
``Tree`` keeps every perfect subtree's hash, so a root, an
inclusion proof or a consistency proof of any size up to its own costs O(log n)
hashes once the tree is built (in O(n)).
"""

import hashlib
from collections.abc import Iterable

HASH_SIZE = 32


def leaf_hash(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(size: int) -> int:
    """The largest power of two smaller than ``size`` (> 1)."""
    return 1 << ((size - 1).bit_length() - 1)


def fold_peaks(peaks: list[bytes]) -> bytes:
    """The root of a tree given its perfect subtrees' roots, largest (leftmost) first."""
    if not peaks:
        return hashlib.sha256(b"").digest()
    root = peaks[-1]
    for peak in reversed(peaks[:-1]):
        root = node_hash(peak, root)
    return root


class Tree:
    """A log held in memory as the hashes of all its perfect subtrees (64 bytes a leaf)."""

    def __init__(self, leaves: Iterable[bytes] = ()) -> None:
        self._levels: list[bytearray] = [bytearray()]  # level h: the perfect subtrees of 2**h leaves, in order
        for leaf in leaves:
            self.append(leaf)

    @property
    def size(self) -> int:
        return len(self._levels[0]) // HASH_SIZE

    def append(self, leaf: bytes) -> None:
        """Add a leaf given by its leaf hash."""
        if len(leaf) != HASH_SIZE:
            raise ValueError(f"a leaf hash is {HASH_SIZE} bytes, not {len(leaf)}")
        level, node = 0, leaf
        while True:
            if level == len(self._levels):
                self._levels.append(bytearray())
            row = self._levels[level]
            row += node
            count = len(row) // HASH_SIZE
            if count % 2:
                return
            node = node_hash(bytes(row[-2 * HASH_SIZE : -HASH_SIZE]), node)
            level += 1

    def index_of(self, leaf: bytes) -> int | None:
        """The first index of the leaf hash ``leaf`` (None: not in the tree)."""
        row, at = self._levels[0], 0
        while (at := row.find(leaf, at)) >= 0:
            if at % HASH_SIZE == 0:
                return at // HASH_SIZE
            at += 1
        return None

    def leaf(self, index: int) -> bytes:
        return bytes(self._levels[0][index * HASH_SIZE : (index + 1) * HASH_SIZE])

    def _hash(self, start: int, end: int) -> bytes:
        """MTH of leaves [start, end): a perfect aligned range is looked up, any other
        range of an RFC 9162 tree splits into O(log n) of them."""
        width = end - start
        if width & (width - 1) == 0 and start % width == 0:
            level = width.bit_length() - 1
            at = (start >> level) * HASH_SIZE
            return bytes(self._levels[level][at : at + HASH_SIZE])
        middle = start + _split(width)
        return node_hash(self._hash(start, middle), self._hash(middle, end))

    def _check_size(self, size: int | None) -> int:
        size = self.size if size is None else size
        if not 0 <= size <= self.size:
            raise ValueError(f"the tree has {self.size} leaves, not {size}")
        return size

    def root(self, size: int | None = None) -> bytes:
        """MTH of the first ``size`` leaves (default: all)."""
        size = self._check_size(size)
        return self._hash(0, size) if size else hashlib.sha256(b"").digest()

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        """PATH(index, D[0:size]) of RFC 9162 2.1.3.1: siblings from the leaf up."""
        size = self._check_size(size)
        if not 0 <= index < size:
            raise ValueError(f"leaf {index} is not in a tree of {size}")
        proof, start, end = [], 0, size
        while end - start > 1:
            middle = start + _split(end - start)
            if index < middle:
                proof.append(self._hash(middle, end))
                end = middle
            else:
                proof.append(self._hash(start, middle))
                start = middle
        return proof[::-1]

    def consistency_proof(self, old: int, new: int | None = None) -> list[bytes]:
        """PROOF(old, D[0:new]) of RFC 9162 2.1.4.1 (empty when old is 0 or new)."""
        new = self._check_size(new)
        if not 0 <= old <= new:
            raise ValueError(f"no consistency proof from {old} to {new} leaves")
        if old in (0, new):
            return []
        proof, start, end, whole = [], 0, new, True
        while end - start != old - start:
            middle = start + _split(end - start)
            if old <= middle:
                proof.append(self._hash(middle, end))
                end = middle
            else:
                proof.append(self._hash(start, middle))
                start, whole = middle, False
        if not whole:
            proof.append(self._hash(start, end))
        return proof[::-1]


def verify_inclusion(leaf: bytes, index: int, size: int, proof: list[bytes], root: bytes) -> bool:
    """RFC 9162 2.1.3.2: does ``proof`` place the leaf hash ``leaf`` at ``index`` of the
    tree of ``size`` leaves whose root is ``root``?"""
    if not 0 <= index < size:
        return False
    fn, sn, node = index, size - 1, leaf
    for sibling in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            node = node_hash(sibling, node)
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            node = node_hash(node, sibling)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and node == root


def verify_consistency(old: int, new: int, proof: list[bytes], old_root: bytes, new_root: bytes) -> bool:
    """RFC 9162 2.1.4.2: is the tree of ``new`` leaves with ``new_root`` an extension of
    the tree of ``old`` leaves with ``old_root``? (Equal sizes: equal roots, no proof.
    An empty old tree: any new tree, no proof.)"""
    if not 0 <= old <= new:
        return False
    if old == new:
        return not proof and old_root == new_root
    if old == 0:
        return not proof
    if not proof:
        return False
    path = [old_root, *proof] if old & (old - 1) == 0 else list(proof)
    fn, sn = old - 1, new - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    first = second = path[0]
    for node in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            first, second = node_hash(node, first), node_hash(node, second)
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            second = node_hash(second, node)
        fn, sn = fn >> 1, sn >> 1
    return first == old_root and second == new_root and sn == 0
