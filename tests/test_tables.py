"""Table schemas, row builders on the real bundles, and the rolling writer."""

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from pith.canonical import reference_canon
from pith.keyring import REGISTRY, Keyring
from pith.verify import verify_bundle
from storage.archive import layout
from storage.archive.layout import SCHEMA_VERSION
from storage.archive.rows import alias_rows, event_rows, record_row, timestamp, verification_row
from storage.archive.stores import StorageError
from storage.archive.tables import TABLES
from storage.writing.table_writer import RollPolicy, TableWriter
from tests.test_verify import with_numbers_json_writers_spell_differently

FETCHED = datetime(2026, 11, 22, 5, 30, tzinfo=timezone.utc)
RUN = "20261122T053000Z-w0-0123abcd"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "ARCHIVE.md"


@pytest.fixture(scope="module")
def verdicts(real_raw, registry_keyring):
    found = {suffix: verify_bundle(raw, registry_keyring) for suffix, raw in real_raw.items()}
    assert all(v.ok for v in found.values())
    return found


def test_record_rows_of_the_real_bundles(verdicts, real_docs):
    row = record_row(
        verdicts["RLLQL6357CWNZYHNBMCYD3UK5B"],
        raw_sha256="ab" * 32,
        url="https://pith.science/pith/RLLQL6357CWNZYHNBMCYD3UK5B/bundle.json",
        fetched_at=FETCHED,
        run_id=RUN,
    )
    assert row["year"] == 2019
    assert row["pith_number"] == "pith:2019:RLLQL6357CWNZYHNBMCYD3UK5B"
    assert row["short_pith_number"] == "pith:RLLQL635"
    assert (row["source_kind"], row["source_id"], row["source_version"]) == ("arxiv", "1904.12043", 2)
    assert row["bundle_sha256"] == "5de250d07307b49605824fde035ffefbf5dbdc317eae0b515374ad7c51508a9f"
    assert row["canonical_sha256"] == "8ad705fb7df8acdce0ed0b0581ee8ae874c821720c471a4e77342528ea10c2f7"
    assert row["state_sha256"] == real_docs["RLLQL6357CWNZYHNBMCYD3UK5B"]["state"]["state_sha256"]
    assert row["title"].startswith("Dynamic Mini-batch SGD for Elastic Distributed Training")
    assert row["authors"] == ["Haibin Lin", "Hang Zhang", "Mu Li", "Sheng Zha", "Tong He", "Yifei Ma", "Zhi Zhang"]
    assert row["primary_category"] == "cs.LG"
    assert row["cross_categories"] == ["cs.CV", "cs.DC", "stat.ML"]
    assert row["license"] == "http://arxiv.org/licenses/nonexclusive-distrib/1.0/"
    assert row["submitted_at"] == datetime(2019, 4, 26, 20, 45, 28, tzinfo=timezone.utc)
    assert row["built_at"] == datetime(2026, 5, 25, 22, 1, 12, tzinfo=timezone.utc)
    assert row["event_count"] == 2 and row["fetched_at"] == FETCHED
    assert row["raw_path"] == layout.raw_bundle("ab" * 32)
    for suffix, verdict in verdicts.items():
        other = record_row(verdict, raw_sha256="cd" * 32, url=None, fetched_at=FETCHED, run_id=RUN)
        assert other["year"] == int(real_docs[suffix]["canonical_record"]["metadata"]["submitted_at"][:4])
        assert other["title"] and other["authors"] and other["submitted_at"].tzinfo is timezone.utc


def test_event_rows_of_the_real_bundles(verdicts, real_docs):
    for suffix, verdict in verdicts.items():
        events = real_docs[suffix]["events"]
        rows = event_rows(verdict, run_id=RUN)
        assert [r["event_id"] for r in rows] == [e["event_id"] for e in events]
        assert [r["event_type"] for r in rows] == ["record_created", "graph_snapshot"]
        assert [r["event_index"] for r in rows] == [0, 1]
        for row, event in zip(rows, events):
            assert json.loads(row["payload_json"]) == event["payload"]
            assert row["signed_at"] == timestamp(event["signature"]["signed_at"])
            assert row["signed_at"].microsecond != 0  # microseconds survive
            assert (row["signer_id"], row["key_id"]) == ("pith.science", "pith-v1-2026-05")
            assert row["supersedes"] == [] and row["prev_event"] is None
            assert row["bundle_sha256"] == verdict.bundle_sha256


