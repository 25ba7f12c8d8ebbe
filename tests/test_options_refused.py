"""Options that do not apply are refused, never silently ignored: one line naming the
option and why, exit 2, before anything is read or fetched (export's are in
tests/test_export.py)."""

from pathlib import Path

import click
import pytest

from pith_archiver import FIXTURES
from pith_archiver.cli import main
from pith_archiver.option_checks import RenamedFrom
from tests.plugins.cli import run_cli

REAL = "pith:2019:RLLQL6357CWNZYHNBMCYD3UK5B"


@pytest.fixture
def proof(tmp_path):
    path = tmp_path / "proof.json"
    path.write_text("{}")
    return str(path)


@pytest.mark.parametrize(
    "args, said",
    [
        (["verify", "--policy", "logs.policy", "x.json"], "--policy: only with --proof FILE"),
        (["verify", "--proof", "{proof}", "--max-bytes", "9"], "--max-bytes: for the documents verified"),
        (["verify", "--proof", "{proof}", "-j", "2", "--max-nesting", "9"], "--max-nesting and --jobs: for the"),
        (["verify", "--proof", "{proof}", "--policy", "p", "--keyring", "{proof}"], "--keyring: not with --policy"),
        (["verify", "x.json", "--s3-endpoint-url", "http://127.0.0.1:1"], "--s3-endpoint-url applies to s3://"),
        (["audit", "{tmp}", "--s3-endpoint-url", "http://127.0.0.1:1"], "--s3-endpoint-url applies to s3://"),
        (["prove", "{tmp}", REAL, "--s3-endpoint-url", "http://127.0.0.1:1"], "--s3-endpoint-url applies to"),
        (["prove", "{tmp}", REAL, "--json", "--format", "text"], "--json is --format json"),
        (["crawl", "--out", "{tmp}", "--no-follow", "--max-depth", "2", REAL], "--max-depth counts link hops"),
        (["crawl", "--out", "{tmp}", "--check-state", "--check-state-sample", "5%", REAL], "--check-state checks"),
    ],
)
def test_an_option_that_does_not_apply_is_one_line_and_exit_2(tmp_path, proof, args, said):
    args = [arg.replace("{proof}", proof).replace("{tmp}", str(tmp_path)) for arg in args]
    if args[0] == "crawl":
        args[1:1] = ["--resolver", "http://127.0.0.1:1"]  # refused before any request
    result = run_cli(*args)
    assert result.returncode == 2 and result.stdout == "", result.output
    [line] = result.stderr.splitlines()
    assert line.startswith(f"Error: {said}"), line


@pytest.mark.parametrize(
    "command, old, new, rest, implied",
    [
        ("verify", "--max-depth", "--max-nesting", ["4", "{real}"], []),  # --max-depth: a crawl's link hops
        ("witness", "--key", "--signing-key", ["{tmp}/no-key.json", "--policy", "{tmp}/no.policy"], []),  # a key id
        ("keys generate", "--out", "--signing-key", ["{tmp}"], []),  # --out: the archive; {tmp} is a folder
        ("keys retire", "--keyring", "--into", ["{tmp}/k.json", "k", "--at", "2026-07-01T00:00:00Z"], []),  # trusted
        ("export", "--to", "--out", ["{tmp}/d", "{tmp}/no-archive"], []),  # --out: the destination, as in crawl
        ("export", "--bag", "--out", ["{tmp}/d", "{tmp}/no-archive"], ["--format", "bag"]),
    ],
)
def test_a_renamed_option_works_for_one_release_with_a_notice_naming_the_new_name(
    tmp_path, command, old, new, rest, implied
):
    """The old flag gives what the new one gives (with ``implied``, what the old flag also
    chose), after one line naming the new."""
    rest = [arg.replace("{real}", str(FIXTURES)).replace("{tmp}", str(tmp_path)) for arg in rest]
    result, renamed = run_cli(*command.split(), old, *rest), run_cli(*command.split(), new, *rest, *implied)
    notice = f"notice: {' '.join([old, 'is now', new, *implied])}; the old name goes in the next release"
    assert result.stderr.splitlines()[0] == notice and notice not in renamed.stderr
    assert (result.returncode, result.stdout) == (renamed.returncode, renamed.stdout)
    assert result.stderr.splitlines()[1:] == renamed.stderr.splitlines()
    shown = run_cli(*command.split(), "--help").stdout
    assert new in shown and f"{old} " not in shown


def test_every_renamed_option_is_in_the_commands_page():
    """docs/COMMANDS.md's table lists each renamed option, old and new, in its command."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "COMMANDS.md").read_text("utf-8")
    table = page.split("## Renamed options", 1)[1].split("\n## ", 1)[0]
    for name, command in commands_of(main):
        for param in command.params:
            for old in param.olds if isinstance(param, RenamedFrom) else ():
                row = next((line for line in table.splitlines() if f"{name} {old}`" in line), "")
                assert param.opts[0] in row, (name, old)


def commands_of(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    found = []
    for name in group.list_commands(None):  # type: ignore[arg-type]
        command = group.get_command(None, name)  # type: ignore[arg-type]
        if isinstance(command, click.Group):
            found += commands_of(command, f"{prefix}{name} ")
        elif command is not None:
            found.append((f"{prefix}{name}", command))
    return found
