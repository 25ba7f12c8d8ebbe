"""Append-only history per record: a successor that keeps every event becomes current;
a fork (another event set) and a rollback (older events served again) are kept as
evidence, flagged not_append_only, and never become current. Through the writer on
both backends, and end to end through re-crawls of a mirror serving new versions."""

import hashlib
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest

from pith.reasons import Reason
from pith.split_view import Equivocation
from pith.verdict import Status, Verdict
from pith.verify import verify_bundle
from storage.archive.folder_store import LocalStore
from storage.archive.history import (
    EVENT_COLUMNS,
    RECORD_COLUMNS,
    CurrentVersion,
    History,
    event_digest,
    judge,
)
from storage.archive.reader import CommittedArchive, table_batches
from storage.serving.source import KEYRING_NAME
from storage.writing.writer import ArchiveWriter
from tests.plugins.archives import corpus_raws, extended, rebuilt
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.tables import read_rows

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def versions(corpus_dir, corpus_keyring):
    """One corpus record in five versions: the original, its append-only successor, a
    fork (another snapshot appended to the original), the original rebuilt later (a
    rollback with new bytes), and a successor of the successor built before it."""
    original = next(iter(corpus_raws(corpus_dir).values()))
    successor = extended(original, "2026-06-10T00:00:00Z")
    found = {
        "original": original,
        "successor": successor,
        "fork": extended(original, "2026-06-12T00:00:00Z"),
        "rollback": rebuilt(original, "2026-06-13T00:00:00Z"),
        "backdated": extended(successor, "2026-06-09T00:00:00Z"),
    }
    verdicts = {name: verify_bundle(raw, corpus_keyring) for name, raw in found.items()}
    assert all(v.ok for v in verdicts.values()), verdicts
    assert len({v.bundle_sha256 for v in verdicts.values()}) == 5
    return {name: (raw, verdicts[name]) for name, raw in found.items()}


def add(writer, versions, name, minutes):
    raw, verdict = versions[name]
    return writer.add_verified(raw, verdict, f"http://127.0.0.1/{name}", T0 + timedelta(minutes=minutes)).result(30)


def current_version(records: list[dict], pith_number: str) -> str:
    """The rule docs/ARCHIVE.md gives readers: among the rows accepted as current, the
    greatest (built_at, fetched_at)."""
    rows = [r for r in records if r["pith_number"] == pith_number and r.get("accepted_as_current") is not False]
    return max(rows, key=lambda r: (r["built_at"], r["fetched_at"]))["bundle_sha256"]


def test_forks_and_rollbacks_are_kept_as_evidence_and_never_current(store, versions, test_signer, test_keyring):
    number = versions["original"][1].pith_number
    first = ArchiveWriter(store, test_signer).open()
    add(first, versions, "original", 0)
    first.commit()
    second = ArchiveWriter(store, test_signer).open()  # history comes from the committed tables
    assert add(second, versions, "successor", 1) is not None
    second.commit()

    third = ArchiveWriter(store, test_signer).open()
    stored = {
        name: add(third, versions, name, minute)
        for minute, name in enumerate(["fork", "rollback", "backdated", "original"], start=2)
    }
    assert third.counts()["not_append_only"] == 4
    third.commit()
    # every new version's bytes are stored, as evidence; the original again is a duplicate
    for name in ("fork", "rollback", "backdated"):
        assert store.get_bytes(stored[name].path) == versions[name][0]
    assert stored["original"] is None

    sha = {name: verdict.bundle_sha256 for name, (_, verdict) in versions.items()}
    records = read_rows(store, "records")
    assert {r["bundle_sha256"]: r["accepted_as_current"] for r in records} == {
        sha["original"]: True,
        sha["successor"]: True,
        sha["fork"]: False,
        sha["rollback"]: False,
        sha["backdated"]: False,
    }
    assert current_version(records, number) == sha["successor"]
    flagged = {
        (r["bundle_sha256"], r["status"], r["duplicate"]): r["detail"]
        for r in read_rows(store, "verifications")
        if r["reason"] == "not_append_only"
    }
    assert set(flagged) == {
        (sha["fork"], "verified", False),
        (sha["rollback"], "verified", False),
        (sha["backdated"], "verified", False),
        (sha["original"], "verified", True),
    }
    assert (
        flagged[(sha["fork"], "verified", False)]
        == f"lacks 1 of the 3 events of the current version {sha['successor']}"
    )
    assert flagged[(sha["backdated"], "verified", False)] == f"built before the current version {sha['successor']}"

    # a later run still sees the successor as current, and the fork as archived
    history = History.from_tables(
        (
            batch
            for entry in CommittedArchive.read(store, test_keyring).table_files("records")
            for batch in table_batches(store, entry, RECORD_COLUMNS)
        ),
        (
            batch
            for entry in CommittedArchive.read(store, test_keyring).table_files("events")
            for batch in table_batches(store, entry, EVENT_COLUMNS)
        ),
    )
    assert history.current(number).bundle.hex() == sha["successor"]
    assert history.archived(sha["fork"])
    # with the successor's events, each once (its 32-byte digests, whatever their bytes)
    successor = versions["successor"][1].bundle
    assert history.current(number).events == {event_digest(e["event_id"]) for e in successor["events"]}


