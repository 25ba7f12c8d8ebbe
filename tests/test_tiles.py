"""The log as C2SP tlog-tiles (pith.tiles): paths, entry bundles, and a writer that
keeps only the right edge yet writes exactly the tiles of the whole tree, whatever
the batches it appends, and resumes from the partial tiles alone."""

import hashlib

import pytest

from pith.merkle import Tree, leaf_hash, node_hash
from pith.tiles import TileEdge, bundle, edge_paths, entries_path, hashes, index_path, tile_path, unbundle


def test_paths_follow_the_spec():
    assert [index_path(n) for n in (0, 7, 999, 1000, 1234067)] == ["000", "007", "999", "x001/000", "x001/x234/067"]
    assert tile_path(0, 1234067) == "tile/0/x001/x234/067"
    assert tile_path(1, 2, 5) == "tile/1/002.p/5"
    assert entries_path(3, 255) == "tile/entries/003.p/255"
    assert edge_paths(256 * 256 + 256 + 3) == (
        {0: "tile/0/257.p/3", 1: "tile/1/001.p/1", 2: "tile/2/000.p/1"},
        "tile/entries/257.p/3",
    )


def test_entry_bundles_round_trip_and_refuse_what_does_not_fit():
    entries = [b"", b"a", b"x" * 300]
    assert unbundle(bundle(entries)) == entries
    assert bundle([b"ab"]) == b"\x00\x02ab"
    with pytest.raises(ValueError):
        bundle([b"x" * 0x10000])
    with pytest.raises(ValueError):
        unbundle(b"\x00\x05ab")


def whole_tree_tiles(entries: list[bytes]) -> dict[str, bytes]:
    """Every full tile of a tree, from its definition: entry i of tile (L, n) is the
    root of the leaves [(256n + i) 256^L, (256n + i + 1) 256^L)."""
    tiles, level, nodes = {}, 0, [leaf_hash(e) for e in entries]
    while len(nodes) >= 256:
        for n in range(len(nodes) // 256):
            tiles[tile_path(level, n)] = b"".join(nodes[256 * n : 256 * n + 256])
        # the next level's entries: the root of each full tile, a perfect tree of its 256
        nodes = [Tree(nodes[256 * n : 256 * n + 256]).root() for n in range(len(nodes) // 256)]
        level += 1
    return tiles


@pytest.mark.parametrize(
    "batches", [[1] * 300, [255, 1, 256, 3000, 20, 8], pytest.param([66100], marks=pytest.mark.slow)]
)
def test_any_batching_writes_the_same_tiles_and_resumes_from_the_edge(batches):
    entries = [hashlib.sha256(b"%d" % i).digest()[: i % 40] for i in range(sum(batches))]
    edge, written, done, tree = TileEdge(), {}, 0, Tree()
    for size in batches:
        for path, data in edge.extend(entries[done : done + size]):
            assert written.setdefault(path, data) == data, f"{path} written twice with other bytes"
        for entry in entries[done : done + size]:
            tree.append(leaf_hash(entry))
        done += size
        tiles, partial = edge_paths(done)
        resumed = TileEdge(done, {level: written[path] for level, path in tiles.items()}, written.get(partial, b""))
        assert resumed.root() == edge.root() == tree.root()
        edge = resumed
    full = {path: data for path, data in written.items() if ".p/" not in path and "entries" not in path}
    assert full == whole_tree_tiles(entries)
    assert b"".join(written[entries_path(n)] for n in range(len(entries) // 256)) == bundle(
        entries[: len(entries) // 256 * 256]
    )
    assert [leaf_hash(e) for e in entries[:256]] == hashes(written[tile_path(0, 0)])
    assert node_hash(*hashes(written[tile_path(0, 0)])[:2]) == Tree(leaf_hash(e) for e in entries[:2]).root()


def test_full_tiles_come_out_as_they_complete():
    """A writer holds one full entry bundle at a time, not a whole run's."""
    consumed = []

    def entries():
        for i in range(600):
            consumed.append(i)
            yield b"entry %d" % i

    stream = TileEdge().extend(entries())
    assert next(stream)[0] == entries_path(0) and len(consumed) == 256
    assert [path for path, _ in stream][-1].endswith(".p/2")  # the level 0 partial tile, last
