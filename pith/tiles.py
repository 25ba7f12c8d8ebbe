"""A log as C2SP ``tlog-tiles``: static objects any tlog client reads, with no server.

Level 0 tiles hold leaf hashes, 256 to a full tile; entry ``i`` of a tile at level
``L > 0`` is the root of the full tile ``256 * n + i`` of level ``L - 1`` (a perfect
subtree of ``256**L`` leaves). A tile is at ``tile/<L>/<N>``, the rightmost one of a
level, not full, at ``tile/<L>/<N>.p/<W>`` (``W`` its hashes). ``<N>`` is written in
groups of three digits, all but the last prefixed with ``x`` (``1234067`` is
``x001/x234/067``). Entry bundles (``tile/entries/<N>[.p/<W>]``) hold the entries
themselves, each behind its length as two big-endian bytes. Full tiles never change
once written; a partial tile's path names its width, so no path ever changes content.

``TileEdge`` is what a writer keeps of a growing log: the partial tile of each level
and the partial entry bundle (at most 255 hashes or entries each), which is enough
to append and to compute the root.
"""

from collections.abc import Iterable, Iterator

from .merkle import HASH_SIZE, fold_peaks, leaf_hash, node_hash

WIDTH = 256
MAX_ENTRY_BYTES = 0xFFFF


def index_path(index: int) -> str:
    """``1234067`` -> ``x001/x234/067``."""
    digits = str(index)
    digits = digits.zfill(-(-len(digits) // 3) * 3)
    groups = [digits[at : at + 3] for at in range(0, len(digits), 3)]
    return "/".join([*(f"x{group}" for group in groups[:-1]), groups[-1]])


def tile_path(level: int, index: int, width: int = WIDTH) -> str:
    partial = f".p/{width}" if width < WIDTH else ""
    return f"tile/{level}/{index_path(index)}{partial}"


def entries_path(index: int, width: int = WIDTH) -> str:
    partial = f".p/{width}" if width < WIDTH else ""
    return f"tile/entries/{index_path(index)}{partial}"


def bundle(entries: Iterable[bytes]) -> bytes:
    out = bytearray()
    for entry in entries:
        if len(entry) > MAX_ENTRY_BYTES:
            raise ValueError(f"an entry of {len(entry)} bytes does not fit an entry bundle")
        out += len(entry).to_bytes(2, "big") + entry
    return bytes(out)


def unbundle(data: bytes) -> list[bytes]:
    """The entries of an entry bundle; ValueError when it is cut short."""
    entries, at = [], 0
    while at < len(data):
        length = int.from_bytes(data[at : at + 2], "big")
        if at + 2 + length > len(data):
            raise ValueError(f"an entry bundle cut short at byte {at}")
        entries.append(data[at + 2 : at + 2 + length])
        at += 2 + length
    return entries


def hashes(data: bytes) -> list[bytes]:
    if len(data) % HASH_SIZE:
        raise ValueError(f"a tile of {len(data)} bytes is not whole hashes")
    return [data[at : at + HASH_SIZE] for at in range(0, len(data), HASH_SIZE)]


def _perfect_root(nodes: list[bytes]) -> bytes:
    """The root of a perfect tree over ``nodes`` (a power of two of them)."""
    while len(nodes) > 1:
        nodes = [node_hash(nodes[at], nodes[at + 1]) for at in range(0, len(nodes), 2)]
    return nodes[0]


def edge_paths(size: int) -> tuple[dict[int, str], str | None]:
    """The partial tile of each level (level -> path) and the partial entry bundle of
    a log of ``size`` leaves: what a writer reads back to go on appending."""
    tiles, level = {}, 0
    while size >> (8 * level):
        count = size >> (8 * level)
        if count % WIDTH:
            tiles[level] = tile_path(level, count // WIDTH, count % WIDTH)
        level += 1
    return tiles, entries_path(size // WIDTH, size % WIDTH) if size % WIDTH else None


class TileEdge:
    """The right edge of a tiled log: appends entries, says which tiles each batch
    writes, and gives the root."""

    def __init__(self, size: int = 0, partial_tiles: dict[int, bytes] | None = None, partial_entries: bytes = b""):
        """Resume a log of ``size`` leaves from the contents of its ``edge_paths``."""
        self.size = size
        self._levels: list[list[bytes]] = []
        level = 0
        while size >> (8 * level):
            row = hashes((partial_tiles or {}).get(level, b""))
            if len(row) != (size >> (8 * level)) % WIDTH:
                raise ValueError(f"the partial tile of level {level} does not hold a log of {size} leaves")
            self._levels.append(row)
            level += 1
        self._entries = unbundle(partial_entries)
        if len(self._entries) != size % WIDTH:
            raise ValueError(f"the partial entry bundle does not hold a log of {size} leaves")

    def extend(self, entries: Iterable[bytes]) -> Iterator[tuple[str, bytes]]:
        """Append ``entries``, yielding each tile and entry bundle the grown log needs
        written, ``(path, bytes)``: the full ones as they complete (so a writer holds
        one at a time), then the new partial ones. Consume it whole."""
        before = self.size
        for entry in entries:
            full: list[tuple[str, bytes]] = []
            self._entries.append(entry)
            if len(self._entries) == WIDTH:
                full.append((entries_path(self.size // WIDTH), bundle(self._entries)))
                self._entries = []
            self._add(0, leaf_hash(entry), full)
            self.size += 1
            yield from full
        if self.size == before:
            return
        if self._entries:
            yield entries_path(self.size // WIDTH, len(self._entries)), bundle(self._entries)
        for level, row in enumerate(self._levels):
            if row and (self.size >> (8 * level)) != (before >> (8 * level)):
                yield tile_path(level, (self.size >> (8 * level)) // WIDTH, len(row)), b"".join(row)

    def _add(self, level: int, node: bytes, written: list[tuple[str, bytes]]) -> None:
        if level == len(self._levels):
            self._levels.append([])
        row = self._levels[level]
        row.append(node)
        if len(row) == WIDTH:
            written.append((tile_path(level, (self.size >> (8 * level)) // WIDTH), b"".join(row)))
            self._levels[level] = []
            self._add(level + 1, _perfect_root(row), written)

    def root(self) -> bytes:
        """The RFC 9162 root: the perfect subtrees of each level's partial tile
        (largest first, top level first), folded from the right."""
        peaks = []
        for row in reversed(self._levels):
            at = 0
            for bit in range(7, -1, -1):
                if len(row) & (1 << bit):
                    peaks.append(_perfect_root(row[at : at + (1 << bit)]))
                    at += 1 << bit
        return fold_peaks(peaks)


def level0_paths(size: int) -> list[str]:
    """The level 0 tiles of a log of ``size`` leaves: its leaf hashes, in order."""
    paths = [tile_path(0, index) for index in range(size // WIDTH)]
    return paths + ([tile_path(0, size // WIDTH, size % WIDTH)] if size % WIDTH else [])
