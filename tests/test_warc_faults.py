"""A WARC writer that dies or freezes costs its unwritten records, never the run's
honesty: real crawls whose WARC child is killed (``kill -9``) or stopped (``kill
-STOP``) mid-crawl, a writer killed between records, a file cut mid-record."""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawler.verifying.verifier import SERVICE as VERIFIER_SERVICE
from crawler.verifying.verify_worker import BundleChecker, decode
from pith.keyring import Keyring
from pith.parse import Limits
from pith.shipped import real_bundles
from pith.signing import Signer
from pith_archiver.crawl.report import report
from pith_archiver.exit_status import ExitStatus
from pith_archiver.output import QUIET
from pith_testkit.faults import FaultPlan
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.archive.manifest import committed_manifests
from storage.capture.exchanges import Exchange
from storage.capture.warc import WarcPolicy
from storage.capture.warc_process import CHILD
from storage.capture.warc_salvage import complete_length, salvage
from storage.runtime.child_process import WatchedChild, framed, messages
from storage.serving.source import KEYRING_NAME
from storage.writing.writer import ArchiveWriter
from tests.plugins.cli import run_cli
from tests.plugins.crawling import run_cli_crawl

WARCIO = [sys.executable, "-m", "warcio.cli"]


def warc_check(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*WARCIO, "check", "-v", str(path)], capture_output=True, text=True)


def exchange(index: int, now: datetime) -> Exchange:
    url = f"http://127.0.0.1:9/pith/R{index:02d}/bundle.json"
    body = json.dumps({"n": index, "pad": "x" * 300}).encode()
    return Exchange(url, "GET", [], b"", 200, "HTTP/1.1", [("Content-Type", "application/json")], body, now)


def urls_in(path: Path) -> list[str]:
    with open(path, "rb") as stream:
        return [r.rec_headers["WARC-Target-URI"] for r in ArchiveIterator(stream) if r.rec_type == "response"]


