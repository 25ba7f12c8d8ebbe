"""SIGINT (Ctrl-C) and SIGTERM end every command at any stage, with exit 130 or 143,
and a crawl stopped by them commits what it verified, or says what it lost.

Each crawl here is a real ``pith-archiver crawl`` subprocess against the project's
mirror (or the S3 test server behind the fault proxy), sent signals with ``os.kill``
at moments observed from outside: answers that never end (the mirror trickling a byte
every few seconds), the manifest PUT held by the proxy, the summary printed while a
witness never answers.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from crawler.stat_keys import CrawlStats
from pith.signed_note import NOTE_KEY, VerifierKey
from pith.signing import Signer
from pith_archiver.crawl.report import outcome
from pith_archiver.exit_status import ExitStatus
from pith_archiver.interrupts import UNWIND
from pith_archiver.output import counted
from pith_testkit.faults import FaultPlan
from storage.archive.folder_store import LocalStore
from storage.archive.s3_store import S3Store
from storage.serving.source import KEYRING_NAME
from tests.plugins.cli import isolated_home
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.faults import FaultRule, archiver_keyring, audit_archive
from tests.plugins.mirror import serve_process
from tests.test_crash_resume import crawl_args, expected_numbers, start_crawl, wait_for
from tests.test_deadlines import policy_naming
from tests.test_warc_faults import _warc_child_of

STOPPED_AT_ONCE = 15  # seconds from the last signal to the exit, at most (the commit of ~40 records)
STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}
SEEDS = ("RLLQL6357CWNZYHNBMCYD3UK5B",)  # the real bundle: a crawl of one record


def stop_with(process, *signums: int, pause: float = 1.0) -> float:
    """Send ``signums`` to the crawl ``pause`` seconds apart; the seconds from the last
    one to its exit."""
    for index, signum in enumerate(signums):
        if index:
            time.sleep(pause)
            assert process.poll() is None, "the crawl ended before the next signal"
        os.kill(process.pid, signum)
    sent = time.monotonic()
    process.wait(timeout=90)
    return time.monotonic() - sent


def start_hanging_crawl(tmp_path, server, corpus_dir, store, *extra):
    """A crawl of the whole corpus whose later answers never end: once 8 bundles are
    archived the mirror trickles a byte every 5 s, and it returns with requests in flight."""
    stats = tmp_path / "stats.json"
    args = crawl_args(server, corpus_dir, ["--out", str(store.root), "--stats-json", str(stats)], *extra)
    process, log = start_crawl(tmp_path, args, "stopped")
    wait_for(lambda: len(list(store.root.glob("raw/bundles/**/*.json"))) >= 8, process, "bundles archived")
    server.set_faults(FaultPlan(trickle=5.0))
    # answers trickling, not requests in flight: one asked before the switch may still be answered whole
    wait_for(lambda: sum(r.fault == "trickle" for r in server.requests) >= 2, process, "requests hanging")
    return process, log, stats, args


@pytest.mark.slow
@pytest.mark.parametrize(
    "signums, to_all",
    [((signal.SIGINT, signal.SIGINT), False), ((signal.SIGTERM,), False), ((signal.SIGTERM,), True)],
    ids=["ctrl-c-twice", "sigterm", "sigterm-to-its-children-too"],
)
def test_a_crawl_stopped_at_once_commits_what_it_verified_and_resumes_the_rest(
    tmp_path, corpus_dir, corpus_catalog, corpus_keyring, mirror, signums, to_all, figures
):
    """``to_all``: the WARC writer's child (which hosts the verifier) gets the signal
    too, as from ``systemctl stop``: it is the crawl's to handle, the child goes on."""
    server = mirror(faults=FaultPlan(latency_ms=100))
    store = LocalStore(tmp_path / "archive")
    jobdir = ["--jobdir", str(tmp_path / "job")]
    process, log, stats_file, args = start_hanging_crawl(tmp_path, server, corpus_dir, store, *jobdir)
    if signums[0] == signal.SIGINT:  # the first Ctrl-C is graceful: it waits for the hanging answers
        os.kill(process.pid, signal.SIGINT)
        time.sleep(2)
        assert process.poll() is None
    if to_all:
        os.kill(_warc_child_of(os.getpid())[0], signums[-1])
    took = stop_with(process, signums[-1])
    output = log.read_text(errors="replace")
    assert process.returncode == STATUS[signums[-1]], output[-3000:]
    assert took < STOPPED_AT_ONCE
    stats = json.loads(stats_file.read_text())
    assert stats["pith/stopped_by"] == signal.Signals(signums[-1]).name
    assert stats["pith/requests_dropped"] >= 2 and "pith/commit_error" not in stats
    assert "pith/warc_errors" not in stats and "pith/verify_pool_restarts" not in stats  # no child lost
    assert " in flight dropped; what was archived is committed; resume with: pith-archiver crawl" in output
    assert "Traceback" not in output
    check = audit_archive(store, archiver_keyring(tmp_path), corpus_keyring)
    assert check.clean, check.discrepancies  # what was verified is committed, and nothing else was written
    committed = check.numbers()
    assert len(committed) == stats["pith/archived"] >= 8

    server.set_faults(FaultPlan())
    resumed = run_cli_crawl(tmp_path, *args)  # the dropped requests wait in the job's queue
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = audit_archive(store, archiver_keyring(tmp_path), corpus_keyring)
    assert after.clean, after.discrepancies
    assert sorted(after.numbers()) == expected_numbers(corpus_catalog)  # every record, once
    figures.add(
        f"signals:stopped_at_once:{'-'.join(signal.Signals(n).name for n in signums)}{':to_all' * to_all}",
        seconds_to_exit=round(took, 2),
        dropped=stats["pith/requests_dropped"],
        committed=len(committed),
        resumed=len(after.numbers()) - len(committed),
        records_lost=0,
    )