def test_an_append_only_successor_in_the_same_run_becomes_current(tmp_path, versions, test_signer):
    store = LocalStore(tmp_path / "archive")
    writer = ArchiveWriter(store, test_signer).open()
    for minute, name in enumerate(["original", "successor", "original"]):
        add(writer, versions, name, minute)
    assert writer.counts()["not_append_only"] == 1  # the original served again after its successor
    writer.commit()
    records = read_rows(store, "records")
    assert [r["accepted_as_current"] for r in records] == [True, True]
    assert current_version(records, versions["original"][1].pith_number) == versions["successor"][1].bundle_sha256


def test_files_without_the_column_count_as_accepted(versions):
    raw, verdict = versions["original"]
    old = pa.table(
        {
            "pith_number": [verdict.pith_number],
            "bundle_sha256": [verdict.bundle_sha256],
            "built_at": [T0],
            "fetched_at": [T0],
        }
    )
    history = History.from_tables([old], [])
    assert history.current(verdict.pith_number).bundle.hex() == verdict.bundle_sha256
    assert history.archived(verdict.bundle_sha256)


def test_a_history_answers_alike_for_versions_written_and_waiting():
    """A run's versions wait in memory and are written in batches; whether a look-up
    meets one waiting, written, or from committed tables, the answer is the same, and
    a record made current twice before a write still lists its first version as archived."""
    digest = lambda i, v: hashlib.sha256(f"{i}-{v}".encode()).hexdigest()  # noqa: E731
    number = lambda i: f"pith:{i:026d}"  # noqa: E731
    events = lambda i: frozenset({hashlib.sha256(f"event-{i}".encode()).digest()})  # noqa: E731
    committed = pa.table(
        {
            "pith_number": [number(i) for i in range(100)],
            "bundle_sha256": [digest(i, 0) for i in range(100)],
            "built_at": [T0] * 100,
            "fetched_at": [T0] * 100,
        }
    )
    history = History.from_tables([committed], [])
    for i in range(100, 1100):  # records never seen: several batches of writes
        assert history.look_up(number(i), digest(i, 0)) == (False, None)
        history.add(number(i), digest(i, 0), events(i), T0, T0 + timedelta(seconds=i), current=True)
        if i % 7 == 0:  # a successor at once, and a version kept as evidence only
            history.add(number(i), digest(i, 1), events(i), T0, T0 + timedelta(seconds=i + 1), current=True)
            history.add(number(i), digest(i, 2), events(i), T0, T0, current=False)
    for i in (0, 99, 100, 105, 1099, 1092):  # committed, written, and still waiting (the last ones)
        archived, current = history.look_up(number(i), digest(i, 0))
        latest = 1 if i >= 100 and i % 7 == 0 else 0
        assert archived and current is not None and current.bundle.hex() == digest(i, latest), i
        assert history.look_up(number(i), digest(i, 9)) == (False, current)
        if latest:
            assert history.look_up(number(i), digest(i, 2))[0]
            assert current.events == events(i) and current.fetched_at == T0 + timedelta(seconds=i + 1)
    assert history.look_up(number(5000), digest(5000, 0)) == (False, None)
    # the readers that are not look-ups see the waiting versions too
    assert history.archived(digest(1092, 0)) and history.archived(digest(1092, 2))
    assert history.current(number(1098)).bundle.hex() == digest(1098, 0)
    assert dict(history.current_bundles())[number(1092)] == digest(1092, 1)
    assert len(dict(history.current_bundles())) == 1100


