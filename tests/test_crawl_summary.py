"""What a crawl's summary tells its user: every record found accounted for, in the full
and the quiet form alike; a source that could not be reached named with its host and
the cause in the last line; the embedded default honouring --stats-json and --log-file
as any crawl does. Through the real command line, against real sockets; the counts'
wording from the summary's own function, over a crawl's stats."""

import json
import os
import re
import subprocess
import sys

import pytest

from crawler.stat_keys import Stat
from pith_archiver.crawl.report import report
from pith_archiver.exit_status import ExitStatus
from pith_archiver.output import QUIET
from storage.archive.s3_store import S3Store
from storage.archive.stores import StorageError
from tests.plugins.cli import isolated_home, run_cli
from tests.plugins.crawling import run_cli_crawl

REAL = "RLLQL6357CWNZYHNBMCYD3UK5B"
ACCOUNTED = re.compile(r"archived (\d+) new, (\d+) unchanged, (\d+) rejected, (\d+) failed")


def last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.strip()][-1]


@pytest.mark.slow
def test_the_demo_honours_stats_json_and_log_file_and_its_second_run_accounts_for_every_record(tmp_path):
    first = run_cli("crawl", "--stats-json", "stats.json", "--log-file", "logs/demo.log", home=tmp_path).check()
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["pith/records_found"] == 3 and stats["pith/archived"] == 3
    assert "Dumping Scrapy stats" in (tmp_path / "logs" / "demo.log").read_text()
    assert "log: logs/demo.log" in first.stdout

    again = run_cli("crawl", home=tmp_path).check()
    found = re.search(r"records found (\d+): " + ACCOUNTED.pattern, again.stdout)
    assert found, again.stdout
    total, *parts = map(int, found.groups())
    assert total == sum(parts) == 3 and parts == [0, 3, 0, 0]  # all three unchanged, none archived anew

    quiet = run_cli("crawl", "-q", home=tmp_path).check()
    counted = ACCOUNTED.search(quiet.stdout)
    assert counted and [int(n) for n in counted.groups()] == [0, 3, 0, 0], quiet.stdout
    assert ", of 3 found; " in quiet.stdout and len(quiet.stdout.splitlines()) == 1


@pytest.mark.slow
@pytest.mark.parametrize("quiet", [False, True], ids=["full", "quiet"])
def test_a_resolver_refusing_connections_is_named_with_the_cause_in_the_last_line(tmp_path, refused_port, quiet):
    resolver = f"127.0.0.1:{refused_port}"
    args = ["-q"] * quiet + ["--resolver", f"http://{resolver}", "--out", "x", "-s", "RETRY_TIMES=0", REAL]
    proc = run_cli("crawl", *args, home=tmp_path)
    assert proc.returncode == 4, proc.stderr
    assert f"{resolver} (connection refused)" in last_line(proc.stderr), proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_resolver_whose_name_does_not_resolve_is_named_with_the_cause(tmp_path):
    proc = run_cli(
        "crawl", "--resolver", "http://nonexistent.invalid/", "--out", "x", "-s", "RETRY_TIMES=0", REAL, home=tmp_path
    )
    assert proc.returncode == 4, proc.stderr
    assert last_line(proc.stderr) == (
        "failed (exit 4): no bundle could be fetched, nothing committed: "
        "could not reach nonexistent.invalid (name does not resolve)"
    )


@pytest.mark.slow
def test_a_mirror_refusing_connections_is_named_with_the_cause_among_the_sources(
    tmp_path, corpus_dir, corpus_catalog, mirror, refused_port
):
    seeds = sorted(corpus_catalog.suffixes)[:6]
    down = f"127.0.0.1:{refused_port}"
    proc = run_cli_crawl(
        tmp_path,
        "--no-follow",
        "--mirror",
        f"http://{down}",
        "-s",
        "RETRY_TIMES=0",
        *seeds,
        resolver=mirror().url,
        out="archive",
        corpus=corpus_dir,
        logged=False,
    )
    assert proc.returncode == 0, proc.stderr
    sources = next(line for line in proc.stdout.splitlines() if line.startswith("sources: "))
    assert re.search(rf"{re.escape(down)} \d+ requests?, 0 records \([^)]*last error: connection refused", sources), (
        sources
    )


