"""Fixtures to run real crawls: a plain static web server (no Pith logic at all) and
a helper that runs ``pith-archiver crawl`` in a subprocess (Scrapy's reactor cannot
restart inside one test process) and returns its exit code, stats and output."""

import json
import os
import subprocess
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from mirror.source import KEYRING_NAME
from pith_archiver import FIXTURES


@dataclass
class CrawlResult:
    returncode: int
    stats: dict
    stdout: str
    stderr: str

    def stat(self, key: str) -> int:
        return self.stats.get(f"pith/{key}", 0)


def run_cli_crawl(tmp_path: Path, *args: str, timeout: float = 120, env: dict | None = None) -> CrawlResult:
    """``pith-archiver crawl -v ARGS`` (Scrapy's log on stderr) with stats written to a
    file; ``env`` adds to the environment."""
    stats_file = tmp_path / f"stats-{len(list(tmp_path.glob('stats-*.json')))}.json"
    cmd = [
        sys.executable,
        "-m",
        "pith_archiver",
        "crawl",
        "-v",
        "--progress",
        "log",
        "--stats-json",
        str(stats_file),
        *args,
    ]
    env = {**os.environ, **isolated_home(tmp_path), **(env or {})}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp_path, env=env)
    stats = json.loads(stats_file.read_text()) if stats_file.exists() else {}
    return CrawlResult(proc.returncode, stats, proc.stdout, proc.stderr)


def crawl_corpus(tmp_path: Path, corpus_dir: Path, resolver: str, out: Path, *args: str) -> CrawlResult:
    """``run_cli_crawl`` of a test corpus served at ``resolver`` into ``out``: trusting
    exactly the corpus's keyring, AutoThrottle off."""
    return run_cli_crawl(
        tmp_path,
        "--resolver",
        resolver,
        "--keyring",
        str(corpus_dir / KEYRING_NAME),
        "--no-default-keys",
        "--out",
        str(out),
        "-s",
        "AUTOTHROTTLE_ENABLED=false",
        *args,
    )


def isolated_home(tmp_path: Path) -> dict:
    """Environment for a CLI run whose archiver key, crawl state and logs stay in ``tmp_path``."""
    return {"XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_CACHE_HOME": str(tmp_path / "cache")}


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
