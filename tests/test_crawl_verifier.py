"""Bundles parsed and verified in worker processes (crawler.verifying.verifier): the same verdicts,
rows and quarantine as in the crawl's own thread, and a worker killed mid-bundle loses
nothing."""

import asyncio
import base64
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from crawler.verifying.verifier import Worker
from crawler.verifying.verify_worker import BundleChecker, Checked, decode, encode_verdict, restore
from pith.keyring import ARCHIVE, Keyring
from pith.parse import Limits
from pith.verdict import Verdict
from pith_archiver import FIXTURES
from pith_testkit.faults import FaultPlan
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.archive.history import Judgement
from storage.archive.stores import ObjectInfo, Put, StorageError
from tests.plugins.archives import corpus_raws
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.faults import archiver_keyring, audit_archive
from tests.plugins.tables import read_rows
from tests.tamper import MUTATIONS, RAW_MUTATIONS, tampered
from tests.test_crash_resume import crawl_args, expected_numbers, start_crawl, wait_for

REAL = sorted(path.name.split(".")[0] for path in FIXTURES.glob("*.bundle.json"))
# every mutation that needs no re-signing; too_large is never fetched whole (DOWNLOAD_MAXSIZE)
CASES = sorted(
    [name for name, mutation in MUTATIONS.items() if not mutation.resign]
    + [name for name in RAW_MUTATIONS if name != "too_large"]
)


def made_up_suffix(name: str) -> str:
    return base64.b32encode(hashlib.sha256(name.encode()).digest()).decode()[:26]


def tampered_site(root: Path) -> dict[str, str]:
    """The real bundles and one tampered copy per mutation, as plain files in the
    resolver's layout; returns the reason each suffix must be rejected for ("" for none)."""
    expected = {}
    real = (FIXTURES / f"{REAL[0]}.bundle.json").read_bytes()
    bodies = {suffix: (FIXTURES / f"{suffix}.bundle.json").read_bytes() for suffix in REAL}
    for name in CASES:
        bodies[made_up_suffix(name)] = tampered(real, name)
        expected[made_up_suffix(name)] = (MUTATIONS.get(name) or RAW_MUTATIONS[name]).reason
    for suffix, body in bodies.items():
        folder = root / "pith" / suffix
        folder.mkdir(parents=True)
        (folder / "bundle.json").write_bytes(body)
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    return {suffix: expected.get(suffix, "") for suffix in bodies}


def verdicts(archive: Path) -> set[tuple]:
    """What the verifications table says of each URL, minus when and in which run."""
    columns = ["url", "pith_number", "status", "reason", "detail_path", "detail", "raw_sha256", "bundle_sha256"]
    return {tuple(row[name] for name in columns) for row in read_rows(archive, "verifications", columns=columns)}


def stored(archive: Path) -> set[str]:
    return {
        str(path.relative_to(archive))
        for folder in ("raw", "quarantine")
        for path in (archive / folder).rglob("*")
        if path.is_file()
    }


@pytest.mark.slow
def test_workers_and_the_crawl_thread_give_the_same_verdicts(tmp_path, static_site):
    base, _, root = static_site
    expected = tampered_site(root / "tampered")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(f"{suffix}\n" for suffix in expected))
    results = {}
    for workers in ("0", "2"):
        out = tmp_path / f"archive-{workers}"
        results[workers] = run_cli_crawl(
            tmp_path,
            "--resolver",
            f"{base}/tampered",
            "--seeds-file",
            str(seeds),
            "--no-follow",
            "--out",
            str(out),
            "--verify-workers",
            workers,
        )
        assert results[workers].returncode == 1, results[workers].stderr[-3000:]  # rejections, nothing else
    inline, pooled = results["0"], results["2"]
    assert (inline.stat("verify_workers"), pooled.stat("verify_workers")) == (0, 2)
    assert (pooled.stat("verified"), pooled.stat("rejected")) == (len(REAL), len(CASES))

    found = verdicts(tmp_path / "archive-2")
    assert found == verdicts(tmp_path / "archive-0")
    assert {url.split("/")[-2]: reason or "" for url, _, _, reason, *_ in found} == expected
    assert stored(tmp_path / "archive-2") == stored(tmp_path / "archive-0")
    assert len([path for path in stored(tmp_path / "archive-2") if path.startswith("quarantine/")]) == 2 * len(CASES)
    for key, value in inline.stats.items():  # the same counts, reason by reason
        if key.startswith(("pith/rejected", "pith/verified", "pith/archived")):
            assert pooled.stats.get(key) == value, key


