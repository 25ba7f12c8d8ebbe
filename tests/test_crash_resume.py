"""SIGKILL ``pith-archiver crawl`` at moments observed from outside, then run the same
command again: no manifest is torn, every record the full crawl archives is there
exactly once, every listed object holds its bytes, and what the killed run left
behind is what the audit reports as orphans: without it, the audit is clean.

The moments: while fetching (the mirror's request log and files under raw/), while a
Parquet file is uploaded, between the data and the manifest (the PUT of the archiver's
key document, the last write before the manifest), and during the manifest PUT itself
(the fault proxy holds those PUTs until the process is dead). A seeded soak kills at
random moments, PITH_CRASH_KILLS times (default 3; PITH_CRASH_SEED picks the moments),
before a last run completes.
"""

import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pith_testkit.faults import FaultPlan
from storage.archive.folder_store import LocalStore
from storage.archive.manifest import committed_manifests
from storage.archive.s3_store import S3Store
from storage.serving.source import KEYRING_NAME
from tests.plugins.cli import isolated_home
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.faults import FaultRule, archiver_keyring, audit_archive

REAL = "RLLQL6357CWNZYHNBMCYD3UK5B"
KILLS = int(os.environ.get("PITH_CRASH_KILLS", "3"))
RUN_ID = re.compile(r"run (\S+) writing to")
INTERIM_COMMITTED = re.compile(r"interim commit \S*manifests/(\S+)\.json")
DEADLINE = 90
COMMIT_SEEDS = 12  # the commit points need a run to commit, not a long one


def crawl_args(server, corpus_dir, out: list[str], *extra: str, seeds=(REAL,)) -> list[str]:
    return [
        "--resolver",
        server.url,
        "--keyring",
        str(corpus_dir / KEYRING_NAME),
        "--no-default-keys",
        *out,
        "-s",
        "AUTOTHROTTLE_ENABLED=false",
        *extra,
        *seeds,
    ]


def start_crawl(tmp_path: Path, args: list[str], name: str):
    """The crawl as a subprocess, its log in a file (a pipe nobody reads would stall it)
    and its temp files in the test's folder (a killed run leaves its table spool behind)."""
    log = tmp_path / f"{name}.log"
    spool = tmp_path / "tmp"
    spool.mkdir(exist_ok=True)
    env = {**os.environ, **isolated_home(tmp_path), "TMPDIR": str(spool)}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "pith_archiver", "crawl", "-v", "--progress", "off", *args],
            env=env,
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return process, log


def wait_for(condition, process, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert process.poll() is None, f"the crawl ended before {what}"
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.01)


def sigkill(process, log: Path) -> str | None:
    """Kill the crawl outright; the run id it was writing (from its log), None when it
    died before opening the archive."""
    process.kill()
    process.wait(30)
    found = RUN_ID.search(log.read_text(errors="replace"))
    return found and found.group(1)


def expected_numbers(catalog, suffixes=None) -> list[str]:
    return sorted(catalog.entry(suffix).pith_number for suffix in suffixes or catalog.suffixes)


def check_killed_run(store, keyring, bundle_keyring, killed: str) -> list[str]:
    """Right after the kill: nothing of the run is committed or torn, and all it wrote
    is reported as orphans (content-addressed raw objects, files named by its run id,
    the tiles and checkpoint of its key's log, named by their place in the log, which
    the next commit replaces or leaves behind, or its key document, which the next
    commit lists)."""
    check = audit_archive(store, keyring, bundle_keyring)
    assert check.codes() <= {"orphan"}, check.discrepancies  # no manifest torn or untrusted
    assert all(manifest["run_id"] != killed for manifest in check.manifests)
    paths = check.paths("orphan")
    assert paths, "the killed run left nothing behind: the kill came too early to prove anything"
    assert all(path.startswith(("raw/", "quarantine/", "log/", "keys/")) or killed in path for path in paths), paths
    return paths


def check_recovered(store, keyring, bundle_keyring, expected: list[str], killed: list[str]) -> dict:
    """After the full run: the audit finds nothing but the killed runs' orphans, every
    record is there once, and removing what it lists as orphans leaves a clean audit."""
    check = audit_archive(store, keyring, bundle_keyring)
    assert check.codes() <= {"orphan"}, check.discrepancies
    assert sorted(check.numbers()) == expected  # every record, none twice
    assert not {manifest["run_id"] for manifest in check.manifests} & set(killed)
    leftovers = check.paths("orphan")
    # a commit killed midway leaves tiles of its key's log the next commit may not write again
    assert all(
        any(run in path for run in killed) or "/.tmp-" in path or path.startswith("log/") for path in leftovers
    ), leftovers
    for path in leftovers:
        store.delete(path)
    after = audit_archive(store, keyring, bundle_keyring)
    assert after.clean, after.discrepancies
    assert sorted(after.numbers()) == expected
    return {"orphans_collected": len(leftovers), "manifests": len(check.manifests)}