def test_event_rows_keep_the_reference_spelling_of_numbers(real_raw, test_signer):
    """A payload's JSON in the rows is its canonical text, numbers spelt as the
    reference encoder spells them, even where orjson would write them otherwise."""
    raw = with_numbers_json_writers_spell_differently(next(iter(real_raw.values())), test_signer)
    verdict = verify_bundle(raw, Keyring([*Keyring.default(), test_signer.pinned(REGISTRY)]))
    assert verdict.ok and not verdict.exact
    payload = json.loads(raw)["events"][-1]["payload"]
    assert event_rows(verdict, run_id=RUN)[-1]["payload_json"] == reference_canon(payload).decode("utf-8")
    assert "1e-07" in event_rows(verdict, run_id=RUN)[-1]["payload_json"]


def test_alias_rows_of_the_real_bundles(verdicts):
    rows = alias_rows(verdicts["X4GAYROCRDRF6GSWIGUEQCY32W"], run_id=RUN)
    assert {r["alias_kind"]: r["alias_value"] for r in rows} == {
        "arxiv": "1901.02244",
        "arxiv_version": "1901.02244v1",
        "doi": "10.48550/arxiv.1901.02244",
        "pith_short_8": "X4GAYROC",
        "pith_short_12": "X4GAYROCRDRF",
        "pith_short_16": "X4GAYROCRDRF6GSW",
    }
    assert all(r["created_at"].tzinfo is timezone.utc for r in rows)


def test_verification_row_of_a_rejected_bundle(real_raw, registry_keyring):
    tampered = real_raw["6VARSBRX6E3HDBTBZP3WZOXG6B"].replace(b'"target":"graph"', b'"target":"graf"', 1)
    verdict = verify_bundle(tampered, registry_keyring)
    row = verification_row(
        verdict,
        url="https://x/b.json",
        raw_sha256="ef" * 32,
        size=len(tampered),
        raw_path=layout.quarantined("ef" * 32),
        fetched_at=FETCHED,
        run_id=RUN,
    )
    assert row["status"] == "rejected" and row["reason"] == "event_hash_mismatch"
    assert row["detail_path"] == "events[1].content_sha256"
    assert row["pith_number"] == "pith:2018:6VARSBRX6E3HDBTBZP3WZOXG6B"
    assert row["fetch_date"] == "2026-11-22" and row["bundle_sha256"] is None


def test_naive_fetch_times_are_refused(verdicts):
    with pytest.raises(ValueError, match="timezone"):
        record_row(
            verdicts["X4GAYROCRDRF6GSWIGUEQCY32W"],
            raw_sha256="ab" * 32,
            url=None,
            fetched_at=datetime(2026, 1, 1),
            run_id=RUN,
        )


def test_every_column_is_typed_and_documented():
    for spec in TABLES.values():
        schema = spec.schema
        assert schema.metadata[b"pith_archiver.schema_version"] == SCHEMA_VERSION.encode()
        assert spec.partition not in schema.names  # it lives in the directory names
        for column in schema:
            assert column.metadata[b"doc"], f"{spec.name}.{column.name} has no doc"
            if column.name.endswith("_at"):
                assert column.type == pa.timestamp("us", tz="UTC"), column.name
    assert TABLES["records"].schema.field("authors").type == pa.list_(pa.string())


def test_docs_describe_every_column_and_the_schema_version():
    text = DOCS.read_text("utf-8")
    assert f"Schema version: **{SCHEMA_VERSION}**" in text
    for spec in TABLES.values():
        assert f"### `{spec.name}`" in text
        section = text.split(f"### `{spec.name}`", 1)[1].split("\n### ", 1)[0]
        for name in [spec.partition, *spec.schema.names]:
            assert re.search(rf"^\| `{name}` \|", section, re.M), f"{spec.name}.{name} missing from docs"


def alias(kind, value):
    return {
        "alias_kind": kind,
        "pith_number": "pith:2019:X",
        "alias_value": value,
        "created_at": FETCHED,
        "bundle_sha256": "ab" * 32,
        "run_id": RUN,
    }


def write(rows, policy, tmp_path):
    """Run rows through a TableWriter into a folder laid out like the archive."""
    emitted = []

    def emit(path, spool, count):
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        spool.rename(target)
        emitted.append((path, count))

    writer = TableWriter("aliases", RUN, emit, policy, spool_dir=tmp_path)
    for row in rows:
        writer.add(row)
    writer.close()
    return emitted


def test_files_roll_at_the_row_bound(tmp_path):
    rows = [alias("doi", f"10.1/{i}") for i in range(12)] + [alias("arxiv", f"19.{i}") for i in range(3)]
    emitted = write(rows, RollPolicy(max_rows=5, row_group_rows=2), tmp_path)
    counts = sorted((path.split("/")[2], count) for path, count in emitted)
    assert counts == [("alias_kind=arxiv", 3), ("alias_kind=doi", 2), ("alias_kind=doi", 5), ("alias_kind=doi", 5)]
    assert len({path for path, _ in emitted}) == 4
    for path, count in emitted:
        metadata = pq.read_metadata(tmp_path / path)
        assert metadata.num_rows == count
        assert max(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)) <= 2
        assert metadata.metadata[b"pith_archiver.schema_version"] == SCHEMA_VERSION.encode()
    assert not list(tmp_path.glob("aliases-*.parquet"))  # no spool file left behind
    table = ds.dataset(tmp_path / "tables" / "aliases", partitioning="hive").to_table()
    assert sorted(table.column("alias_value").to_pylist()) == sorted(r["alias_value"] for r in rows)