def verifier_processes(crawl_pid: int) -> list[int]:
    """The crawl's verifier workers: its children hosting ``crawler.verifying.verify_worker``."""
    pids = []
    for task in os.listdir(f"/proc/{crawl_pid}/task"):
        pids += map(int, Path(f"/proc/{crawl_pid}/task/{task}/children").read_text().split())
    return [pid for pid in pids if b"crawler.verifying.verify_worker" in Path(f"/proc/{pid}/cmdline").read_bytes()]


@pytest.mark.slow
@pytest.mark.parametrize("fate", ["killed", "frozen"])
def test_a_verifier_process_killed_or_frozen_mid_bundle_loses_nothing(
    fate, tmp_path, corpus_dir, corpus_catalog, corpus_keyring, mirror
):
    """A worker killed while it holds bundles, or frozen for good (the crawl kills it
    once it has held one PITH_VERIFY_TIMEOUT seconds), is replaced and its bundles are
    verified again: every record archived once, the crawl ends by itself, exit 0."""
    server = mirror(faults=FaultPlan(latency_ms=50))
    store = LocalStore(tmp_path / "archive")
    stats = tmp_path / "stats.json"
    # every record a seed: fetching goes on while the verifier is stopped (links wait for verdicts);
    # no WARC files, so the verifier has a process of its own (with them, the WARC writer's
    # process hosts it, and killing that one is tests/test_warc_faults.py's)
    args = crawl_args(
        server,
        corpus_dir,
        ["--out", str(store.root)],
        "--verify-workers",
        "1",
        "--no-warc",
        "--no-follow",
        "--stats-json",
        str(stats),
        "-s",
        "CONCURRENT_REQUESTS_PER_DOMAIN=2",
        "-s",
        "PITH_VERIFY_TIMEOUT=3",
        seeds=sorted(corpus_catalog.suffixes),
    )
    process, log = start_crawl(tmp_path, args, "crawl")
    fetched = lambda: sum(r.document == "bundle" and r.status == 200 for r in server.requests)  # noqa: E731
    wait_for(lambda: fetched() >= 3 and verifier_processes(process.pid), process, "a verifier at work")
    [worker] = verifier_processes(process.pid)
    os.kill(worker, signal.SIGSTOP)  # it holds the bundles sent to it, unanswered, until it dies
    held = fetched()
    wait_for(lambda: fetched() >= held + 3, process, "bundles waiting on the stopped verifier")
    if fate == "killed":
        time.sleep(0.2)
        os.kill(worker, signal.SIGKILL)
    assert process.wait(120) == 0, log.read_text()[-3000:]
    if fate == "frozen":
        assert "answered nothing for 3 s: it is replaced" in log.read_text()

    result = json.loads(stats.read_text())
    assert result["pith/verify_pool_restarts"] == 1
    assert result["pith/archived"] == result["pith/verified"] == len(corpus_catalog)
    check = audit_archive(store, archiver_keyring(tmp_path), corpus_keyring)
    assert check.clean, check.discrepancies
    assert sorted(check.numbers()) == expected_numbers(corpus_catalog)  # every record, exactly once


def test_a_verifier_that_keeps_answering_is_never_taken_for_dead_one_that_stops_is():
    """The deadline is the oldest bundle's under way, not the first one's: a counterpart
    that answers ten queued bundles a tenth of a second apart (a second in all, four
    timeouts of 0.25 s) keeps its place; one that then stops answering is taken for
    dead once its oldest bundle has waited the timeout, and nothing waits longer."""
    import socket as sockets
    import threading

    from crawler.verifying.verifier import WorkerLost
    from storage.runtime.child_process import framed, messages

    ours, theirs = sockets.socketpair()
    checker = BundleChecker(Keyring.default(), Limits())
    raw = (FIXTURES / f"{REAL[0]}.bundle.json").read_bytes()
    answer = encode_verdict(checker(raw))
    answered = threading.Event()

    def counterpart(answers: int) -> None:
        incoming = messages(theirs.makefile("rb"))
        next(incoming)  # the configuration
        for _ in range(answers):
            next(incoming)
            time.sleep(0.1)
            theirs.sendall(framed(answer))
        answered.set()
        for _ in incoming:  # holds the rest unanswered, until the crawl's end closes
            pass

    async def ask() -> tuple[list, float]:
        worker = Worker(checker, channel=ours, timeout=0.25)
        try:
            steady = await asyncio.gather(*(worker.check(raw) for _ in range(10)))
            assert worker.alive
            started = time.monotonic()
            with pytest.raises(WorkerLost):
                await worker.check(raw)
            return steady, time.monotonic() - started
        finally:
            worker.close()

    thread = threading.Thread(target=counterpart, args=(10,), daemon=True)
    thread.start()
    steady, waited = asyncio.run(ask())
    assert answered.is_set()
    assert [checked.verdict.ok for checked in steady] == [True] * 10
    assert 0.2 <= waited < 2.0
    theirs.close()