@pytest.mark.slow
def test_recrawls_of_new_versions_keep_the_history_append_only(tmp_path, corpus_dir, mirror, versions):
    """The whole path: a mirror serving each version in turn, re-crawled into one archive."""
    number = versions["original"][1].pith_number
    suffix = number.rsplit(":", 1)[1]
    archive = tmp_path / "archive"
    results = {}
    for name in ("original", "successor", "fork", "original"):  # the last one: a rollback
        served = tmp_path / f"served-{name}"
        served.mkdir(exist_ok=True)
        (served / f"{suffix}.bundle.json").write_bytes(versions[name][0])
        server = mirror(directory=served)
        results.setdefault(name, []).append(
            run_cli_crawl(
                tmp_path,
                "--resolver",
                server.url,
                "--keyring",
                str(corpus_dir / KEYRING_NAME),
                "--no-default-keys",
                "--no-follow",
                "--out",
                str(archive),
                suffix,
            )
        )
    for runs in results.values():
        for result in runs:
            assert result.returncode == 0, result.stderr[-3000:]
            assert result.stat("verified") == 1
    assert [r.stat("not_append_only") for r in results["original"]] == [0, 1]
    assert (results["successor"][0].stat("not_append_only"), results["fork"][0].stat("not_append_only")) == (0, 1)
    assert [r.stat("archived") for r in results["original"]] == [1, 0]  # the rollback's bytes were kept already
    assert results["fork"][0].stat("archived") == 1

    records = read_rows(archive, "records")
    sha = {name: versions[name][1].bundle_sha256 for name in ("original", "successor", "fork")}
    assert {r["bundle_sha256"]: r["accepted_as_current"] for r in records} == {
        sha["original"]: True,
        sha["successor"]: True,
        sha["fork"]: False,
    }
    assert current_version(records, number) == sha["successor"]


# --- the judgement, without a store -------------------------------------------------
def digests(*names: str) -> frozenset[bytes]:
    return frozenset(hashlib.sha256(name.encode()).digest() for name in names)


CURRENT = CurrentVersion(hashlib.sha256(b"current").digest(), T0, T0, digests("e1", "e2"))
NEW = hashlib.sha256(b"new").hexdigest()
VERIFIED = Verdict(Status.VERIFIED, pith_number="P", bundle_sha256=NEW)
LATER = T0 + timedelta(days=1)


def test_a_successor_a_first_version_and_the_current_one_itself_may_follow():
    successor = judge(CURRENT, NEW, digests("e1", "e2", "e3"), LATER, LATER, "http://a/x")
    first = judge(None, NEW, digests("e1"), None, LATER, "http://a/x", forks_are_split_views=True)
    itself = judge(CURRENT, CURRENT.bundle.hex(), frozenset(), None, T0, "http://a/x", forks_are_split_views=True)
    for judged in (successor, first, itself):
        assert (judged.objection, judged.relation, judged.equivocation) == (None, None, None)
        assert judged.verdict(VERIFIED) is VERIFIED  # kept as it is, not copied


def test_a_version_lacking_events_is_a_fork_when_it_has_others_and_stale_when_not():
    fork = judge(CURRENT, NEW, digests("e1", "x"), LATER, LATER, "http://a/x")
    stale = judge(CURRENT, NEW, digests("e1"), LATER, LATER, "http://a/x")
    assert fork.relation == "forked" and stale.relation == "stale"
    assert fork.objection == stale.objection == f"lacks 1 of the 2 events of the current version {CURRENT.bundle.hex()}"
    assert fork.equivocation is None  # not from a mirror: evidence, no split view
    labelled = fork.verdict(VERIFIED)
    assert (labelled.status, labelled.reason, labelled.path, labelled.detail) == (
        Status.VERIFIED,
        Reason.NOT_APPEND_ONLY,
        "events",
        fork.objection,
    )


def test_a_version_built_before_the_current_one_is_stale():
    judged = judge(CURRENT, NEW, digests("e1", "e2"), T0 - timedelta(days=1), LATER, "http://a/x")
    assert judged.relation == "stale"
    assert judged.objection == f"built before the current version {CURRENT.bundle.hex()}"


def test_a_mirrors_fork_is_a_split_view_and_its_stale_copy_is_not():
    fork = judge(CURRENT, NEW, digests("e1", "x"), LATER, LATER, "http://m/x", forks_are_split_views=True)
    stale = judge(CURRENT, NEW, digests("e1"), LATER, LATER, "http://m/x", forks_are_split_views=True)
    assert stale.equivocation is None
    assert fork.equivocation is not None
    assert (fork.equivocation.other_url, fork.equivocation.other_bundle_sha256) == (None, CURRENT.bundle.hex())
    assert fork.equivocation.detail.startswith("http://m/x serves a history of the record that forks")
    assert fork.equivocation.detail.endswith(f"it {fork.objection}")
    labelled = fork.verdict(VERIFIED)
    assert (labelled.reason, labelled.detail) == (Reason.EQUIVOCATION, fork.equivocation.detail)


def test_a_split_view_found_elsewhere_is_kept_whether_or_not_the_version_may_follow():
    found = Equivocation("http://r/x", "ab" * 32, "another resolver serves a fork")
    successor = judge(CURRENT, NEW, digests("e1", "e2", "e3"), LATER, LATER, "http://m/x", found, True)
    fork = judge(CURRENT, NEW, digests("e1", "x"), LATER, LATER, "http://m/x", found, True)
    assert successor.objection is None and successor.equivocation is found
    assert fork.relation == "forked" and fork.equivocation is found  # not replaced by the archive's
    assert successor.verdict(VERIFIED).reason == fork.verdict(VERIFIED).reason == Reason.EQUIVOCATION
