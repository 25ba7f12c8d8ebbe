"""The project under Scrapyd, as an operator runs it: docs/OPERATIONS.md's recipe
followed literally in fresh virtual environments made by Python 3.11's and 3.12's own
``venv`` (3.11 brings setuptools 65, 3.12 none: not the test environment, whose
packages would hide what a stock one lacks), a real ``scrapyd`` of that environment on
loopback (its own config, folders and port), the checkout deployed with its
``scrapyd-deploy``, a crawl scheduled with ``schedule.json`` and followed with
``listjobs.json``; the archive it leaves is audited like any other, and holds what
``pith-archiver crawl`` archives."""

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from pith_testkit.faults import FaultPlan
from storage.archive.open_store import open_store
from storage.serving.source import KEYRING_NAME
from tests.plugins.cli import isolated_home, run_cli
from tests.plugins.faults import archiver_keyring, audit_archive
from tests.plugins.listener import free_port
from tests.test_unattended import REAL

pytestmark = pytest.mark.slow  # every test here makes a venv, crawls, serves or waits for over a second

ROOT = Path(__file__).parents[1]
PROJECT_FILES = ["scrapy.cfg", "setup.py", "pyproject.toml", "README.md"]
PACKAGES = ["pith", "pith_archiver", "crawler", "pipelines", "storage"]
# how each Python makes a venv here; CI's machine has pyenv's 3.12.1 (.ci/run checks)
MAKE_VENV = {
    "3.11": (["python3", "-m", "venv"], {}),
    "3.12": (["python3.12", "-m", "venv"], {"PYENV_VERSION": "3.12.1"}),
}
# the test environment's own, which a stock environment would not have
NOT_INHERITED = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYENV_VERSION")


def stock_environ(**extra: str) -> dict:
    return {**{k: v for k, v in os.environ.items() if k not in NOT_INHERITED}, **extra}


@pytest.fixture(scope="module")
def stock_env(tmp_path_factory):
    """``stock_env(python)`` -> the bin folder of a fresh venv of that Python with the
    checkout installed as docs/OPERATIONS.md says (``pip install './pith-archiver[scrapyd]'``);
    one per Python for the module, every Python's built at once on the first call (each
    install is mostly one core's work: together they take the time of one)."""
    building: dict[str, Future] = {}

    def build(python: str, root: Path) -> Path:
        checkout_copy(root / "pith-archiver")
        command, env = MAKE_VENV[python]
        step = subprocess.run(
            [*command, "venv"], cwd=root, env=stock_environ(**env), capture_output=True, text=True, timeout=300
        )
        assert step.returncode == 0, step.stderr
        bin = root / "venv" / "bin"
        version = subprocess.run([bin / "python", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=60)  # fmt: skip
        assert version.stdout.strip() == python
        step = subprocess.run(
            [bin / "pip", "install", "-q", "./pith-archiver[scrapyd]"],
            cwd=root, env=stock_environ(), capture_output=True, text=True, timeout=1200,
        )  # fmt: skip
        assert step.returncode == 0, step.stderr[-3000:]
        return bin

    def make(python: str) -> Path:
        if not building:
            pool = ThreadPoolExecutor(len(MAKE_VENV))
            roots = {version: tmp_path_factory.mktemp(f"stock-{version}") for version in MAKE_VENV}
            building.update({version: pool.submit(build, version, roots[version]) for version in MAKE_VENV})
            pool.shutdown(wait=False)
        return building[python].result()

    return make


def api(url: str, endpoint: str, data: list[tuple] | None = None) -> dict:
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    with urllib.request.urlopen(f"{url}{endpoint}", data=body, timeout=30) as response:
        return json.loads(response.read())


@pytest.fixture
def scrapyd(tmp_path):
    """``scrapyd(bin)`` -> ``(url, home)``: that environment's Scrapyd on a loopback port
    (Scrapyd runs each crawl with its own Python, whose environment has pith-archiver)."""
    started = []

    def start(bin: Path) -> tuple[str, Path]:
        home = tmp_path / f"scrapyd-{len(started)}"
        home.mkdir()
        port = free_port()
        (home / "scrapyd.conf").write_text(
            "[scrapyd]\n"
            f"eggs_dir = {home / 'eggs'}\nlogs_dir = {home / 'logs'}\ndbs_dir = {home / 'dbs'}\n"
            f"items_dir =\njobs_dir = {home / 'jobs'}\n"
            f"bind_address = 127.0.0.1\nhttp_port = {port}\npoll_interval = 0.2\nmax_proc = 2\n"
        )
        log = (home / "scrapyd.log").open("w")
        process = subprocess.Popen(
            [bin / "scrapyd"], cwd=home, env=stock_environ(**isolated_home(home)), stdout=log, stderr=subprocess.STDOUT
        )
        started.append((process, log))
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 60
        while True:
            try:
                assert api(url, "daemonstatus.json")["status"] == "ok"
                return url, home
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"scrapyd did not start: {(home / 'scrapyd.log').read_text()}") from None
                time.sleep(0.2)

    yield start
    for process, log in started:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def checkout_copy(project: Path) -> Path:
    """The files scrapyd-deploy packs, copied: it writes build/ and *.egg-info where it runs."""
    project.mkdir()
    for name in PROJECT_FILES:
        shutil.copy2(ROOT / name, project / name)
    for name in PACKAGES:
        shutil.copytree(ROOT / name, project / name, ignore=shutil.ignore_patterns("__pycache__"))
    return project