def ask(url: str) -> None:
    """GET ``url``, whatever comes of it (the server may die meanwhile)."""
    with contextlib.suppress(OSError):
        urllib.request.urlopen(url, timeout=60).read()  # noqa: S310 - a loopback test server


def start_s3_crawl(tmp_path, corpus_dir, mirror, proxy, s3_bucket, seeds, *extra: str):
    """A crawl of ``seeds`` alone into ``s3_bucket`` through ``proxy``; its log in a file."""
    out = ["--out", f"s3://{s3_bucket}/archive", "--s3-endpoint-url", proxy.url, "--no-follow"]
    return start_crawl(tmp_path, crawl_args(mirror(), corpus_dir, out, *extra, seeds=seeds), "crawl")


@pytest.mark.slow
@pytest.mark.parametrize(
    "signums, settings, why",
    [
        ((signal.SIGTERM, signal.SIGTERM), (), "SIGTERM again"),
        ((signal.SIGINT, signal.SIGINT, signal.SIGINT), (), "SIGINT again"),
        ((signal.SIGTERM,), ("-s", "PITH_STOP_GRACE=2"), "not stopped within PITH_STOP_GRACE (2 s)"),
    ],
    ids=["sigterm-twice", "ctrl-c-three-times", "grace"],
)
def test_a_commit_that_hangs_is_given_up_and_says_what_is_lost(
    figures,
    tmp_path,
    corpus_dir,
    corpus_catalog,
    corpus_keyring,
    mirror,
    fault_proxy,
    s3_bucket,
    s3_endpoint,
    signums,
    settings,
    why,
):
    proxy = fault_proxy(FaultRule("stall", methods=("PUT",), path=r"/manifests/"))
    seeds = corpus_catalog.suffixes[:3]
    process, log = start_s3_crawl(tmp_path, corpus_dir, mirror, proxy, s3_bucket, seeds, *settings)
    assert proxy.stalled.wait(60), "the crawl never reached its manifest"
    took = stop_with(process, *signums, pause=0.5)
    output = log.read_text(errors="replace")
    assert process.returncode == STATUS[signums[-1]], output[-3000:]
    assert took < (3 if len(signums) > 1 else 6)
    store = S3Store(s3_bucket, "archive", endpoint_url=s3_endpoint)
    stored = len(list(store.list("raw/bundles/")))
    assert stored == len(seeds)
    status = ExitStatus(STATUS[signums[-1]])
    assert output.rstrip().splitlines()[-1] == (
        f"{status.name.lower()} (exit {int(status)}): {why}: quit without committing; lost {counted(stored, 'bundle')} "
        "archived new since the last commit (the audit lists what they left as orphans); rerun the same command; "
        "ended at once"
    )
    check = audit_archive(store, archiver_keyring(tmp_path), corpus_keyring)
    assert check.codes() == {"orphan"} and not check.manifests  # nothing committed, nothing torn
    signals = "-".join(signal.Signals(signum).name for signum in signums) + ":grace" * bool(settings)
    figures.add(f"signals:commit_given_up:{signals}", seconds_to_exit=round(took, 2), said_lost=stored)


