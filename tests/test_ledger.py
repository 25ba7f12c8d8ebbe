"""An open run's ledger: what its manifest will list and what its attestations owe,
kept in a file rather than in memory."""

import threading

from storage.archive.stores import ObjectInfo
from storage.transparency.attestations import Stored
from storage.writing.ledger import Ledger


def stored(n: int) -> Stored:
    return Stored(f"pith:2024:{n:026d}", f"{n:064x}", f"{n + 1:064x}", f"raw/{n}.json", f"{n + 2:064x}", n)


def info_of(item: Stored) -> ObjectInfo:
    return ObjectInfo(item.raw_path, item.raw_sha256, item.size)


def test_a_ledger_gives_back_each_object_once_and_the_owed_versions_in_order(tmp_path):
    ledger = Ledger(tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing on disk until the first note
    assert ledger.objects() == [] and list(ledger.owed()) == []
    versions = [stored(n) for n in range(3)]
    for n, item in enumerate(versions):
        ledger.record(info_of(item), item, f"2026-11-24T00:00:0{n}Z")
    table = ObjectInfo("tables/records/part-0.parquet", "ab" * 32, 99, "records", 3)
    ledger.record(table)
    ledger.record(ObjectInfo("keys/k.json", "cd" * 32, 10))
    ledger.record(ObjectInfo("keys/k.json", "ef" * 32, 11))  # noted again: the last note counts

    assert ledger.objects() == [
        *map(info_of, versions),
        table,
        ObjectInfo("keys/k.json", "ef" * 32, 11),
    ]
    assert list(ledger.owed()) == [(item, f"2026-11-24T00:00:0{n}Z") for n, item in enumerate(versions)]
    path = ledger.path
    assert path.exists()
    ledger.discard()
    assert not path.exists()


def test_reading_a_ledger_stops_where_it_stood_while_uploads_go_on_noting(tmp_path):
    ledger = Ledger(tmp_path)
    first = [stored(n) for n in range(2000)]
    for item in first:
        ledger.record(info_of(item), item, "2026-11-24T00:00:00Z")
    owed = ledger.owed()
    read = [next(owed)]  # the reading begins here: what it covers is fixed

    def note_more():
        for n in range(2000, 12000):
            item = stored(n)
            ledger.record(info_of(item), item, "2026-11-24T00:00:01Z")

    writer = threading.Thread(target=note_more)
    writer.start()
    read += list(owed)  # never a half-written line, never a note made after the start
    writer.join()
    assert [item for item, _ in read] == first
    assert len(list(ledger.owed())) == 12000
