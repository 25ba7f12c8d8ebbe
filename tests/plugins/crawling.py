"""Fixtures to run real crawls: a plain static web server (no Pith logic at all) and
the one crawl wrapper, ``run_cli_crawl``: ``pith-archiver crawl`` in a subprocess
(Scrapy's reactor cannot restart inside one test process), with its exit code, stats and
output."""

import json
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pith_archiver import FIXTURES
from storage.serving.source import KEYRING_NAME
from tests.plugins.cli import CliResult, isolated_home, run_cli  # noqa: F401 (isolated_home: for the crawl tests)


@dataclass
class CrawlResult(CliResult):
    stats: dict

    def stat(self, key: str) -> int:
        return self.stats.get(f"pith/{key}", 0)


def run_cli_crawl(
    tmp_path: Path,
    *args: str,
    resolver: str | None = None,
    out=None,
    corpus: Path | None = None,
    logged: bool = True,
    timeout: float = 120,
    env: dict | None = None,
) -> CrawlResult:
    """The one crawl wrapper: ``pith-archiver crawl ARGS`` in a subprocess in ``tmp_path``
    (``run_cli``), with ``--resolver`` and ``--out`` if given. ``corpus``: trust exactly
    that test corpus's keyring, AutoThrottle off. ``logged`` (the default) adds ``-v``
    (Scrapy's log on stderr), ``--progress log`` and the stats written to a file, read
    back as ``stats``; without it the command line is exactly what a user types."""
    stats_file = tmp_path / f"stats-{len(list(tmp_path.glob('stats-*.json')))}.json"
    options = ["-v", "--progress", "log", "--stats-json", str(stats_file)] if logged else []
    if resolver is not None:
        options += ["--resolver", resolver]
    if corpus is not None:
        options += ["--keyring", str(corpus / KEYRING_NAME), "--no-default-keys", "-s", "AUTOTHROTTLE_ENABLED=false"]
    if out is not None:
        options += ["--out", str(out)]
    result = run_cli("crawl", *options, *args, home=tmp_path, env=env, timeout=timeout)
    stats = json.loads(stats_file.read_text()) if logged and stats_file.exists() else {}
    return CrawlResult(result.returncode, result.stdout, result.stderr, result.output, stats)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def build_static_site(root: Path, robots: str = "User-agent: *\nAllow: /\n") -> list[str]:
    """The real bundles laid out as plain files in the resolver layout; each record
    page links to the next record, so one seed reaches them all. Returns the suffixes."""
    suffixes = sorted(p.name.split(".")[0] for p in FIXTURES.glob("*.bundle.json"))
    for index, suffix in enumerate(suffixes):
        raw = (FIXTURES / f"{suffix}.bundle.json").read_bytes()
        state = json.loads(raw)["state"]
        for folder in (root / "pith" / suffix, root / ".well-known" / "pith" / suffix):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "bundle.json").write_bytes(raw)
        (root / "pith" / suffix / "state.json").write_text(
            json.dumps(state, separators=(",", ":"), ensure_ascii=False), "utf-8"
        )
        following = suffixes[(index + 1) % len(suffixes)]
        (root / "pith" / suffix / "index.html").write_text(
            f'<html><body><p>Cited by <a href="https://pith.science/pith/{following}">1 paper</a></p></body></html>'
        )
    (root / "robots.txt").write_text(robots)
    return suffixes


@contextmanager
def serving(root: Path):
    """A stdlib static file server over ``root`` on loopback; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def static_site(tmp_path):
    """Start a stdlib static file server over a built site; yields (base_url, suffixes, root)."""
    root = tmp_path / "site"
    suffixes = build_static_site(root)
    with serving(root) as url:
        yield url, suffixes, root
