"""Every command the crawl prints runs as printed, in the shell it was printed for: the
next steps after the embedded default (into a folder, and into S3 with an endpoint),
and the resume command after Ctrl-C. Each printed line is handed to ``bash -c`` as it
stands, with the virtual environment's ``pith-archiver`` and ``python`` first on PATH,
as they are for whoever installed the package."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pith.keyring import REGISTRY_KEY
from pith_archiver.crawl.demo import demo_port
from pith_testkit.faults import FaultPlan
from storage.archive.folder_store import LocalStore
from tests.plugins.cli import isolated_home, run_cli
from tests.plugins.faults import archiver_keyring, audit_archive
from tests.test_crash_resume import crawl_args, expected_numbers, start_crawl, wait_for

INSTALLED = str(Path(sys.executable).parent)  # where pip put pith-archiver, beside this python
RESUME = re.compile(r"; resume with: (.+)$", re.MULTILINE)


def shell(home: Path) -> dict:
    """The environment of a user's shell on the machine that crawled."""
    return {**os.environ, **isolated_home(home), "PATH": f"{INSTALLED}{os.pathsep}{os.environ['PATH']}"}


def run_as_printed(line: str, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", line], cwd=home, env=shell(home), capture_output=True, text=True, timeout=180, check=False
    )


def printed_steps(stdout: str) -> list[str]:
    """The command lines of the next steps: indented under 'Audit it:' and what follows."""
    after = stdout[stdout.index("\nAudit it:\n") :]
    return [line.strip() for line in after.splitlines() if line.startswith("  ")]


def check_steps(stdout: str, home: Path) -> list[str]:
    """Run every printed step; each must exit 0. Their outputs, in order."""
    steps = printed_steps(stdout)
    assert [step.split()[0] for step in steps] == ["pith-archiver", "python", "python"], steps
    outputs = []
    for step in steps:
        ran = run_as_printed(step, home)
        assert ran.returncode == 0, f"{step}\n{ran.stdout[-2000:]}{ran.stderr[-3000:]}"
        outputs.append(ran.stdout)
    return outputs


def test_the_printed_commands_run_the_installed_tools():
    assert shutil.which("pith-archiver", path=INSTALLED) and shutil.which("python", path=INSTALLED)


@pytest.mark.slow
def test_the_next_steps_of_the_demo_into_a_folder_run_as_printed(tmp_path):
    """A folder name and a keyring path a shell must quote; the keyring pinned instead
    of the built-in key, so an audit without it would reject every bundle."""
    keys = tmp_path / "my keys"
    keys.mkdir()
    (keys / "registry.json").write_text(json.dumps({"keys": [REGISTRY_KEY]}))
    given = ["--out", "the demo's archive", "--keyring", "my keys/registry.json", "--no-default-keys"]
    demo = run_cli("crawl", *given, home=tmp_path, timeout=300).check()
    assert "--keyring 'my keys/registry.json' --no-default-keys" in demo.stdout
    audit, duckdb, pyarrow = check_steps(demo.stdout, tmp_path)
    assert audit.splitlines()[-1].startswith("clean: ") and ", 3 bundles," in audit
    assert re.search(r"│\s+2019 │\s+2 │", duckdb), duckdb  # the shipped records by year
    assert pyarrow.strip() == "3"


@pytest.mark.slow
def test_the_demo_run_again_asks_only_what_changed(tmp_path):
    """The embedded mirror listens on the archive's own port, so a second run is a re-run
    of the same resolver: every bundle answers 304, none is fetched whole. With that
    port taken the demo still runs, on another."""
    first = run_cli("crawl", home=tmp_path, timeout=300).check()
    port = demo_port(str(tmp_path / "archive"))
    assert f"embedded mirror: http://127.0.0.1:{port} " in first.stdout
    assert "bundles fetched 3, verified 3, not modified (304) 0" in first.stdout
    second = run_cli("crawl", home=tmp_path, timeout=300).check()
    assert "bundles fetched 0, verified 0, not modified (304) 3" in second.stdout
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        third = run_cli("crawl", home=tmp_path, timeout=300).check()
    assert f"127.0.0.1:{port} " not in third.stdout and "records found 3: archived 0 new, 3 unchanged" in third.stdout


@pytest.mark.slow
def test_the_next_steps_of_the_demo_into_s3_run_as_printed(tmp_path, s3_endpoint, s3_env, s3_bucket):
    """The endpoint goes into every line; the credentials come from the AWS variables."""
    archive = f"s3://{s3_bucket}/demo"
    demo = run_cli("crawl", "--out", archive, "--s3-endpoint-url", s3_endpoint, home=tmp_path, timeout=300).check()
    steps = printed_steps(demo.stdout)
    assert steps[0] == f"pith-archiver audit {archive} --s3-endpoint-url {s3_endpoint}"
    assert all(s3_endpoint.removeprefix("http://") in step for step in steps)
    audit, duckdb, pyarrow = check_steps(demo.stdout, tmp_path)
    assert audit.splitlines()[-1].startswith("clean: ")
    assert re.search(r"│\s+2019 │\s+2 │", duckdb), duckdb
    assert pyarrow.strip() == "3"


@pytest.mark.slow
@pytest.mark.parametrize("jobdir", [True, False], ids=["with-jobdir", "without"])
def test_the_resume_command_after_ctrl_c_runs_as_printed(
    tmp_path, corpus_dir, corpus_catalog, corpus_keyring, mirror, jobdir
):
    """Ctrl-C once (the graceful stop) part-way through; the command printed resumes: the
    rest is archived, and no bundle is fetched twice: with the job folder the queue goes
    on, without one the records archived come back unchanged (304) and only the rest
    is fetched."""
    server = mirror(faults=FaultPlan(latency_ms=300))
    store = LocalStore(tmp_path / "archive")
    extra = ["--jobdir", "the job"] if jobdir else []
    args = crawl_args(server, corpus_dir, ["--out", "archive", "--stats-json", "stats.json"], *extra)
    process, log = start_crawl(tmp_path, args, "stopped")
    wait_for(lambda: len(list(store.root.glob("raw/bundles/**/*.json"))) >= 5, process, "bundles archived")
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=90) == 130, log.read_text(errors="replace")[-3000:]
    stopped = json.loads((tmp_path / "stats.json").read_text())
    printed = RESUME.findall(log.read_text(errors="replace"))
    assert len(printed) == 1 and "DIR" not in printed[0]
    assert printed[0] == "pith-archiver crawl -v --progress off " + " ".join(
        f"'{arg}'" if " " in arg else arg for arg in args
    )

    resumed = run_as_printed(printed[0], tmp_path)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    after = json.loads((tmp_path / "stats.json").read_text())
    check = audit_archive(store, archiver_keyring(tmp_path), corpus_keyring)
    assert check.clean, check.discrepancies
    assert sorted(check.numbers()) == expected_numbers(corpus_catalog)  # every record, once
    served = [r.record for r in server.requests if r.document == "bundle" and r.status == 200]
    assert sorted(served) == sorted(set(served)) and len(served) == len(corpus_catalog.suffixes)
    assert stopped["pith/archived"] + after.get("pith/archived", 0) == len(corpus_catalog.suffixes)
    if not jobdir:  # what the first run archived was asked for again, and came back unchanged
        assert after["pith/not_modified"] == stopped["pith/archived"]
