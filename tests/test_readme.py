"""The README is a page a newcomer reads in five minutes: short, every line readable,
every command it lists real, every page it points to there. The detail lives in docs/."""

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from pith_archiver.cli import main
from pith_archiver.exit_status import MEANING

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text("utf-8")
LINK = re.compile(r"\]\(([^)#]+)(#[^)]*)?\)")


def test_the_readme_is_short_and_its_lines_readable():
    assert len(README.split()) <= 1500
    assert [line[:60] for line in README.splitlines() if len(line) > 400] == []


@pytest.mark.parametrize("page", sorted({page for page, _ in LINK.findall(README)}))
def test_every_page_the_readme_names_is_in_the_checkout(page):
    assert not page.startswith(("http:", "https:")), "the docs stand alone: no link outside the repository"
    assert (ROOT / page).is_file(), page


def test_every_command_in_the_table_is_one_the_tool_has():
    table = README.split("## Commands", 1)[1].split("\n## ", 1)[0]
    named = {cell.split()[0] for cell in re.findall(r"^\| `([^`]+)`", table, re.M)}
    assert named and named <= set(main.list_commands(None))  # type: ignore[arg-type]
    assert set(main.list_commands(None)) <= named | {"keys"}  # type: ignore[arg-type]


def test_the_detail_that_left_the_readme_is_in_docs():
    commands = (ROOT / "docs" / "COMMANDS.md").read_text("utf-8")
    for kept in ("--frontier redis://", "--mirrors-from-registry", "--commit-every", "scrapyd-deploy", "pith:RLLQL635"):
        assert kept in commands, kept


def test_the_exit_status_table_and_the_help_say_what_the_code_means():
    """One table of meanings (``exit_status.MEANING``): the README's says it, every
    command's help says it, and a run's summary for machines says it."""
    table = README.split("## Exit status", 1)[1].split("\n## ", 1)[0]
    rows = {int(status): text.replace("`", "") for status, text in re.findall(r"^\| (\d+) \| (.+) \|$", table, re.M)}
    assert rows == {int(status): text for status, text in MEANING.items()}
    help_text = " ".join(CliRunner().invoke(main, ["--help"], terminal_width=2000).output.split())
    assert all(f"{int(status)} {text}" in help_text for status, text in MEANING.items())