@pytest.mark.slow
def test_sigkill_while_fetching_then_resume_with_the_jobdir(
    tmp_path, corpus_dir, corpus_catalog, corpus_keyring, mirror, figures
):
    server = mirror(faults=FaultPlan(latency_ms=60))
    store = LocalStore(tmp_path / "archive")
    args = crawl_args(
        server,
        corpus_dir,
        ["--out", str(store.root)],
        "--jobdir",
        str(tmp_path / "job"),
        "-s",
        "CONCURRENT_REQUESTS_PER_DOMAIN=2",
    )
    process, log = start_crawl(tmp_path, args, "killed")
    fetched = lambda: sum(r.document == "bundle" and r.status == 200 for r in server.requests)  # noqa: E731
    wait_for(lambda: fetched() >= 10 and any((store.root / "raw").rglob("*.json")), process, "bundles archived")
    server.set_faults(FaultPlan(latency_ms=1000))  # hold the crawl running while its twin starts
    twin = run_cli_crawl(tmp_path, *args)  # the same job, started again while the first still runs
    assert process.poll() is None
    assert twin.returncode == 2 and "in use by another crawl" in twin.stderr
    assert "Traceback" not in twin.stderr  # a named refusal, not a crash
    killed = sigkill(process, log)
    assert fetched() < len(corpus_catalog)
    before = check_killed_run(store, archiver_keyring(tmp_path), corpus_keyring, killed)

    server.set_faults(FaultPlan())
    resumed = run_cli_crawl(tmp_path, *args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    found = check_recovered(
        store, archiver_keyring(tmp_path), corpus_keyring, expected_numbers(corpus_catalog), [killed]
    )
    assert resumed.stat("jobdir_reset") == 1  # the killed run's torn queue was dropped, not half-resumed
    figures.add("crash:while_fetching", kills=1, orphans_after_kill=len(before), records_lost=0, **found)


@pytest.mark.slow
def test_sigkill_after_interim_commits_keeps_what_they_committed(
    tmp_path, corpus_dir, corpus_catalog, corpus_keyring, mirror, figures
):
    """A long crawl commits every --commit-every bundles: killed, it loses only the
    segment under way, and the rerun stores none of the committed versions again."""
    server = mirror(faults=FaultPlan(latency_ms=60))
    store = LocalStore(tmp_path / "archive")
    args = crawl_args(
        server, corpus_dir, ["--out", str(store.root)], "--commit-every", "5", "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=2"
    )
    process, log = start_crawl(tmp_path, args, "killed")
    wait_for(lambda: len(list(store.root.glob("manifests/*.json"))) >= 2, process, "two interim commits")
    sigkill(process, log)
    assert list((tmp_path / "tmp").glob("pith-spool-*"))  # the killed run's table spool stays behind
    keyring = archiver_keyring(tmp_path)
    committed = {manifest["run_id"] for manifest in committed_manifests(store, keyring)}
    killed = [run for run in RUN_ID.findall(log.read_text()) if run not in committed]
    check = audit_archive(store, keyring, corpus_keyring)
    assert check.codes() <= {"orphan"}, check.discrepancies  # what the interim commits committed is whole
    kept = check.numbers()
    assert len(kept) == len(set(kept)) >= 10 and len(committed) >= 2

    rerun = run_cli_crawl(tmp_path, *args, env={"TMPDIR": str(tmp_path / "tmp")})
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert rerun.stat("archived") == len(corpus_catalog) - len(kept)
    # what the interim commits committed kept its validators: those bundles are not sent
    # again. The kill may land after a manifest is written but before the crawl kept
    # that interim commit's validators (it logs the interim commit once they are kept): those
    # bundles are fetched again and found archived. So may a version archived as an
    # interim commit began, counted in the next segment (at most the two bundles this
    # crawl has under way, per interim commit).
    acknowledged = set(INTERIM_COMMITTED.findall(log.read_text()))
    assert acknowledged <= committed and acknowledged
    assert rerun.stat("not_modified") + rerun.stat("already_archived") == len(kept)
    assert rerun.stat("not_modified") >= len(check.numbers(acknowledged)) - 2 * len(acknowledged)
    assert rerun.stat("interim_commits") >= 1
    assert not list((tmp_path / "tmp").glob("pith-spool-*"))  # until the next run sweeps it
    found = check_recovered(store, keyring, corpus_keyring, expected_numbers(corpus_catalog), killed)
    figures.add(
        "crash:after_interim_commits", kills=1, records_kept_by_interim_commits=len(kept), records_lost=0, **found
    )


S3_POINTS = {  # the stalled PUT, and what must already be stored when the crawl dies
    "while_writing_parquet": (r"/tables/verifications/.+\.parquet$", r"/tables/records/.+\.parquet$"),
    "between_data_and_manifest": (r"/keys/[^/]+\.json$", r"/tables/verifications/.+\.parquet$"),
    "during_manifest_put": (r"/manifests/[^/]+\.json$", r"/keys/[^/]+\.json$"),
}


@pytest.mark.parametrize("point", sorted(S3_POINTS))
def test_sigkill_during_the_commit_then_rerun(
    point, tmp_path, corpus_dir, corpus_catalog, corpus_keyring, mirror, fault_proxy, s3_bucket, s3_endpoint, figures
):
    stalled, stored_first = S3_POINTS[point]
    proxy = fault_proxy(FaultRule("stall", methods=("PUT",), path=stalled))
    server = mirror()
    seeds = sorted(corpus_catalog.suffixes)[:COMMIT_SEEDS]
    args = crawl_args(
        server,
        corpus_dir,
        ["--out", f"s3://{s3_bucket}/archive", "--s3-endpoint-url", proxy.url],
        "--no-follow",
        seeds=seeds,
    )
    process, log = start_crawl(tmp_path, args, "killed")
    stored = lambda: any(r.status == 200 and re.search(stored_first, r.path) for r in proxy.log)  # noqa: E731
    wait_for(lambda: proxy.stalled.is_set() and stored(), process, f"the {point} moment")
    killed = sigkill(process, log)
    proxy.release()  # the held PUT is dropped unanswered: it never reached the store
    proxy.set_rules()
    store = S3Store(s3_bucket, "archive", endpoint_url=s3_endpoint)
    keyring = archiver_keyring(tmp_path)
    assert [s.path for s in store.list("manifests/")] == []
    before = check_killed_run(store, keyring, corpus_keyring, killed)
    assert any(path.startswith("tables/") for path in before)

    rerun = run_cli_crawl(tmp_path, *args)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert rerun.stat("archived") == len(seeds)  # the killed run committed nothing to skip
    found = check_recovered(store, keyring, corpus_keyring, expected_numbers(corpus_catalog, seeds), [killed])
    assert found["orphans_collected"] > 0  # its table files, named by its run id
    figures.add(f"crash:{point}", kills=1, orphans_after_kill=len(before), records_lost=0, **found)


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing(tmp_path, corpus_dir, corpus_catalog, corpus_keyring, mirror, figures):
    """PITH_CRASH_KILLS crawls killed at seeded random moments (a number of requests
    answered, or the first table file of the commit), each resuming the same job."""
    server = mirror(faults=FaultPlan(latency_ms=15))
    store = LocalStore(tmp_path / "archive")
    args = crawl_args(
        server,
        corpus_dir,
        ["--out", str(store.root)],
        "--jobdir",
        str(tmp_path / "job"),
        "-s",
        "CONCURRENT_REQUESTS_PER_DOMAIN=2",
    )
    rng = random.Random(int(os.environ.get("PITH_CRASH_SEED", "6")))
    killed, moments = [], []
    for attempt in range(KILLS):
        server.clear_log()
        process, log = start_crawl(tmp_path, args, f"killed-{attempt}")
        target = rng.randint(1, 170)  # past the ~130 requests of a whole crawl: kill in the commit
        if target > 130:
            moment = ("commit", lambda: any((store.root / "tables").rglob("*.parquet")))
        else:
            moment = (f"{target} requests", lambda: len(server.requests) >= target)
        wait_for(lambda: moment[1]() or process.poll() is not None, process, moment[0])
        if process.poll() is None:
            killed.append(sigkill(process, log) or "(before the archive opened)")
            moments.append(moment[0])
        check = audit_archive(store, archiver_keyring(tmp_path), corpus_keyring)
        assert check.codes() <= {"orphan"}, check.discrepancies  # whatever committed is whole
        assert len(check.numbers()) == len(set(check.numbers()))
    final = run_cli_crawl(tmp_path, *args)
    assert final.returncode == 0, final.stderr[-3000:]
    found = check_recovered(store, archiver_keyring(tmp_path), corpus_keyring, expected_numbers(corpus_catalog), killed)
    figures.add("crash:random_moments", kills=len(killed), moments=moments, records_lost=0, **found)