def test_a_verdict_crosses_the_socket_as_json_and_one_that_cannot_is_left_to_the_crawl():
    verdict = Verdict(
        "rejected",
        "state_mismatch",
        "state.state_sha256",
        "recomputed 1f, signed 2e",
        pith_number="pith:2024:ABCDEFGH",
        merge_confirmed=False,
        inferred_types=("correction", "timestamp_anchor"),
        merge_inferred_match=False,
    )
    digest = hashlib.sha256(b"the bundle").hexdigest()
    assert decode(encode_verdict(Checked(verdict, True, digest))) == Checked(verdict, True, digest)
    malformed = Checked(Verdict("rejected", "malformed_json"), False, digest)
    assert decode(encode_verdict(malformed)) == malformed
    lone = Checked(replace(verdict, detail="a lone \ud800 surrogate"), True, digest)
    assert encode_verdict(lone) == b""  # the crawl judges it itself


@pytest.mark.parametrize("name", REAL)
def test_a_verified_bundle_crosses_the_socket_prepared_for_the_archive_without_its_tree(name):
    """What a worker sends of a real registry bundle is what the crawl's own thread would
    have worked out from the parsed tree: the archive's rows, the signers, the citers."""
    raw = (FIXTURES / f"{name}.bundle.json").read_bytes()
    checked = BundleChecker(Keyring.default(), Limits())(raw)
    assert checked.verdict.ok and checked.prepared is not None
    received = decode(encode_verdict(checked))
    assert received.verdict == replace(checked.verdict, bundle=None)
    assert received.prepared == checked.prepared
    assert received.prepared.events and received.key_ids == checked.key_ids != ()
    assert received.names_every_citer == checked.names_every_citer
    when = datetime(2026, 1, 2, tzinfo=timezone.utc)
    judged = Judgement()
    assert received.prepared.lines("r1", judged, "http://mirror/", when, "raw/x") == checked.prepared.lines(
        "r1", judged, "http://mirror/", when, "raw/x"
    )
    assert restore(received, raw, Limits(), tree=False).verdict.bundle is None  # not rebuilt unless read
    assert restore(received, raw, Limits()).verdict == checked.verdict


