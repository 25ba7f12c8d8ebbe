"""The one way tests run ``pith-archiver``: in this process through click's CliRunner
(fast; the command sees this test's environment), or, given ``home``, as a real
subprocess there (its own exit code and stderr, no state shared with the test, Scrapy's
reactor started afresh) whose archiver key, crawl state and logs stay in ``home``."""

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from pith_archiver.cli import main
from pith_testkit.cli import main as kit_main
from storage.archive.signing_key import new_signer

ROOT = Path(__file__).resolve().parents[2]  # the checkout: the test kit is not installed


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str
    output: str  # stdout and stderr as a terminal shows them (in a subprocess: one after the other)

    def check(self, returncode: int = 0):
        """Insist the command ended with ``returncode`` (its output's tail tells why not)."""
        assert self.returncode == returncode, self.stdout[-2000:] + self.stderr[-3000:]
        return self


def isolated_home(home: Path) -> dict:
    """Environment for a CLI run whose archiver key, crawl state and logs stay in ``home``."""
    return {"XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache")}


def signing_key(path: Path) -> Path:
    """``path``, holding a signing key made on the first call: ``--signing-key`` names
    only a key that exists (only the default key is made on first use)."""
    if not Path(path).exists():
        new_signer().save(path)
    return Path(path)


def run_cli(
    *args, home: Path | None = None, env: dict | None = None, timeout: float = 120, kit: bool = False
) -> CliResult:
    """``pith-archiver ARGS`` (``kit``: the test kit's ``python -m pith_testkit ARGS``): in
    this process, or with ``home`` in a subprocess started there, with ``env`` added to
    its environment (``isolated_home(home)`` first)."""
    args = [str(arg) for arg in args]
    if home is None:
        if env:
            raise ValueError("env needs a subprocess: pass home (or monkeypatch the test's environment)")
        result = CliRunner().invoke(kit_main if kit else main, args, catch_exceptions=False)
        return CliResult(result.exit_code, result.stdout, result.stderr, result.output)
    checkout = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-m", "pith_testkit" if kit else "pith_archiver", *args],
        capture_output=True,
        text=True,
        cwd=home,
        timeout=timeout,
        env={**os.environ, **(checkout if kit else {}), **isolated_home(home), **(env or {})},
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr, proc.stdout + proc.stderr)