@pytest.mark.slow
def test_a_failed_commit_is_never_summarised_as_archived(
    tmp_path, corpus_dir, corpus_catalog, mirror, fault_proxy, s3_bucket, s3_endpoint
):
    """The store refuses the manifest (as a full disk would): the bundles verified and
    stored are not archived, the summary says how many are lost, exit 4."""
    proxy = fault_proxy(FaultRule("access_denied", methods=("PUT",), path=r"/manifests/"))
    result = run_cli_crawl(
        tmp_path,
        "--s3-endpoint-url",
        proxy.url,
        "--no-follow",
        *corpus_catalog.suffixes[:3],
        resolver=mirror().url,
        out=f"s3://{s3_bucket}/archive",
        corpus=corpus_dir,
    )
    assert result.returncode == 4, result.output[-3000:]
    lost = result.stats["pith/uncommitted"]
    assert lost == result.stat("archived") == 3
    assert f"archived 0 new ({lost} more not committed)" in result.stdout
    assert "\ncommitted " not in result.stdout
    assert "failed (exit 4): the final commit failed: " in result.stderr
    assert (
        "AccessDenied" in result.stderr
        and f": {counted(lost, 'bundle')} archived new left uncommitted" in result.stderr
    )
    assert [s.path for s in S3Store(s3_bucket, "archive", endpoint_url=s3_endpoint).list("manifests/")] == []


def test_a_stopped_crawl_whose_commit_failed_fails_and_sigterm_is_143():
    base = {"pith/bundles_fetched": 5, "pith/archived": 5, "finish_reason": "shutdown"}
    failed = outcome(
        CrawlStats.of({**base, "pith/stopped_by": "SIGINT", "pith/commit_error": "disk full", "pith/uncommitted": 5}),
        (0.0, False),
    )
    assert failed.status == ExitStatus.FAILED
    assert failed.why == "stopped, and the final commit failed: disk full: 5 bundles archived new left uncommitted"
    committed = {**base, "pith/manifest": "manifests/r.json"}
    assert outcome(CrawlStats.of({**committed, "pith/stopped_by": "SIGTERM"}), (0.0, False)).status == 143
    assert outcome(CrawlStats.of({**committed, "pith/stopped_by": "SIGINT"}), (0.0, False)).status == 130
    assert outcome(CrawlStats.of(committed), (0.0, False)).status == 130  # `scrapy crawl`'s own stop


@pytest.mark.slow
def test_sigterm_while_the_store_is_checked_ends_the_crawl_before_it_starts(
    tmp_path, corpus_dir, mirror, fault_proxy, s3_bucket
):
    proxy = fault_proxy(FaultRule("stall"))  # the probe of the bucket never answered
    process, log = start_s3_crawl(tmp_path, corpus_dir, mirror, proxy, s3_bucket, SEEDS)
    assert proxy.stalled.wait(60), "the crawl never checked its store"
    took = stop_with(process, signal.SIGTERM)
    output = log.read_text(errors="replace")
    assert process.returncode == 143 and took < 3, output[-3000:]
    assert output.splitlines() == ["terminated (exit 143): stopped before the command finished"]


