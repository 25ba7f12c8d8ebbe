"""Versions prepared where they were verified (``storage.writing.prepared``, a sync's
worker processes) and archived in batches (``ArchiveWriter.add_prepared_all``) give
the archive the very rows, raw objects and attestations that versions verified and
archived one by one give it; a version twice in a batch is stored once."""

import json
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timezone

import pytest

from pith.canonical import sha256_hex
from pith.keyring import Keyring
from pith.verify import verify_bundle
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.archive.history import Judgement
from storage.archive.layout import TABLE_NAMES
from storage.archive.rows import alias_rows, event_rows, record_row, verification_row
from storage.archive.stores import StorageError
from storage.writing.prepared import Prepared, prepare
from storage.writing.table_writer import RowEncoder, close_line
from storage.writing.writer import ArchiveWriter
from tests.plugins.archives import corpus_raws, tampered
from tests.plugins.faults import audit_archive
from tests.plugins.tables import read_rows

FETCHED = datetime(2026, 11, 28, 12, 0, tzinfo=timezone.utc)
RUN = "20261128T120000Z-w0-0123abcd"
_keyring: Keyring | None = None


def _start(keyring: Keyring) -> None:
    global _keyring
    _keyring = keyring


def _prepared_here(raw: bytes) -> Prepared:
    """What a verifying process hands over (it crosses as a pickle)."""
    assert _keyring is not None
    return prepare(verify_bundle(raw, _keyring), sha256_hex(raw), len(raw))


def _rows(folder, table: str) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in read_rows(folder, table))


@pytest.mark.slow
def test_versions_prepared_in_other_processes_archive_as_versions_verified_here(
    tmp_path, corpus_dir, corpus_keyring, test_signer, test_keyring
):
    raws = list(corpus_raws(corpus_dir).values())
    one_by_one = ArchiveWriter(LocalStore(tmp_path / "one-by-one"), test_signer, run_id=RUN).open()
    for number, raw in enumerate(raws):
        one_by_one.add_verified(raw, verify_bundle(raw, corpus_keyring), f"http://peer/{number}", FETCHED)
    one_by_one.commit()

    with ProcessPoolExecutor(2, initializer=_start, initargs=(corpus_keyring,)) as pool:
        prepared = list(pool.map(_prepared_here, raws))
    batched = ArchiveWriter(LocalStore(tmp_path / "batched"), test_signer, run_id=RUN).open()
    batched.add_prepared_all(
        [(raw, version, f"http://peer/{number}") for number, (raw, version) in enumerate(zip(raws, prepared))], FETCHED
    )
    batched.commit()

    for table in TABLE_NAMES:
        if table not in ("attestations", "captures"):  # attestations: signed when each is stored
            assert _rows(tmp_path / "batched", table) == _rows(tmp_path / "one-by-one", table), table
    attested = read_rows(tmp_path / "batched", "attestations", columns=["pith_number", "raw_sha256"])
    assert sorted((row["pith_number"], row["raw_sha256"]) for row in attested) == sorted(
        (version.verdict.pith_number, version.raw_sha256) for version in prepared
    )
    check = audit_archive(LocalStore(tmp_path / "batched"), test_keyring, corpus_keyring)
    assert check.discrepancies == [] and len(check.records) == len(raws)


@pytest.mark.parametrize("current", [True, False])
def test_prepared_lines_are_the_rows_the_archive_builds(
    current, corpus_dir, corpus_keyring, real_raw, registry_keyring
):
    """Each line holds what ``storage.archive.rows`` builds for the version, whole."""
    judged = Judgement() if current else Judgement(objection="built before the current version")
    keyrings = [(raw, corpus_keyring) for raw in corpus_raws(corpus_dir).values()]
    for raw, keyring in keyrings + [(raw, registry_keyring) for raw in real_raw.values()]:
        verdict, digest = verify_bundle(raw, keyring), sha256_hex(raw)
        path = layout.raw_bundle(digest)
        expected = [
            ("verifications", verification_row(
                judged.verdict(verdict), url="u", raw_sha256=digest, size=len(raw), raw_path=path,
                fetched_at=FETCHED, run_id=RUN,
            )),
            ("records", record_row(
                verdict, raw_sha256=digest, url="u", fetched_at=FETCHED, run_id=RUN, accepted_as_current=current
            )),
            *[("events", row) for row in event_rows(verdict, run_id=RUN)],
            *[("aliases", row) for row in alias_rows(verdict, run_id=RUN)],
        ]  # fmt: skip
        lines = prepare(verdict, digest, len(raw)).lines(RUN, judged, "u", FETCHED, path)
        assert [(table, partition, json.loads(line)) for table, (partition, line) in lines] == [
            (table, partition, json.loads(line)) for table, (partition, line) in _encoded(expected)
        ]


