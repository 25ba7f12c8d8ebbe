"""Reading a tiled log back (pith.tile_reading): from any older size to any newer one,
the older root comes out of the newer log's tiles and the new entries give the newer
root; a log that does not extend the older one, or a short tile, is caught."""

import pytest

from pith.merkle import Tree, leaf_hash
from pith.tile_reading import append, edge_of, entry_batches
from pith.tiles import TileEdge


def written_log(sizes: list[int], name: str = "entry") -> tuple[dict[str, bytes], list[bytes]]:
    """The files a writer committing at each of ``sizes`` leaves up (every tile and
    entry bundle it wrote), and the entries."""
    files: dict[str, bytes] = {}
    entries = [f"{name} {n}".encode() for n in range(sizes[-1])]
    edge, done = TileEdge(), 0
    for size in sizes:
        files.update(edge.extend(entries[done:size]))
        done = size
    return files, entries


@pytest.mark.parametrize(
    ("old", "new"), [(0, 3), (3, 3), (1, 300), (255, 256), (256, 257), (300, 600), (255, 65536 + 300), (65537, 65540)]
)
def test_the_new_entries_and_both_roots_come_from_the_newer_tiles(old, new):
    files, entries = written_log(sorted({size for size in (old, new) if size}) or [0])
    tree = Tree(leaf_hash(entry) for entry in entries)
    read_paths = []

    def read(path: str) -> bytes:
        read_paths.append(path)
        return files[path]

    edge = edge_of(old, new, read)
    assert edge.size == old and edge.root() == tree.root(old)
    got = []
    for first, batch in entry_batches(old, new, read):
        assert first == old + len(got)
        got += batch
        append(edge, batch)
    assert got == entries[old:new]
    assert edge.root() == tree.root(new)
    assert len(read_paths) <= 4 + -(-(new - old) // 256)  # a tile a level, then the entry bundles


def test_a_log_that_rewrote_its_past_does_not_give_the_older_root():
    _, entries = written_log([10, 300])
    other, _ = written_log([300], name="other")  # the same size, another history
    assert edge_of(10, 300, other.__getitem__).root() != Tree(leaf_hash(e) for e in entries).root(10)


def test_a_short_entry_bundle_is_refused():
    files, _ = written_log([300])
    short = {path: data[: len(data) // 2] if "entries" in path else data for path, data in files.items()}
    with pytest.raises(ValueError):
        list(entry_batches(0, 300, short.__getitem__))