@pytest.mark.slow
def test_sigterm_while_the_archive_opens_stops_the_crawl_as_it_starts(
    tmp_path, corpus_dir, mirror, fault_proxy, s3_bucket
):
    """Before its first request the crawl reads the archive's manifests: a signal then
    stops the engine as soon as it starts, and no bundle is fetched."""
    # the first listing of the archive's manifests, held (its keys/ and the write probe were read in the setup)
    proxy = fault_proxy(FaultRule("stall", methods=("GET",), query="manifests", limit=1))
    server = mirror()
    out = ["--out", f"s3://{s3_bucket}/archive", "--s3-endpoint-url", proxy.url]
    process, log = start_crawl(tmp_path, crawl_args(server, corpus_dir, out, seeds=SEEDS), "crawl")
    assert proxy.stalled.wait(60), "the crawl never read its archive"
    os.kill(process.pid, signal.SIGTERM)
    time.sleep(0.5)
    proxy.release()  # the listing is answered (retried) after the signal
    process.wait(60)
    output = log.read_text(errors="replace")
    assert process.returncode == 143, output[-3000:]
    assert not [r for r in server.requests if r.document == "bundle"]
    assert "terminated (exit 143): stopped by SIGTERM; nothing was fetched; resume with: " in output
    assert "ScrapyDeprecationWarning" not in output


@pytest.mark.slow
def test_sigterm_while_the_commit_waits_for_a_frozen_warc_writer(tmp_path, corpus_dir, corpus_catalog, mirror):
    """The commit waits for the WARC writer's child to write its last records: frozen
    (``kill -STOP``) from the start, it holds the commit for the stall timeout (30 s);
    the stop's grace ends the crawl first. (Verification stays in the crawl's thread,
    not in that child, so the crawl reaches its commit.)"""
    store = LocalStore(tmp_path / "archive")
    out = ["--out", str(store.root), "--no-follow", "-s", "PITH_STOP_GRACE=2", "-s", "PITH_VERIFY_WORKERS=0"]
    process, log = start_crawl(
        tmp_path, crawl_args(mirror(), corpus_dir, out, seeds=corpus_catalog.suffixes[:3]), "crawl"
    )
    wait_for(lambda: _warc_child_of(os.getpid()), process, "the WARC writer's child")
    child, _ = _warc_child_of(os.getpid())
    os.kill(child, signal.SIGSTOP)
    try:
        wait_for(lambda: "Closing spider (finished)" in log.read_text(errors="replace"), process, "the commit")
        took = stop_with(process, signal.SIGTERM)
    finally:
        os.kill(child, signal.SIGKILL)  # stopped, it would never read that its parent is gone
    output = log.read_text(errors="replace")
    assert process.returncode == 143, output[-3000:]
    assert 2 <= took < 5
    assert "not stopped within PITH_STOP_GRACE (2 s): quit without committing; lost 3 bundles archived new" in output
    assert not list(store.root.glob("manifests/*.json"))


@pytest.mark.slow
def test_sigterm_after_the_summary_ends_the_cosign_of_a_witness_that_never_answers(
    tmp_path, corpus_dir, corpus_catalog, mirror, hostile_receiver
):
    key_file, origin = tmp_path / "crawl-key.json", "archive.test/pith"
    signer = Signer.generate("crawl-key")
    signer.save(key_file)
    silent = hostile_receiver("silent")
    policy = policy_naming(tmp_path, VerifierKey(origin, NOTE_KEY, signer.public_raw), silent.url)
    options = ["--out", str(tmp_path / "archive"), "--signing-key", str(key_file), "--log-origin", origin]
    args = crawl_args(mirror(), corpus_dir, options, "--witness-policy", str(policy), seeds=SEEDS)
    process, log = start_crawl(tmp_path, args, "crawl")
    wait_for(lambda: silent.requests, process, "the witness asked")
    took = stop_with(process, signal.SIGTERM)
    lines = log.read_text(errors="replace").splitlines()
    assert process.returncode == 143 and took < 3, lines[-20:]
    assert lines[-1] == "terminated (exit 143): stopped before the command finished"
    assert any(line.startswith("ok (exit 0): ") for line in lines)  # the crawl's own summary came first


