"""What a scheduled job tells the machines watching it: ``--metrics-file`` read back
with prometheus_client's own parser, ``--pushgateway`` and ``--notify`` received by a
listener on loopback. All through the real command line, against the project's mirror."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pith_archiver.reporting.notify import deliver
from pith_archiver.reporting.side_request import BUDGET_SECONDS, BUDGET_VARIABLE, SideRequestBudget
from pith_testkit.faults import FaultPlan
from storage.serving.source import KEYRING_NAME
from tests.plugins.cli import isolated_home, run_cli
from tests.plugins.listener import closed_port_url
from tests.test_unattended import REAL, one_error_line


def metrics(text: str) -> dict:
    """``{sample name: value}`` for unlabelled-by-reason samples, plus ``rejected`` by
    reason, checking every sample carries the command and archive labels."""
    found, rejected = {}, {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            assert {"command", "archive"} <= set(sample.labels), sample
            if "reason" in sample.labels:
                rejected[sample.labels["reason"]] = sample.value
            else:
                found[sample.name.removeprefix("pith_archiver_")] = sample.value
            found["labels"] = (sample.labels["command"], sample.labels["archive"])
    return {**found, "rejected": rejected}


def crawl_args(corpus_dir: Path, server, *args: str) -> list[str]:
    keyring = str(corpus_dir / KEYRING_NAME)
    return ["crawl", "--resolver", server.url, "--keyring", keyring, "--out", "archive", *args]


def archived_in(line: str) -> int:
    return int(line.split("archived ", 1)[1].split(" ", 1)[0])


@pytest.mark.slow
def test_a_crawl_writes_its_metrics_at_each_interim_commit_and_at_the_end_pushes_and_notifies(
    tmp_path, corpus_dir, mirror, listener
):
    server = mirror(faults=FaultPlan(latency_ms=80, paths=r"bundle\.json$"))
    gateway, hook = listener(), listener()
    metrics_file = tmp_path / "textfile" / "pith.prom"
    metrics_file.parent.mkdir()
    command = crawl_args(corpus_dir, server, "-q", "--commit-every", "5", "--metrics-file", str(metrics_file))
    command += ["--pushgateway", gateway.url, "--notify", f"{hook.url}/hooks/pith", REAL]
    process = subprocess.Popen(
        [sys.executable, "-m", "pith_archiver", *command],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **isolated_home(tmp_path)},
    )
    seen = []  # every version of the file a scrape could have read while the crawl ran
    while process.poll() is None:
        if metrics_file.exists():
            seen.append(metrics(metrics_file.read_text()))  # always whole: written aside, renamed in
        time.sleep(0.02)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    archived = archived_in(stdout)
    assert archived > 10

    during = [snapshot for snapshot in seen if snapshot["run_in_progress"] == 1]
    assert during, "no interim commit wrote the metrics file"
    assert 0 < during[0]["records_archived"] < archived
    assert "exit_status" not in during[0]  # no job had finished before this one

    final = metrics(metrics_file.read_text())
    assert final["labels"] == ("crawl", "archive")
    assert final["run_in_progress"] == 0 and final["exit_status"] == 0
    assert final["records_archived"] == archived and final["records_failed"] == 0 and final["rejected"] == {}
    requests = int(stdout.split(" requests", 1)[0].rsplit(" ", 1)[1])
    assert final["requests_total"] == requests
    assert time.time() - 60 < final["last_success_timestamp_seconds"] <= time.time()
    assert 0 < final["run_duration_seconds"] < 120
    assert [p.name for p in metrics_file.parent.iterdir()] == ["pith.prom"]  # no temporary file left

    [push] = gateway.received
    assert push.method == "POST" and push.path == "/metrics/job/pith-archiver/archive/archive/command/crawl"
    assert metrics(push.body.decode())["records_archived"] == archived

    [message] = hook.received
    assert message.method == "POST" and message.path == "/hooks/pith"
    assert message.headers["Content-Type"] == "application/json"
    summary = json.loads(message.body)
    assert summary["command"] == "crawl" and summary["archive"] == "archive"
    assert (summary["exit_status"], summary["status"], summary["succeeded"]) == (0, "ok", True)
    assert summary["meaning"].startswith("done: ")
    assert summary["records"] == {"archived": archived, "unchanged": 0, "rejected": 0, "failed": 0}
    assert summary["requests"] == requests and summary["duration_seconds"] > 0
    assert summary["run_id"] and (tmp_path / summary["manifest"]).is_file()
    assert summary["manifest"].startswith("archive/manifests/")


@pytest.mark.slow
def test_a_failed_job_keeps_the_last_success_and_its_message_is_retried(tmp_path, listener):
    metrics_file = tmp_path / "pith.prom"
    metrics_file.write_text(
        "# TYPE pith_archiver_last_success_timestamp_seconds gauge\n"
        'pith_archiver_last_success_timestamp_seconds{archive="x",command="crawl"} 1.7e+09\n'
    )
    hook = listener(statuses=[503])  # the first attempt fails, the second is delivered
    proc = run_cli(
        "crawl",
        "-q",
        "--resolver",
        closed_port_url(),
        "--out",
        "x",
        "-s",
        "RETRY_TIMES=0",
        "--metrics-file",
        str(metrics_file),
        "--notify",
        hook.url,
        REAL,
        home=tmp_path,
    )
    assert proc.returncode == 4, proc.stderr
    final = metrics(metrics_file.read_text())
    failed = int(proc.stderr.split(" failed,", 1)[0].rsplit(" ", 1)[1])  # as the one summary line says
    assert final["exit_status"] == 4 and final["records_archived"] == 0 and final["records_failed"] == failed >= 1
    assert final["last_success_timestamp_seconds"] == 1.7e09  # kept: this job did not succeed
    assert len(hook.received) == 2 and hook.received[0].body == hook.received[1].body
    summary = json.loads(hook.received[1].body)
    assert (summary["exit_status"], summary["status"], summary["succeeded"]) == (4, "failed", False)
    assert "no bundle could be fetched" in summary["why"] and summary["manifest"] is None
    assert "warning" not in proc.stderr


@pytest.mark.slow
def test_an_unreachable_notify_url_is_one_warning_and_changes_no_exit_status(tmp_path, corpus_dir, mirror):
    url = closed_port_url()
    proc = run_cli(*crawl_args(corpus_dir, mirror(), "-q", "--no-follow", "--notify", url, REAL), home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if not line.startswith("created the archiver signing key")]
    assert len(warnings) == 1 and warnings[0].startswith(f"warning: --notify {url}: the job summary was not delivered")
    assert "after 3 attempts" in warnings[0] and "the exit status is unchanged" in warnings[0]


@pytest.mark.slow
def test_audit_and_export_report_the_same_way(tmp_path, corpus_dir, mirror, listener):
    crawled = run_cli(*crawl_args(corpus_dir, mirror(), "-q", "--no-follow", REAL), home=tmp_path)
    assert crawled.returncode == 0, crawled.stderr
    hook = listener()
    audit = run_cli("audit", "archive", "-q", "--metrics-file", "audit.prom", "--notify", hook.url, home=tmp_path)
    assert audit.returncode == 0, audit.stderr
    found = metrics((tmp_path / "audit.prom").read_text())
    assert found["labels"] == ("audit", "archive") and found["records_archived"] == 1 and found["exit_status"] == 0
    export = run_cli(
        "export", "archive", "--format", "bag", "--out", "bag", "-q", "--metrics-file", "export.prom", home=tmp_path
    )
    assert export.returncode == 0, export.stderr
    exported = metrics((tmp_path / "export.prom").read_text())
    assert exported["labels"] == ("export", "archive") and exported["records_archived"] == 1
    [message] = hook.received
    summary = json.loads(message.body)
    assert summary["command"] == "audit" and summary["exit_status"] == 0 and summary["why"].startswith("clean: ")

    broken = run_cli("audit", "nowhere", "-q", "--metrics-file", "audit.prom", home=tmp_path)  # no such archive
    assert broken.returncode != 0
    after = metrics((tmp_path / "audit.prom").read_text())
    assert after["exit_status"] == broken.returncode
    assert after["last_success_timestamp_seconds"] == found["last_success_timestamp_seconds"]


@pytest.mark.slow
@pytest.mark.parametrize("command", ["crawl", "audit", "export"])
@pytest.mark.parametrize(
    "args, said",
    [
        (["--metrics-file", "/proc/nope/pith.prom"], "--metrics-file /proc/nope/pith.prom: "),
        (["--metrics-file", "."], "--metrics-file .: is a folder"),
        (["--notify", "ftp://example.org/hook"], "--notify 'ftp://example.org/hook' is not an http(s) URL"),
        (["--notify", "http://127.0.0.1:port/x"], "--notify 'http://127.0.0.1:port/x' is not an http(s) URL"),
        (["--pushgateway", "localhost:9091"], "--pushgateway 'localhost:9091' is not an http(s) URL"),
    ],
)
def test_bad_reporting_options_are_one_line_and_exit_2_before_anything(tmp_path, mirror, command, args, said):
    server = mirror()
    where = {
        "crawl": ["--resolver", server.url, "--out", "archive", REAL],
        "audit": ["archive"],
        "export": ["archive", "--format", "bag", "--out", "bag"],
    }[command]
    proc = run_cli(command, *where, *args, home=tmp_path)
    assert proc.returncode == 2, proc.stderr
    line = one_error_line(proc)
    assert line.startswith("Error: ") and said in line, line
    assert server.requests == [] and not (tmp_path / "archive").exists() and not (tmp_path / "config").exists()


# --- side requests end in bounded time, however the receiver behaves (each alone: tests/test_deadlines.py)


@pytest.mark.slow
def test_every_attempt_and_all_of_them_share_the_budget(hostile_receiver, listener, monkeypatch):
    receiver = hostile_receiver("trickle", every=0.2)
    monkeypatch.delenv(BUDGET_VARIABLE, raising=False)
    default = SideRequestBudget()  # the default: each attempt and all together are bounded
    assert (default.seconds, default.attempt_seconds) == (BUDGET_SECONDS, 10.0) and BUDGET_SECONDS < 60
    monkeypatch.setenv(BUDGET_VARIABLE, "3")
    budget = SideRequestBudget()
    assert budget.attempt_seconds == 1.0
    started = time.monotonic()
    why = deliver(receiver.url, b"{}", budget)  # 1 s, a pause of 1 s, 1 s, then no time for a third
    assert why.startswith("no answer within 1.0 s;") and why.endswith("all side requests of a job may take are spent")
    assert receiver.requests == 2 and time.monotonic() - started < 3.5
    late = listener()
    assert deliver(late.url, b"{}", budget) == "not tried; the 3 s all side requests of a job may take are spent"
    assert late.received == []


@pytest.mark.slow
def test_audit_ends_with_its_own_status_whatever_the_receivers_do(tmp_path, corpus_dir, mirror, hostile_receiver):
    crawled = run_cli(*crawl_args(corpus_dir, mirror(), "-q", "--no-follow", REAL), home=tmp_path)
    assert crawled.returncode == 0, crawled.stderr
    gateway, hook = hostile_receiver("trickle"), hostile_receiver("trickle")
    for archive, status in (("archive", 0), ("nowhere", 2)):  # clean; no such archive
        alone = run_cli("audit", archive, "-q", home=tmp_path)
        assert alone.returncode == status, alone.stderr
        started = time.monotonic()
        hooked = run_cli(
            "audit", archive, "-q", "--pushgateway", gateway.url, "--notify", hook.url,
            home=tmp_path, env={BUDGET_VARIABLE: "4"},
        )  # fmt: skip
        assert time.monotonic() - started < 15  # the budget, and the process's own start-up
        assert hooked.returncode == status and hooked.stdout == alone.stdout
        warnings = [line for line in hooked.stderr.splitlines() if line.startswith("warning: ")]
        assert len(warnings) == 2, hooked.stderr
        pushed, notified = warnings
        assert (
            pushed == "warning: --pushgateway: DeadlineExceeded: no answer within 1.3 s; the exit status is unchanged"
        )
        assert notified.startswith(f"warning: --notify {hook.url}: the job summary was not delivered (no answer")
        assert notified.endswith("the 4 s all side requests of a job may take are spent); the exit status is unchanged")
    assert gateway.requests == 2 and hook.requests >= 2
