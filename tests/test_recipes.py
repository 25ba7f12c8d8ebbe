"""The scheduling recipes of docs/OPERATIONS.md are files (docs/examples/): the systemd
units are parsed (and checked by ``systemd-analyze verify`` where it exists), and the
command lines of the service and of the crontab are run as written, against the
project's mirror, with the documented environment variables pointing at it."""

import configparser
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pith_archiver.reporting.job_summary import DONE
from storage.serving.source import KEYRING_NAME
from tests.plugins.cli import isolated_home
from tests.plugins.listener import closed_port_url

DOCS = Path(__file__).parents[1] / "docs"
EXAMPLES = DOCS / "examples"
BIN = Path(sys.executable).parent
INSTALLED = "/usr/local/bin/pith-archiver"  # where the recipes expect the command


def unit(name: str) -> configparser.ConfigParser:
    """A unit file read strictly: a repeated section or key is an error."""
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # systemd's keys are case-sensitive
    parser.read_string((EXAMPLES / name).read_text(), source=name)
    return parser


def env_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))
    return {name: value for name, value in pairs}


def test_the_units_keep_the_exit_contract_and_report_every_run():
    service, timer = unit("pith-archiver.service"), unit("pith-archiver.timer")
    assert service["Service"]["Type"] == "oneshot"
    assert {int(code) for code in service["Service"]["SuccessExitStatus"].split()} == {int(s) for s in DONE} - {0}
    command = shlex.split(service["Service"]["ExecStart"])
    assert command[:3] == [INSTALLED, "crawl", "-q"]
    assert {"--metrics-file", "--notify", "--out", "--keyring"} <= set(command)
    assert service["Service"]["EnvironmentFile"] == "/etc/pith-archiver/pith-archiver.env"
    used = set(re.findall(r"\$\{(\w+)\}", service["Service"]["ExecStart"]))
    assert used == set(env_file(EXAMPLES / "pith-archiver.env"))  # every variable documented, none unused
    assert timer["Timer"]["Persistent"] == "true" and timer["Timer"]["OnCalendar"]
    assert timer["Install"]["WantedBy"] == "timers.target"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verifies_the_units(tmp_path):
    for name in ("pith-archiver.service", "pith-archiver.timer"):
        text = (EXAMPLES / name).read_text().replace(INSTALLED, str(BIN / "pith-archiver"))
        (tmp_path / name).write_text(text)
    proc = subprocess.run(
        ["systemd-analyze", "verify", str(tmp_path / "pith-archiver.service"), str(tmp_path / "pith-archiver.timer")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


@pytest.fixture
def local_values(tmp_path, corpus_dir, mirror, listener):
    """The documented variables, pointed at a mirror, a folder and a listener here."""
    hook = listener()
    (tmp_path / "textfile").mkdir()
    values = {
        "PITH_RESOLVER": mirror().url,
        "PITH_KEYRING": str(corpus_dir / KEYRING_NAME),
        "PITH_ARCHIVE": str(tmp_path / "archive"),
        "PITH_METRICS_FILE": str(tmp_path / "textfile" / "pith-archiver.prom"),
        "PITH_NOTIFY_URL": hook.url,
    }
    return values, hook


def exit_status_in(path: str) -> float:
    families = text_string_to_metric_families(Path(path).read_text())
    return next(s.value for f in families for s in f.samples if s.name == "pith_archiver_exit_status")


@pytest.mark.slow
def test_the_service_command_runs_as_written(tmp_path, local_values):
    values, hook = local_values
    service = unit("pith-archiver.service")["Service"]
    assert set(values) == set(env_file(EXAMPLES / "pith-archiver.env"))
    # systemd replaces ${NAME} inside a word, one word each
    command = [re.sub(r"\$\{(\w+)\}", lambda m: values[m[1]], word) for word in shlex.split(service["ExecStart"])]
    command[0] = str(BIN / "pith-archiver")
    proc = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, **isolated_home(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok (exit 0): archived ") and len(proc.stdout.splitlines()) == 1
    assert exit_status_in(values["PITH_METRICS_FILE"]) == 0
    assert len(hook.received) == 1 and b'"exit_status": 0' in hook.received[0].body
    assert (tmp_path / "archive" / "manifests").is_dir()


def crontab() -> tuple[dict, str]:
    """The crontab's variables and its one job's command."""
    variables, jobs = {}, []
    for line in (EXAMPLES / "crontab").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if re.match(r"^\w+=", line):
            name, value = line.split("=", 1)
            variables[name] = value
        else:
            fields = line.split(None, 5)
            assert len(fields) == 6 and all(re.fullmatch(r"[\d*/,-]+", f) for f in fields[:5]), line
            jobs.append(fields[5])
    [job] = jobs
    return variables, job


@pytest.mark.slow
def test_the_crontab_line_runs_as_written_and_cron_mails_only_trouble(tmp_path, local_values):
    variables, job = crontab()
    values, hook = local_values
    assert set(variables) - {"PATH"} == set(values)
    assert job.startswith("pith-archiver crawl -q ") and job.endswith(">/dev/null")
    env = {**os.environ, **isolated_home(tmp_path), **variables, **values, "PATH": f"{BIN}:{variables['PATH']}"}

    def cron(**changed):
        return subprocess.run(
            ["/bin/sh", "-c", job], capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**env, **changed}
        )

    ok = cron()
    assert ok.returncode == 0, ok.stderr
    mailed = [line for line in ok.stderr.splitlines() if not line.startswith("created the archiver signing key")]
    assert ok.stdout == "" and mailed == []  # nothing for cron to mail
    failed = cron(PITH_RESOLVER=closed_port_url())
    assert failed.returncode == 4 and failed.stdout == ""
    [line] = failed.stderr.splitlines()  # the one line cron mails
    assert line.startswith("failed (exit 4): ")
    assert exit_status_in(values["PITH_METRICS_FILE"]) == 4
    assert [b'"exit_status": 4' in message.body for message in hook.received] == [False, True]


def administrator_audit() -> str:
    """The script of OPERATIONS.md's audit as the service would run it (``sudo sh -c '...'``)."""
    [script] = re.findall(r"^    sudo sh -c '(set -a; [^']+)'$", (DOCS / "OPERATIONS.md").read_text(), re.MULTILINE)
    return script


def edited(shipped: str, values: dict[str, str]) -> str:
    """The shipped env file as an administrator edits it: each variable named in
    ``values`` set (a commented-out one uncommented), the rest left as shipped."""
    lines = []
    for line in shipped.splitlines():
        name = line.lstrip("#").split("=", 1)[0]
        lines.append(f"{name}={values[name]}" if "=" in line and name in values else line)
    return "\n".join(lines) + "\n"


@pytest.mark.slow
def test_the_service_runs_into_s3_from_the_shipped_env_file_and_the_administrator_audits_it(
    tmp_path, corpus_dir, mirror, s3_endpoint, s3_env, s3_bucket
):
    """As OPERATIONS.md says: the env file installed mode 600 and edited (an S3 archive,
    the store's endpoint and credentials uncommented, no notifications: PITH_NOTIFY_URL
    empty), the unit's command line run with it as systemd runs it (its own
    XDG_CONFIG_HOME), then the administrator's audit command."""
    operations = (DOCS / "OPERATIONS.md").read_text()
    assert "install -m 600 docs/examples/pith-archiver.env /etc/pith-archiver/" in operations
    (tmp_path / "textfile").mkdir()
    values = {
        "PITH_RESOLVER": mirror().url,
        "PITH_KEYRING": str(corpus_dir / KEYRING_NAME),
        "PITH_ARCHIVE": f"s3://{s3_bucket}/pith",
        "PITH_METRICS_FILE": str(tmp_path / "textfile" / "pith-archiver.prom"),
        "PITH_NOTIFY_URL": "",
        "AWS_ENDPOINT_URL_S3": s3_endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "pith-test",
        "AWS_SECRET_ACCESS_KEY": "pith-test-secret",
    }
    installed = tmp_path / "etc" / "pith-archiver.env"
    installed.parent.mkdir()
    shutil.copyfile(EXAMPLES / "pith-archiver.env", installed)
    installed.chmod(0o600)
    installed.write_text(edited(installed.read_text(), values))
    assert set(env_file(installed)) == set(values)  # every variable the admin sets was in the shipped file
    service = unit("pith-archiver.service")["Service"]
    unit_env = dict(pair.split("=", 1) for pair in service["Environment"].split())
    state = {name: str(tmp_path / path.lstrip("/")) for name, path in unit_env.items()}  # the unit's own folders
    read = env_file(installed)
    command = [re.sub(r"\$\{(\w+)\}", lambda m: read[m[1]], word) for word in shlex.split(service["ExecStart"])]
    command[0] = str(BIN / "pith-archiver")
    base = {name: value for name, value in os.environ.items() if not name.startswith(("AWS_", "XDG_"))}
    ran = subprocess.run(
        command, capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**base, **state, **read}
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("ok (exit 0): archived ") and len(ran.stdout.splitlines()) == 1
    assert "--notify" not in ran.stderr and exit_status_in(values["PITH_METRICS_FILE"]) == 0
    assert (Path(state["XDG_CONFIG_HOME"]) / "pith-archiver" / "signing-key.json").is_file()

    script = administrator_audit()
    script = script.replace("/etc/pith-archiver/pith-archiver.env", str(installed))
    script = script.replace(unit_env["XDG_CONFIG_HOME"], state["XDG_CONFIG_HOME"])
    path = {"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    audited = subprocess.run(
        ["sh", "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**base, **path}
    )
    assert audited.returncode == 0, audited.stdout[-2000:] + audited.stderr[-2000:]
    assert audited.stdout.splitlines()[-1].startswith("clean: 1 manifest, ")