def _encoded(rows: list[tuple[str, dict]]) -> list[tuple[str, tuple[str, bytes]]]:
    return [(table, RowEncoder(table).encode(row)) for table, row in rows]


def test_a_version_twice_in_a_batch_is_stored_once(tmp_path, corpus_dir, corpus_keyring, test_signer):
    raw = next(iter(corpus_raws(corpus_dir).values()))
    version = prepare(verify_bundle(raw, corpus_keyring), sha256_hex(raw), len(raw))
    writer = ArchiveWriter(LocalStore(tmp_path / "archive"), test_signer, run_id=RUN).open()
    writer.add_prepared_all([(raw, version, "http://a/"), (raw, version, "http://b/")], FETCHED)
    writer.commit()
    assert writer.counts() == {"verified": 1, "duplicates": 1}
    rows = read_rows(tmp_path / "archive", "verifications", columns=["url", "duplicate", "raw_path"])
    assert sorted((row["url"], row["duplicate"], row["raw_path"]) for row in rows) == [
        ("http://a/", False, layout.raw_bundle(sha256_hex(raw))),
        ("http://b/", True, None),
    ]
    assert len(read_rows(tmp_path / "archive", "records")) == 1


def test_only_a_verified_verdict_is_prepared(corpus_dir, corpus_keyring):
    raw = tampered(next(iter(corpus_raws(corpus_dir).values())))
    verdict = verify_bundle(raw, corpus_keyring)
    assert not verdict.ok
    with pytest.raises(ValueError, match="only a verified verdict"):
        prepare(verdict, sha256_hex(raw), len(raw))


@pytest.mark.parametrize(
    ("row", "tail", "line"),
    [
        ({"year": 2024}, b'"run_id":"r"}', b'{"run_id":"r"}\n'),  # the partition column only: nothing left open
        ({"year": 2024, "title": "t"}, b'"run_id":"r"}', b'{"title":"t","run_id":"r"}\n'),
        ({"year": 2024, "title": "t"}, b"}", b'{"title":"t"}\n'),
        ({"year": 2024}, b"}", b"{}\n"),
    ],
)
def test_a_row_left_open_is_closed_into_one_json_object(row, tail, line):
    partition, head = RowEncoder("records").head(row)
    assert partition == "year=2024" and close_line(head, tail) == line
    assert json.loads(line) == {**{k: v for k, v in row.items() if k != "year"}, **json.loads(b"{" + tail)}


def test_a_version_its_verifier_stored_archives_as_one_the_writer_uploads(
    tmp_path, real_raw, registry_keyring, test_signer, test_keyring
):
    """A crawl's verifier stores a verified bundle's bytes in the archive's folder itself
    (``crawler.verifying.verify_worker``): the writer lists and attests that object as it
    would one it uploaded, and the archive is the same; a second copy of the version is a
    duplicate whatever its verifier found."""
    uploaded = ArchiveWriter(LocalStore(tmp_path / "uploaded"), test_signer, run_id=RUN).open()
    adopted = ArchiveWriter(LocalStore(tmp_path / "adopted"), test_signer, run_id=RUN).open()
    verifiers = LocalStore(adopted.store.folder)  # a verifier's own store over the same folder
    for suffix, raw in sorted(real_raw.items()):
        prepared = prepare(verify_bundle(raw, registry_keyring), sha256_hex(raw), len(raw))
        url = f"https://pith.science/pith/{suffix}/bundle.json"
        assert uploaded.add_prepared(raw, prepared, url, FETCHED).result() is not None
        made = verifiers.create_bytes(layout.raw_bundle(prepared.raw_sha256), raw)
        assert made.made and adopted.add_prepared(raw, prepared, url, FETCHED, stored=made).result() == made.info
        again = verifiers.create_bytes(layout.raw_bundle(prepared.raw_sha256), raw)  # the same bytes: the same object
        assert not again.made
        assert adopted.add_prepared(raw, prepared, url + "?again", FETCHED, stored=again).result() is None
        assert uploaded.add_prepared(raw, prepared, url + "?again", FETCHED).result() is None
    uploaded.commit()
    adopted.commit()
    for table in TABLE_NAMES:
        if table not in ("attestations", "captures"):  # attestations: signed when each is stored
            assert _rows(tmp_path / "adopted", table) == _rows(tmp_path / "uploaded", table), table
    for name in ("uploaded", "adopted"):
        check = audit_archive(LocalStore(tmp_path / name), test_keyring, registry_keyring)
        assert check.discrepancies == [] and len(check.records) == len(real_raw)
        assert len(read_rows(tmp_path / name, "attestations", columns=["raw_sha256"])) == len(real_raw)