def test_files_roll_at_the_byte_bound(tmp_path):
    rows = [alias("doi", "x" * 100 + str(i)) for i in range(9)]
    emitted = write(rows, RollPolicy(max_bytes=1, row_group_rows=3), tmp_path)
    assert [count for _, count in emitted] == [3, 3, 3]


def test_few_rows_make_one_file_per_partition(tmp_path):
    emitted = write([alias(kind, "v") for kind in ("doi", "arxiv") for _ in range(40)], RollPolicy(), tmp_path)
    assert sorted(count for _, count in emitted) == [40, 40]


def test_odd_partition_values_read_back_in_both_readers(tmp_path):
    write([alias("a/b c=d", "1"), alias(None, "2")], RollPolicy(), tmp_path)
    assert sorted(p.name for p in (tmp_path / "tables" / "aliases").iterdir()) == [
        f"alias_kind={layout.HIVE_NULL}",
        "alias_kind=a%2Fb%20c%3Dd",
    ]
    arrow = ds.dataset(tmp_path / "tables" / "aliases", partitioning="hive").to_table()
    assert sorted(zip(arrow.column("alias_value").to_pylist(), arrow.column("alias_kind").to_pylist())) == [
        ("1", "a/b c=d"),
        ("2", None),
    ]
    glob = tmp_path / "tables" / "aliases" / "**" / "*.parquet"
    rows = duckdb.sql(
        f"SELECT alias_value, alias_kind FROM read_parquet('{glob}', hive_partitioning=true) ORDER BY alias_value"
    ).fetchall()
    assert rows == [("1", "a/b c=d"), ("2", None)]


def test_rows_wait_on_disk_by_partition_and_are_read_back_a_block_at_a_time(tmp_path):
    """Many partitions that never fill a row group: while the run goes on, each row waits
    as a JSON line in its partition's spool file (nothing in memory, no pyarrow at work);
    at close each spool is read back a block at a time, into row groups no larger than
    the policy's, and every row arrives, however small the block (a longer line is read
    whole)."""
    emitted = []
    policy = RollPolicy(row_group_rows=40, read_bytes=2048)

    def emit(path, spool, count):
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        spool.rename(target)
        emitted.append(path)

    writers = [TableWriter("aliases", RUN, emit, policy, tmp_path) for _ in range(2)]
    rows = [alias(f"kind{i % 30}", f"value-{i}" + "x" * (5000 if i == 7 else 0)) for i in range(3000)]
    for i, row in enumerate(rows):
        writers[i % 2].add(row)
    assert emitted == [] and not list(tmp_path.glob("aliases-*.parquet"))  # pyarrow not yet at work
    assert len(list(tmp_path.glob("aliases-*.jsonl"))) == 30  # 15 partitions a writer
    for writer in writers:
        writer.close()
    assert not list(tmp_path.glob("aliases-*.jsonl"))  # the spooled rows are gone once written
    groups = [pq.read_metadata(tmp_path / path) for path in emitted]
    assert len(emitted) == 30 and max(g.num_row_groups for g in groups) > 1
    assert max(g.row_group(i).num_rows for g in groups for i in range(g.num_row_groups)) <= 40
    table = ds.dataset(tmp_path / "tables" / "aliases", partitioning="hive").to_table()
    assert sorted(table.column("alias_value").to_pylist()) == sorted(r["alias_value"] for r in rows)


def test_a_row_the_table_has_no_column_for_fails_the_close_and_leaves_nothing(tmp_path):
    """A row with a column the schema lacks is an error of ours: closing fails with a
    StorageError naming the table (what a commit reports), and neither spool nor
    half-written file is left behind."""
    writer = TableWriter("aliases", RUN, lambda *_: pytest.fail("nothing is handed over"), RollPolicy(), tmp_path)
    writer.add(alias("doi", "10.1/x"))
    writer.add({**alias("doi", "10.1/y"), "not_a_column": 1})
    with pytest.raises(StorageError, match=f"table aliases of run {RUN} cannot be written: .*unexpected field"):
        writer.close()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("field", ["max_rows", "max_bytes", "row_group_rows", "row_group_bytes", "read_bytes"])
def test_a_roll_policy_of_nothing_is_refused(field):
    """A bound of 0 would make row groups of nothing, never filled: refused, named."""
    with pytest.raises(ValueError, match=f"RollPolicy.{field} must be at least 1, not 0"):
        RollPolicy(**{field: 0})
