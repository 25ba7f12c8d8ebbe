"""Reading a C2SP tlog-tiles log back from its tiles, checked against its checkpoints.

A reader that holds the entries of a log up to an older checkpoint reads only what
the log added since: the right edge of the older tree (``edge_of``, a prefix of at
most one tile per level and of one entry bundle, all taken from the newer tree's
tiles) must give the older root, and the new entries appended to that edge must
give the newer root. Both roots matching proves the newer log extends the older one
(the tiles' hashes stand for the older tree's own) and that every entry read is the
one the newer checkpoint signs, without a proof from the log's server: the tiles are
the proof. Memory stays one tile per level, whatever the log's size.
"""

from collections.abc import Callable, Iterator

from .merkle import HASH_SIZE
from .tiles import WIDTH, TileEdge, bundle, entries_path, tile_path, unbundle

Read = Callable[[str], bytes]  # a tile path (``pith.tiles``) -> its bytes


def _width(count: int, index: int) -> int:
    """How many hashes (or entries) tile ``index`` holds in a row of ``count``."""
    return min(WIDTH, count - index * WIDTH)


def edge_of(size: int, log_size: int, read: Read) -> TileEdge:
    """The right edge of a log's first ``size`` leaves, read from the tiles of the log
    at ``log_size`` leaves; ValueError when a tile is too short."""
    partial_tiles, level = {}, 0
    while size >> (8 * level):
        count = size >> (8 * level)
        if count % WIDTH:
            index = count // WIDTH
            data = read(tile_path(level, index, _width(log_size >> (8 * level), index)))
            partial_tiles[level] = data[: (count % WIDTH) * HASH_SIZE]
        level += 1
    entries = b""
    if size % WIDTH:
        index = size // WIDTH
        entries = bundle(unbundle(read(entries_path(index, _width(log_size, index))))[: size % WIDTH])
    return TileEdge(size, partial_tiles, entries)


def entry_batches(start: int, size: int, read: Read) -> Iterator[tuple[int, list[bytes]]]:
    """The entries ``start`` to ``size`` of a log of ``size`` leaves, an entry bundle at
    a time: ``(index of the first, entries)``. ValueError when a bundle holds another
    number of entries than its path names."""
    for index in range(start // WIDTH, -(-size // WIDTH)):
        width = _width(size, index)
        path = entries_path(index, width)
        entries = unbundle(read(path))
        if len(entries) != width:
            raise ValueError(f"{path} holds {len(entries)} entries, not {width}")
        first = max(start - index * WIDTH, 0)
        yield index * WIDTH + first, entries[first:]


def append(edge: TileEdge, entries: list[bytes]) -> None:
    """Grow ``edge`` by ``entries`` (the tiles a writer would write are not kept)."""
    for _ in edge.extend(entries):
        pass