READING = {  # a command reading an archive whose store never answers, and its options
    "audit": (),
    "checkpoint": (),
    "export": ("--out", "exported"),
    "prove": (f"pith:2026:{SEEDS[0]}",),
    "serve": ("--port", "0"),
}


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
@pytest.mark.parametrize("command", [*READING, "verify", "sync"])
def test_a_command_waiting_on_the_network_ends_on_a_signal(
    tmp_path, corpus_dir, fault_proxy, s3_bucket, hostile_receiver, command, signum
):
    if command in READING:
        held = fault_proxy(FaultRule("stall"))
        trust = ["--s3-endpoint-url", held.url, "--keyring", corpus_dir / KEYRING_NAME, "--trust-archive-keys"]
        args = [command, f"s3://{s3_bucket}/archive", *READING[command], *trust]
        asked = held.stalled.is_set
    else:  # a bundle URL, or a peer archive's checkpoint, whose server never answers
        silent = hostile_receiver("silent")
        if command == "verify":
            args = ["verify", f"{silent.url}/pith/{SEEDS[0]}/bundle.json"]
        else:
            peer_key = tmp_path / "peer-key.json"
            peer_key.write_text(json.dumps(Signer.from_seed("a-peer", bytes(32)).pinned().document()))
            args = ["sync", silent.url, "--out", "copy", "--keyring", peer_key]
        asked = lambda: silent.requests  # noqa: E731
    process = subprocess.Popen(
        [sys.executable, "-m", "pith_archiver", *map(str, args)],
        cwd=tmp_path,
        env={**os.environ, **isolated_home(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(asked, process, "the command's request")
    took = stop_with(process, signum)
    status = ExitStatus(STATUS[signum])
    stderr = process.stderr.read()
    assert process.returncode == status and took < 3, stderr
    assert "Traceback" not in stderr and stderr.strip().splitlines()[-1].startswith(f"{status.name.lower()}")


@pytest.mark.slow
def test_a_second_sigterm_ends_a_server_whose_close_waits_for_a_stuck_read(
    tmp_path, corpus_dir, mirror, fault_proxy, s3_bucket, s3_endpoint
):
    """``serve`` stops on its first signal (exit 0); a read of the store that never ends
    holds that stop, and a second signal ends it (within ``interrupts.UNWIND``)."""
    archive = f"s3://{s3_bucket}/archive"
    run_cli_crawl(
        tmp_path,
        "--s3-endpoint-url",
        s3_endpoint,
        "--no-follow",
        *SEEDS,
        resolver=mirror().url,
        out=archive,
        corpus=corpus_dir,
    ).check()
    proxy = fault_proxy()
    trust = ["--s3-endpoint-url", proxy.url, "--keyring", str(corpus_dir / KEYRING_NAME), "--trust-archive-keys"]
    with serve_process(archive, *trust) as (process, url):
        proxy.set_rules(FaultRule("stall", methods=("GET",), path="/raw/"))
        threading.Thread(target=ask, args=(f"{url}/pith/{SEEDS[0]}/bundle.json",), daemon=True).start()
        assert proxy.stalled.wait(30), "the bundle was never read from the store"
        os.kill(process.pid, signal.SIGTERM)
        time.sleep(1)
        assert process.poll() is None  # its close waits for the stuck read
        took = stop_with(process, signal.SIGTERM)
        assert process.returncode == 143 and took < UNWIND + 3