def test_a_file_cut_mid_record_is_salvaged_to_its_last_whole_record(tmp_path):
    """What a writer killed while writing leaves: every record before the one under way."""
    from storage.capture.warc import WarcWriter

    files = []
    writer = WarcWriter(
        "20261126T000000Z-w0-00000001", str(tmp_path), lambda *args: files.append(args), lambda: None, {}
    )
    now = datetime.now(timezone.utc)
    for index in range(4):
        writer.record(exchange(index, now))
        writer.verdict(exchange(index, now).url, {"status": "verified", "pith_number": f"pith:2019:R{index:02d}"})
    writer.close(None)
    ((_, _, spool, _, _, exchanges),) = files
    assert exchanges == 4
    whole = spool.read_bytes()
    cut = tmp_path / "cut" / spool.name
    cut.parent.mkdir()
    cut.write_bytes(whole[:-40])  # the last record (a verdict) cut short
    assert 0 < complete_length(cut) < len(whole) - 40
    captures, _, kept = salvage(cut, str(cut.parent))
    assert kept == 4 and warc_check(cut).returncode == 0
    rows = [json.loads(line) for line in captures.read_text().splitlines()]
    assert [row["url"] for row in rows] == urls_in(cut) == [exchange(i, now).url for i in range(4)]
    assert [row["status"] for row in rows] == ["verified"] * 3 + [None]  # the last verdict was cut off
    for row in rows:
        with open(cut, "rb") as stream:
            stream.seek(row["warc_record_offset"])
            assert next(ArchiveIterator(stream)).rec_headers["WARC-Record-ID"] == row["warc_record_id"]

    nothing = tmp_path / "nothing" / spool.name
    nothing.parent.mkdir()
    nothing.write_bytes(whole[: complete_length(cut) // 8])  # not even the warcinfo record whole
    assert salvage(nothing, str(nothing.parent)) is None and not nothing.exists()


@pytest.mark.slow
def test_a_writer_killed_between_records_keeps_what_it_wrote_and_counts_the_rest(tmp_path, caplog):
    signer = Signer.generate("test-archiver")
    store = LocalStore(tmp_path / "archive")
    spools = tmp_path / "spool"
    spools.mkdir()
    writer = ArchiveWriter(store, signer, warc=WarcPolicy(), warc_info={"software": "test"}, spool_dir=spools).open()
    now = datetime.now(timezone.utc)
    for index in range(5):
        writer.warc.record(exchange(index, now))
    writer.commit_interim({}, {})
    for index in range(5, 9):
        writer.warc.record(exchange(index, now))
    deadline = time.monotonic() + 30
    while sum(len(urls_in(p)) for p in spools.glob("*/*.warc.gz")) < 4:  # written, not handed back
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(writer.warc.pid, signal.SIGKILL)
    for index in range(9, 12):  # sent after the death: no file holds them
        writer.warc.record(exchange(index, now))
    writer.commit({}, {})

    assert writer.warc.stopped == "killed by signal 9"
    assert writer.warc.exchanges == 12 and writer.warc.lost == 3
    assert sum("the WARC writer stopped" in message for message in caplog.messages) == 1
    manifests = committed_manifests(store, Keyring([signer.pinned()]))
    warcs = {m["run_id"]: [e["path"] for e in m["objects"] if layout.is_warc(e["path"])] for m in manifests}
    assert [len(paths) for paths in warcs.values()] == [1, 1]  # the second run's file, salvaged
    (first,) = warcs.pop(writer.first_run)
    ((second,),) = warcs.values()
    assert urls_in(tmp_path / "archive" / first) == [exchange(i, now).url for i in range(5)]
    assert urls_in(tmp_path / "archive" / second) == [exchange(i, now).url for i in range(5, 9)]
    for path in (first, second):
        assert warc_check(tmp_path / "archive" / path).returncode == 0


@pytest.mark.slow
def test_a_child_that_takes_nothing_is_killed_and_its_waiters_released(tmp_path):
    child = WatchedChild(CHILD, stall_timeout=1.0, max_queued=256 * 1024)
    os.kill(child.process.pid, signal.SIGSTOP)
    released = threading.Event()
    started = time.monotonic()
    while not child.full:  # the socket's buffer fills, then the queue
        assert child.send(b"x" * 65536)
    child.when_room(released.set)
    assert released.wait(15), "the stopped child was never killed"
    assert time.monotonic() - started < 15
    assert child.gone == "took nothing for 1 s, killed" and not child.full
    assert not child.send(b"more")  # gone: nothing is queued any more
    assert child.ask(b'["roll"]') is None
    child.stop()
    assert child.process.returncode == -signal.SIGKILL


@pytest.mark.slow
def test_a_child_frozen_while_nothing_is_queued_is_killed_when_it_falls_silent():
    """The verifier the WARC writer's child hosts may be waited on while no record is
    queued for the writer: the watch hears the child's signs of life, and kills it once
    they stop, so no wait on a frozen child outlasts the stall timeout."""
    child = WatchedChild(CHILD, stall_timeout=3.0, max_queued=1 << 20, hosted=(VERIFIER_SERVICE,))
    channel = child.take_channel(0)
    assert channel is not None and child.take_channel(0) is None  # its user's, once
    channel.settimeout(30)
    checker = BundleChecker(Keyring.default(), Limits())
    channel.sendall(framed(checker.configuration(), real_bundles()[0].read_bytes()))
    answer = decode(next(messages(channel.makefile("rb"))))
    assert answer.verdict.ok and answer.parsed, answer.verdict  # the hosted verifier answers on its own socket
    assert child.gone is None
    os.kill(child.process.pid, signal.SIGSTOP)
    started = time.monotonic()
    while child.gone is None and time.monotonic() - started < 20:
        time.sleep(0.1)
    assert child.gone == "said nothing for 3 s, killed"
    assert time.monotonic() - started < 10
    assert channel.recv(1) == b""  # the hosted verifier's socket closed with its process
    channel.close()
    child.stop()
    assert child.process.returncode == -signal.SIGKILL


def _warc_child_of(crawl_parent: int) -> tuple[int, int] | None:
    """The WARC child of a crawl started by ``crawl_parent`` (this test), if it runs,
    and the crawl's process id."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            grand = int((Path("/proc") / str(ppid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"storage.capture.warc_child" in cmdline and grand == crawl_parent:
            return int(proc.name), ppid
    return None


def _crawl_and_hit_the_writer(tmp_path, mirror, corpus_dir, hit: int, *settings: str, interrupt: bool = False):
    """A slow crawl of the whole corpus whose WARC child gets signal ``hit`` once it
    has written a few records (``interrupt``: then the crawl gets Ctrl-C); returns the
    crawl's result, how long it took, and the archive."""
    server = mirror(faults=FaultPlan(latency_ms=200))
    archive = tmp_path / "archive"
    outcome = {}
    crawl = threading.Thread(
        target=lambda: outcome.update(
            result=run_cli_crawl(
                tmp_path,
                "sitemap",
                *("-s", "CONCURRENT_REQUESTS_PER_DOMAIN=2", *settings),
                resolver=server.url,
                out=archive,
                corpus=corpus_dir,
                timeout=240,
            )
        )
    )
    started = time.monotonic()
    crawl.start()
    found = None
    while found is None or not list(Path(tempfile.gettempdir()).glob(f"pith-spool-{found[1]}-*/*.warc.gz")):
        assert time.monotonic() - started < 60 and crawl.is_alive(), "the crawl's WARC child never wrote"
        found = found or _warc_child_of(os.getpid())
        time.sleep(0.1)
    time.sleep(0.5)  # a few exchanges recorded
    assert crawl.is_alive(), "the crawl ended before its WARC writer could be hit"
    os.kill(found[0], hit)
    if interrupt:
        time.sleep(0.5)
        os.kill(found[1], signal.SIGINT)
    crawl.join(240)
    return outcome["result"], time.monotonic() - started, archive


def _check_the_run_stayed_honest(tmp_path, result, archive, corpus_dir, why: str) -> None:
    assert result.returncode == 3, result.stdout + result.stderr[-3000:]
    assert result.stat("archived") == result.stat("records_found") > 0  # every record archived
    assert result.stat("verify_pool_restarts") == 1  # the verifier it hosted, replaced by a process of its own
    match = re.search(r"WARC writer stopped: (\d+) exchanges? not recorded \(([^)]*)\)", result.output)
    assert match and int(match[1]) > 0 and why in match[2], result.output[-3000:]
    assert result.stat("warc_errors") == int(match[1])
    audit = run_cli("audit", archive, "--keyring", corpus_dir / KEYRING_NAME, home=tmp_path)
    assert audit.returncode == 0, audit.output
    warcs = sorted((archive / "warc").glob("*.warc.gz"))
    assert warcs, "the exchanges recorded before the writer stopped are lost"
    for path in warcs:
        assert warc_check(path).returncode == 0
        assert (archive / "warc" / layout.warc_index(f"warc/{path.name}").rsplit("/", 1)[1]).exists()
    manifest = json.loads(sorted((archive / "manifests").glob("*.json"))[-1].read_text())
    listed = {entry["path"] for entry in manifest["objects"]}
    assert {f"warc/{path.name}" for path in warcs} <= listed
    assert sum(len(urls_in(path)) for path in warcs) > 0
    wacz = run_cli("export", archive, "--format", "wacz", "--out", tmp_path / "after.wacz", home=tmp_path)
    assert wacz.returncode == 0, wacz.output


@pytest.mark.slow
def test_a_warc_writer_killed_mid_crawl_ends_the_run_with_exit_3(tmp_path, mirror, corpus_dir):
    result, _, archive = _crawl_and_hit_the_writer(tmp_path, mirror, corpus_dir, signal.SIGKILL)
    _check_the_run_stayed_honest(tmp_path, result, archive, corpus_dir, "killed by signal 9")


@pytest.mark.slow
def test_a_frozen_warc_writer_is_killed_and_the_crawl_ends(tmp_path, mirror, corpus_dir):
    result, took, archive = _crawl_and_hit_the_writer(
        tmp_path, mirror, corpus_dir, signal.SIGSTOP, "-s", "PITH_WARC_STALL_TIMEOUT=3"
    )
    assert took < 120
    _check_the_run_stayed_honest(tmp_path, result, archive, corpus_dir, "for 3 s")


@pytest.mark.slow
def test_ctrl_c_ends_a_crawl_whose_warc_writer_is_frozen(tmp_path, mirror, corpus_dir):
    result, took, archive = _crawl_and_hit_the_writer(
        tmp_path, mirror, corpus_dir, signal.SIGSTOP, "-s", "PITH_WARC_STALL_TIMEOUT=5", interrupt=True
    )
    assert result.returncode == 130, result.output[-3000:]
    assert took < 60
    assert "resume with" in result.output
    assert sorted((archive / "manifests").glob("*.json"))  # what was archived is committed


@pytest.mark.slow
def test_a_full_queue_holds_responses_back_and_loses_nothing(tmp_path, static_site):
    """A queue of one byte: every response waits for the writer to take its records."""
    base, suffixes, _ = static_site
    archive = tmp_path / "archive"
    result = run_cli_crawl(tmp_path, "--resolver", base, suffixes[0], "--out", archive, "-s", "PITH_WARC_QUEUE_BYTES=1")
    assert result.returncode == 0, result.output[-3000:]
    assert result.stat("warc_responses") > len(suffixes) and not result.stat("warc_errors")
    found = []
    for path in (archive / "warc").glob("*.warc.gz"):
        with open(path, "rb") as stream:
            found += [
                r.rec_headers["WARC-Target-URI"]
                for r in ArchiveIterator(stream)
                if r.rec_type in ("response", "revisit")
            ]
    assert len(found) == result.stat("warc_responses")  # every exchange handed over is in a file
    assert {f"{base}/pith/{suffix}/bundle.json" for suffix in suffixes} <= set(found)


def test_exchanges_missing_from_the_warc_files_make_a_done_run_partial(capsys):
    """WARC recording is on by default: a run whose WARC files lack exchanges is done
    with failures (3), and says so even in one quiet line; a worse status still wins."""
    done = {
        "pith/records_found": 3,
        "pith/bundles_fetched": 3,
        "pith/archived": 3,
        "pith/manifest": "manifests/x.json",
        "pith/warc_errors": 5,
        "pith/warc_stopped": "killed by signal 9",
    }
    assert report(done, "archive", (1.0, True), verbosity=QUIET) == ExitStatus.PARTIAL
    assert "WARC writer stopped: 5 exchanges not recorded (killed by signal 9)" in capsys.readouterr().err
    rejected = {**done, "pith/rejected": 1}
    assert report(rejected, "archive", (1.0, True)) == ExitStatus.REJECTED
    assert report({**done, "pith/warc_errors": 0}, "archive", (1.0, True)) == ExitStatus.OK


def test_records_sent_at_once_and_records_queued_behind_a_full_socket_keep_their_order(tmp_path):
    """A record goes down the child's socket from the caller's thread while nothing is
    queued, and waits in the queue for the sender thread once the socket is full (a
    child that stopped reading): either way the WARC file holds every record, in the
    order the crawl sent them."""
    signer = Signer.generate("test-archiver")
    store = LocalStore(tmp_path / "archive")
    policy = WarcPolicy(queue_bytes=64 * 1024)
    writer = ArchiveWriter(store, signer, warc=policy, warc_info={"software": "test"}).open()
    now = datetime.now(timezone.utc)
    for index in range(5):  # a reading child: straight down the socket
        assert writer.warc.record(exchange(index, now))
    os.kill(writer.warc.pid, signal.SIGSTOP)
    try:
        count = 5
        while writer.warc.record(exchange(count, now)):  # the socket's buffer fills, then the queue
            count += 1
        count += 1
        for index in range(count, count + 5):  # behind the queue, never around it
            writer.warc.record(exchange(index, now))
    finally:
        os.kill(writer.warc.pid, signal.SIGCONT)
    writer.commit({}, {})
    (manifest,) = committed_manifests(store, Keyring([signer.pinned()]))
    (path,) = [entry["path"] for entry in manifest["objects"] if layout.is_warc(entry["path"])]
    assert urls_in(tmp_path / "archive" / path) == [exchange(i, now).url for i in range(count + 5)]
    assert writer.warc.lost == 0