def deploy(
    bin: Path, project: Path, *args: str, env: dict | None = None, unset: str = ""
) -> subprocess.CompletedProcess:
    """That environment's ``scrapyd-deploy ARGS``, run in the checkout."""
    environment = {name: value for name, value in stock_environ().items() if name != unset}
    return subprocess.run(
        [bin / "scrapyd-deploy", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env={**environment, **(env or {})},
    )


def wait_finished(url: str, job: str, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = api(url, "listjobs.json?project=pith_archiver")
        done = [entry for entry in jobs["finished"] if entry["id"] == job]
        if done:
            return done[0]
        time.sleep(0.5)
    raise AssertionError(f"job {job} did not finish: {jobs}")


@pytest.mark.parametrize("python", sorted(MAKE_VENV))
def test_the_documented_deploy_and_schedule_run_the_same_crawl(
    tmp_path, python, stock_env, scrapyd, corpus_dir, corpus_catalog, corpus_keyring, mirror
):
    bin = stock_env(python)
    url, home = scrapyd(bin)
    tampered = sorted(corpus_catalog.suffixes)[3]
    server = mirror(faults=FaultPlan(tamper={tampered}))
    keyring = str(corpus_dir / KEYRING_NAME)

    deployed = deploy(bin, checkout_copy(tmp_path / "pith-archiver"), env={"SCRAPYD_URL": url})
    assert deployed.returncode == 0, deployed.stderr
    answer = json.loads(deployed.stdout)
    assert answer["status"] == "ok" and answer["project"] == "pith_archiver" and answer["spiders"] == 1
    assert api(url, "listspiders.json?project=pith_archiver")["spiders"] == ["pith"]

    archive = tmp_path / "scrapyd-archive"
    scheduled = api(
        url,
        "schedule.json",
        [
            ("project", "pith_archiver"),
            ("spider", "pith"),
            ("seeds", REAL),
            ("resolver", server.url),
            ("setting", f"PITH_ARCHIVE={archive}"),
            ("setting", f"PITH_KEYRINGS={keyring}"),
            ("setting", "PITH_COMMIT_EVERY=10"),
        ],
    )
    assert scheduled["status"] == "ok", scheduled
    job = wait_finished(url, scheduled["jobid"])
    log = (home / "logs" / "pith_archiver" / "pith" / f"{job['id']}.log").read_text()
    assert "'pith/archived'" in log and "Traceback" not in log and " ERROR: " not in log
    assert f"'Python': '{python}." in log  # Scrapy's versions: the crawl ran in that environment's Python

    # the same verification, archive, interim commits and keys as pith-archiver crawl
    keys = archiver_keyring(home)  # the archiver key the job made in Scrapyd's environment
    check = audit_archive(open_store(str(archive)), keys, corpus_keyring)
    assert check.clean, check.discrepancies
    assert len(check.manifests) >= 2  # interim commits (every 10 bundles, as fast as commits go), then the final commit
    assert list((archive / "quarantine").rglob("*.json"))  # the tampered bundle, rejected by verification
    wanted = {corpus_catalog.entry(suffix).pith_number for suffix in corpus_catalog.suffixes if suffix != tampered}
    assert sorted(check.numbers()) == sorted(wanted)  # every record archived, but the one that does not verify

    crawled = run_cli(
        "crawl", "-q", "--resolver", server.url, "--keyring", keyring, "--out", "cli", REAL, home=tmp_path
    )
    assert crawled.returncode == 1, crawled.stderr  # the one rejection
    cli_check = audit_archive(open_store(str(tmp_path / "cli")), archiver_keyring(tmp_path), corpus_keyring)
    assert sorted(check.numbers()) == sorted(cli_check.numbers())


def test_a_keyring_that_cannot_be_read_stops_a_scheduled_crawl_before_it_fetches(tmp_path, stock_env, scrapyd, mirror):
    bin = stock_env("3.11")
    url, home = scrapyd(bin)
    server = mirror()
    assert deploy(bin, checkout_copy(tmp_path / "pith-archiver"), env={"SCRAPYD_URL": url}).returncode == 0
    (tmp_path / "bad.json").write_text("not json")
    archive = tmp_path / "archive"
    settings = [("setting", f"PITH_ARCHIVE={archive}"), ("setting", f"PITH_KEYRINGS={tmp_path / 'bad.json'}")]
    scheduled = api(
        url,
        "schedule.json",
        [("project", "pith_archiver"), ("spider", "pith"), ("seeds", REAL), ("resolver", server.url), *settings],
    )
    job = wait_finished(url, scheduled["jobid"])
    log = (home / "logs" / "pith_archiver" / "pith" / f"{job['id']}.log").read_text()
    assert "KeyringError" in log
    assert server.requests == [] and not (archive / "manifests").exists()


def test_a_malformed_scrapyd_url_fails_the_deploy_and_deploys_nothing(tmp_path, stock_env, scrapyd):
    """scrapyd-deploy's own behaviour (docs/OPERATIONS.md): it packs the egg, then says
    ``Deploy failed`` and exits 1; the Scrapyd holds no project."""
    bin = stock_env("3.11")
    url, _ = scrapyd(bin)
    project = checkout_copy(tmp_path / "pith-archiver")
    for bad in ("localhost:6800", "$SCRAPYD_URL"):  # no scheme; unset (scrapyd-client leaves it as written)
        failed = (
            deploy(bin, project, env={"SCRAPYD_URL": bad})
            if bad[0] != "$"
            else deploy(bin, project, unset="SCRAPYD_URL")
        )
        assert failed.returncode == 1 and "Deploy failed" in failed.stderr, failed.stderr
    assert api(url, "listprojects.json")["projects"] == []


def test_the_egg_reads_its_package_data_from_inside_the_zip(tmp_path, stock_env):
    """Scrapyd runs the project from a zipped egg: the shipped bundles and the frontier's
    Lua scripts are read through importlib.resources, from the egg itself."""
    egg = tmp_path / "pith_archiver.egg"
    built = deploy(stock_env("3.11"), checkout_copy(tmp_path / "pith-archiver"), "--build-egg", str(egg))
    assert built.returncode == 0, built.stderr
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import pith.shipped, crawler.frontier.client as frontier\n"
        "from pith.keyring import Keyring\n"
        "from pith.verify import verify_bundle\n"
        "assert pith.shipped.__file__.startswith(sys.argv[1]), pith.shipped.__file__\n"
        "bundles = pith.shipped.real_bundles()\n"
        "print(len(bundles), all(verify_bundle(b.read_bytes(), Keyring.default()).ok for b in bundles))\n"
        "print('redis.call' in (frontier._LUA / 'pop.lua').read_text('utf-8'))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe, str(egg)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["3", "True", "True"]