@pytest.mark.parametrize("failure", ["not stored", "another object"])
def test_a_version_its_verifier_could_not_store_fails_the_run(
    failure, tmp_path, real_raw, registry_keyring, test_signer
):
    """What the verifier could not store, or stored as anything but the version's own
    bytes at their address, fails the run as a failed upload does: nothing commits."""
    (suffix, raw), (_, other) = sorted(real_raw.items())[:2]
    writer = ArchiveWriter(LocalStore(tmp_path), test_signer, run_id=RUN).open()
    prepared = prepare(verify_bundle(raw, registry_keyring), sha256_hex(raw), len(raw))
    path = layout.raw_bundle(prepared.raw_sha256)
    if failure == "not stored":
        stored = StorageError(f"{writer.store.uri}: cannot write {path}: [Errno 28] No space left on device")
    else:
        stored = LocalStore(tmp_path).create_bytes(layout.raw_bundle(sha256_hex(other)), other)
    future = writer.add_prepared(
        raw, prepared, f"https://pith.science/pith/{suffix}/bundle.json", FETCHED, stored=stored
    )
    with pytest.raises(StorageError, match=path if failure == "another object" else "No space left"):
        future.result()
    with pytest.raises(StorageError):
        writer.commit()
    assert not (tmp_path / "manifests").exists() or not any((tmp_path / "manifests").iterdir())


def test_a_version_held_reached_in_other_bytes_is_listed_not_left_an_orphan(
    tmp_path, real_raw, registry_keyring, test_signer, test_keyring
):
    """The same bundle in other bytes (another serialization, the same ``bundle_sha256``) is
    a duplicate, yet its verifier stored those bytes before the writer judged it: the writer
    lists that object, owed no attestation, so the audit finds no orphan; bytes the verifier
    found there already are not listed again."""
    suffix, raw = sorted(real_raw.items())[0]
    other = json.dumps(json.loads(raw), indent=1).encode()
    url = f"https://pith.science/pith/{suffix}/bundle.json"
    writer = ArchiveWriter(LocalStore(tmp_path), test_signer, run_id=RUN).open()
    verifiers = LocalStore(writer.store.folder)
    for body in (raw, other, raw):
        prepared = prepare(verify_bundle(body, registry_keyring), sha256_hex(body), len(body))
        stored = verifiers.create_bytes(layout.raw_bundle(prepared.raw_sha256), body)
        writer.add_prepared(body, prepared, url, FETCHED, stored=stored).result()
    manifest = writer.commit()
    assert writer.counts() == {"verified": 1, "duplicates": 2}
    listed = [entry["path"] for entry in json.loads((tmp_path / manifest).read_bytes())["objects"]]
    raw_paths = [layout.raw_bundle(sha256_hex(body)) for body in (raw, other)]
    assert sorted(path for path in listed if path.startswith(f"{layout.RAW}/")) == sorted(raw_paths)
    check = audit_archive(LocalStore(tmp_path), test_keyring, registry_keyring)
    assert check.discrepancies == [] and len(check.records) == 1
    assert len(read_rows(tmp_path, "attestations", columns=["raw_sha256"])) == 1