@pytest.mark.parametrize(
    "endpoint, cause", [("refused", "connection refused"), ("nonexistent.invalid", "name does not resolve")]
)
def test_a_store_that_cannot_be_reached_is_named_with_the_cause(s3_env, refused_port, endpoint, cause):
    host = f"127.0.0.1:{refused_port}" if endpoint == "refused" else endpoint
    store = S3Store("bucket", "archive", endpoint_url=f"http://{host}", max_attempts=1)
    with pytest.raises(StorageError) as raised:
        store.probe()
    assert host in str(raised.value) and cause in str(raised.value)
    with pytest.raises(StorageError) as listing:
        list(store.list("manifests/"))
    assert host in str(listing.value) and cause in str(listing.value)


@pytest.mark.parametrize("interim, wording", [(1, "1 interim commit, the last"), (3, "3 interim commits, the last")])
def test_a_failed_final_commit_names_the_interim_commits_that_hold_and_the_last_one(interim, wording, capsys):
    stats = {
        Stat.RECORDS_FOUND: 4,
        Stat.BUNDLES_FETCHED: 4,
        Stat.INTERIM_COMMITS: interim,
        Stat.MANIFEST: "manifests/run-2.json",
        Stat.COMMIT_ERROR: "the disk under the spool is full",
    }
    status = report(stats, "archive", (0.0, False))
    printed = capsys.readouterr()
    assert f"{wording} archive/manifests/run-2.json" in printed.out
    assert "the final commit failed: the disk under the spool is full" in printed.err
    assert int(status) != 0


@pytest.mark.parametrize("distrusted", [False, True])
def test_a_rerun_counts_every_held_record_once_in_the_full_and_quiet_summaries(distrusted, capsys):
    """Held records not asked + asked = held, each asked record under one reason, in
    both forms; dates in the future are named."""
    asked = {Stat.ASKED_DATED: 20, Stat.RECHECK_SAMPLE: 39, Stat.RECHECK_DUE: 2, Stat.ASKED_SWEPT: 0}
    if distrusted:
        asked = {Stat.ASKED_DATED: 20, Stat.RECHECK_SAMPLE: 39, Stat.RECHECK_DUE: 2, Stat.ASKED_SWEPT: 1939}
    stats = {
        Stat.RECORDS_FOUND: 2000 - (0 if distrusted else 1939),
        Stat.BUNDLES_FETCHED: 20,
        Stat.NOT_MODIFIED: 41,
        Stat.MANIFEST: "manifests/run.json",
        Stat.RECORDS_HELD: 2000,
        Stat.SKIPPED_BY_DATE: 0 if distrusted else 1939,
        Stat.FUTURE_DATES: 3,
        Stat.LASTMOD_DISTRUSTED: int(distrusted),
        Stat.LASTMOD_LIES: 4 if distrusted else 0,
        **asked,
    }
    report(stats, "archive", (1.0, True))
    full = capsys.readouterr().out
    counts = "1939 not asked and 61 asked" if not distrusted else "0 not asked and 2000 asked"
    reasons = f"20 dated changed, 39 sampled, 2 due by --recheck-after, {1939 if distrusted else 0} swept"
    assert f"of 2000 held records, {counts} ({reasons})" in full
    assert ("dates not trusted: " in full) == distrusted and ("4 changed records as unchanged" in full) == distrusted
    assert "dates in the future: 3 dates the resolver gave were later than this machine's clock plus a day" in full
    report(stats, "archive", (1.0, True), verbosity=QUIET)
    quiet = capsys.readouterr().out
    trust = "dates not trusted" if distrusted else "dates trusted"
    assert f"; {trust}: {0 if distrusted else 1939} of 2000 held not asked, {reasons}" in quiet
    assert "3 dates in the future counted as none" in quiet


def test_a_crawl_whose_output_is_closed_archives_and_ends_with_the_status_of_its_work(tmp_path):
    """Its summary is a report on work done whether or not anyone reads it: with stdout's
    reader gone before the first line, the crawl still archives and commits, and exits 0,
    not 141 (verify, whose output is its work, stops there)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {**os.environ, **isolated_home(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-m", "pith_archiver", "crawl"],
        cwd=tmp_path, env=env, stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120,
    )  # fmt: skip
    os.close(write_end)
    assert result.returncode == ExitStatus.OK, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr
    assert list((tmp_path / "archive" / "manifests").glob("*.json"))  # committed
    again = run_cli("crawl", home=tmp_path).check()
    assert "archived 0 new, 3 unchanged" in again.stdout