def test_a_worker_imports_neither_scrapy_nor_pyarrow():
    """It starts fast and stays small: the rows it prepares need the writer's encoding only."""
    code = (
        "import sys, crawler.verifying.verify_worker; "
        "print(sorted(m for m in ('scrapy', 'twisted', 'pyarrow', 'boto3') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    assert result.stdout == "[]\n", result.stdout + result.stderr


def test_a_worker_checks_as_the_crawl_does_with_its_keys_whatever_folder_it_runs_in(tmp_path, monkeypatch):
    """A worker is started by module name on the crawl's import path, not the working
    folder's (a mirror's ``pith/`` tree there changes nothing), and is sent the crawl's
    keyring, windows and roles included."""
    for name in ("pith", "crawler"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("raise ImportError('the working folder was imported')\n")
    monkeypatch.chdir(tmp_path)
    keyring = Keyring.default()
    registry = next(iter(keyring))
    utc = timezone.utc
    windowed = replace(
        registry,
        key_id="windowed",
        not_before=datetime(2020, 1, 1, tzinfo=utc),
        not_after=datetime(2030, 6, 1, tzinfo=utc),
    )
    keyring.add(windowed)
    keyring.add(replace(registry, key_id="an-archive-key", role=ARCHIVE))
    checker = BundleChecker(keyring, Limits(max_bytes=1 << 20))
    configured = BundleChecker.configured(checker.configuration())
    assert list(configured.keyring) == list(keyring) and configured.limits == checker.limits

    real = (FIXTURES / f"{REAL[0]}.bundle.json").read_bytes()
    bodies = [(FIXTURES / f"{suffix}.bundle.json").read_bytes() for suffix in REAL]
    bodies += [tampered(real, name) for name in CASES[:6]] + [b"not json", b"x" * (1 << 20 + 1)]

    async def check_all():
        worker = Worker(checker)
        try:
            one_by_one = [await worker.check(body) for body in bodies]
            together = await asyncio.gather(*(worker.check(body) for body in bodies))  # in flight at once
            return one_by_one, together
        finally:
            worker.close()

    expected = [Checked(replace(c.verdict, bundle=None), *c[1:]) for c in map(checker, bodies)]
    assert [checked.verdict.ok for checked in expected] == [True] * len(REAL) + [False] * (len(bodies) - len(REAL))
    assert [checked.raw_sha256 for checked in expected] == [hashlib.sha256(body).hexdigest() for body in bodies]
    assert asyncio.run(check_all()) == (expected, expected)


def test_a_worker_stores_what_it_verifies_in_the_archive_folder_as_the_writer_would(tmp_path):
    """Given the archive's folder, a worker stores each verified bundle's exact bytes at
    their content address, create-only, and says so; a rejected bundle is left to the
    crawl (quarantine), and bytes it cannot store come back as the store's error."""
    checker = BundleChecker(Keyring.default(), Limits())
    real = [(FIXTURES / f"{suffix}.bundle.json").read_bytes() for suffix in REAL]
    bodies = [*real, tampered(real[0], CASES[0]), real[1]]  # the last: the same bytes again
    clash = tmp_path / "clash"
    LocalStore(clash).put_bytes(layout.raw_bundle(hashlib.sha256(real[0]).hexdigest()), b"other bytes")

    async def check_all(folder: Path) -> list[Checked]:
        worker = Worker(checker, folder=str(folder))
        try:
            return list(await asyncio.gather(*(worker.check(body) for body in bodies)))
        finally:
            worker.close()

    answers = asyncio.run(check_all(tmp_path / "archive"))
    for at, (body, answer) in enumerate(zip(bodies, answers)):
        if not answer.verdict.ok:
            assert answer.stored is None
            continue
        path = layout.raw_bundle(answer.raw_sha256)
        made = at < len(REAL)  # the last: bytes it found there, stored before
        assert answer.stored == Put(ObjectInfo(path, hashlib.sha256(body).hexdigest(), len(body)), made)
        assert (tmp_path / "archive" / path).read_bytes() == body
    assert [answer.verdict.ok for answer in answers] == [True] * len(REAL) + [False, True]
    assert not (tmp_path / "archive" / "quarantine").exists()

    first = asyncio.run(check_all(clash))[0]
    assert isinstance(first.stored, StorageError)
    assert layout.raw_bundle(first.raw_sha256) in str(first.stored)


@pytest.mark.parametrize("workers", ["1", "0"])
def test_an_archive_holding_other_bytes_at_a_bundles_address_fails_the_crawl_by_name(
    workers, tmp_path, corpus_dir, mirror
):
    """A raw object edited in the archive (other bytes under a bundle's content address)
    is never taken for the bundle, whether the verifier worker or the crawl stores it:
    the crawl ends with exit 4, one line naming the object, no traceback, and commits
    nothing of the run."""
    seed = "RLLQL6357CWNZYHNBMCYD3UK5B"
    raw = corpus_raws(corpus_dir)[seed]
    archive = tmp_path / "archive"
    path = layout.raw_bundle(hashlib.sha256(raw).hexdigest())
    LocalStore(archive).put_bytes(path, raw.replace(b"{", b" {", 1))  # edited after signing
    result = run_cli_crawl(
        tmp_path,
        seed,
        "--no-follow",
        "--verify-workers",
        workers,
        resolver=mirror().url,
        out=archive,
        corpus=corpus_dir,
        logged=False,
    )
    assert result.returncode == 4, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("failed (exit 4)")]
    assert path in line, result.stderr[-3000:]
    assert not (archive / "manifests").exists() or not any((archive / "manifests").iterdir())


@pytest.mark.parametrize("kind", ["garbage", "cut short", "no stored object"])
def test_a_worker_answer_that_is_no_verdict_loses_the_worker_not_the_bundle(kind):
    """Whatever comes back on a worker's socket that is not a verdict (garbage, a verdict
    cut short, a stored object that is none) ends that worker: the bundle waiting on it
    gets WorkerLost at once, to be verified again, never a wait without end."""
    import socket as sockets

    from crawler.verifying.verifier import WorkerLost
    from storage.runtime.child_process import framed, messages

    ours, theirs = sockets.socketpair()
    theirs.settimeout(10)
    checker = BundleChecker(Keyring.default(), Limits())
    raw = (FIXTURES / f"{REAL[0]}.bundle.json").read_bytes()
    verdict = json.loads(encode_verdict(checker(raw)))
    answer = {
        "garbage": b"not json",
        "cut short": json.dumps(verdict[:2]).encode(),
        "no stored object": json.dumps([*verdict[:-1], 7]).encode(),
    }[kind]
    assert decode(encode_verdict(checker(raw))).verdict.ok  # the answer it stands in for decodes

    async def ask():
        worker = Worker(checker, channel=ours)
        try:
            waiting = asyncio.ensure_future(worker.check(raw))
            incoming = messages(theirs.makefile("rb"))
            received = await asyncio.to_thread(lambda: [next(incoming), next(incoming)])  # the loop sends meanwhile
            assert received == [checker.configuration(), raw]
            theirs.sendall(framed(answer))
            with pytest.raises(WorkerLost):
                await asyncio.wait_for(waiting, 10)
            assert not worker.alive
        finally:
            worker.close()
            theirs.close()

    asyncio.run(ask())
