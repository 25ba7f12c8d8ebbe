"""Fixtures for a Pith mirror on loopback: a small generated corpus and running mirror
servers (the test kit's, optionally injecting faults), whose request log a test can read.

Typical use in a crawler test::

    def test_retries(mirror, corpus_catalog, tmp_path):
        server = mirror(faults=FaultPlan(fail_first=1, paths=r"/bundle\\.json$"))
        result = run_cli_crawl(tmp_path, f"{server.url}/pith/{corpus_catalog.suffixes[0]}")
        assert [r.status for r in server.requests if r.document == "bundle"].count(503) == ...

- ``corpus_dir`` (session): a generated corpus of SMALL_CORPUS_RECORDS minted records
  (seed SMALL_CORPUS_SEED) plus the 3 real bundles; read-only, shared by every test.
- ``pages_corpus_dir`` (session): the same records minted with ``links="pages"``: bundles
  that name no other record, as the registry's; only the record pages link them.
- ``corpus_catalog`` (session): its Catalog (``suffixes``, ``entry(s).pith_number``,
  ``resolve(alias)``, ``cited_by(s)``, ``signing_key``).
- ``corpus_keyring`` (session): a Keyring that verifies every bundle of the corpus.
- ``mirror`` (function): a factory starting FaultyMirrorServers (the public MirrorServer
  with fault injection) on 127.0.0.1, port 0, each on its own thread, all stopped after
  the test. See ``start_mirror`` for its arguments.
- ``serve_process``: a context manager running ``pith-archiver serve`` (or, with
  ``kit=True``, the test kit's fault-injecting ``serve``) as a subprocess.
"""

import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from pith.keyring import Keyring
from pith_testkit.corpus import generate_corpus
from pith_testkit.faults import FaultPlan
from pith_testkit.server import FaultyMirrorServer
from storage.serving.limits import ServerLimits
from storage.serving.resolver import SiteOptions
from storage.serving.runner import BackgroundMirror
from storage.serving.source import KEYRING_NAME, CorpusDirectory

ROOT = Path(__file__).resolve().parents[2]
KIT = [sys.executable, "-m", "pith_testkit"]  # the test kit's command line, from this checkout

SMALL_CORPUS_RECORDS = 40
SMALL_CORPUS_SEED = 7


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory) -> Path:
    """A corpus directory (bundles/, keyring.json, corpus.json); do not write into it."""
    out = tmp_path_factory.mktemp("mirror") / "corpus"
    generate_corpus(out, SMALL_CORPUS_RECORDS, SMALL_CORPUS_SEED)
    return out


@pytest.fixture(scope="session")
def pages_corpus_dir(tmp_path_factory) -> Path:
    """``corpus_dir``'s records, their bundles naming no other record; do not write into it."""
    out = tmp_path_factory.mktemp("mirror") / "pages-corpus"
    generate_corpus(out, SMALL_CORPUS_RECORDS, SMALL_CORPUS_SEED, links="pages")
    return out


@pytest.fixture(scope="session")
def corpus_catalog(corpus_dir):
    return CorpusDirectory(corpus_dir).catalog


@pytest.fixture(scope="session")
def corpus_keyring(corpus_dir) -> Keyring:
    """Pins exactly the corpus's test key and the registry key (from its keyring.json)."""
    return Keyring.build([corpus_dir / KEYRING_NAME], default_keys=False)


@pytest.fixture
def mirror(corpus_dir):
    """``start_mirror(directory=None, faults=None, *, public_url=None, log_size=100_000,
    limits=None, **site_options) -> MirrorServer``, already listening.

    ``directory`` defaults to ``corpus_dir``; ``faults`` is a FaultPlan; ``limits`` a
    ServerLimits (deadlines, connection cap);
    ``site_options`` are SiteOptions fields (``sitemap_page_size``, ``disallow``,
    ``name``, ``cache_size``). The server gives ``url``, ``requests`` (a list of
    LoggedRequest: method, target, path, status, headers, fault, document, record),
    ``clear_log()``, ``set_faults(plan)`` and ``catalog`` via ``server.source.catalog``.
    Record URLs: ``pith.links.links_for(suffix, server.url)``."""
    runners = []

    def start_mirror(
        directory=None,
        faults: FaultPlan | None = None,
        *,
        public_url: str | None = None,
        log_size: int = 100_000,
        limits: ServerLimits | None = None,
        **site_options,
    ) -> FaultyMirrorServer:
        server = FaultyMirrorServer(
            CorpusDirectory(directory or corpus_dir),
            public_url=public_url,
            options=SiteOptions(**site_options),
            faults=faults or FaultPlan(),
            log_size=log_size,
            limits=limits,
        )
        runner = BackgroundMirror(server)
        runners.append(runner)
        return runner.start()

    yield start_mirror
    for runner in runners:
        runner.stop()


def kit_env() -> dict:
    """The environment in which ``KIT`` finds the test kit: it is not installed, only checked out."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


@contextmanager
def serve_process(directory, *options: str, timeout: float = 30, kit: bool = False, **popen):
    """Run ``pith-archiver serve DIRECTORY OPTIONS`` (with ``kit``, ``python -m
    pith_testkit serve``) and yield ``(process, url)``; the
    process gets SIGTERM on exit (its exit code is then in ``process.returncode``).
    ``popen`` goes to subprocess.Popen: e.g. ``preexec_fn`` to lower its open-file limit,
    ``stderr`` a file to read its log from (else a pipe, ``process.stderr``)."""
    program = KIT if kit else [sys.executable, "-c", "from pith_archiver.cli import main; main()"]
    command = [*program, "serve", str(directory)]
    if kit:
        popen.setdefault("env", kit_env())
    popen.setdefault("stderr", subprocess.PIPE)
    process = subprocess.Popen([*command, *options], stdout=subprocess.PIPE, text=True, **popen)
    try:
        url = process.stdout.readline().strip()
        if not url.startswith("http://"):
            log = process.stderr.read() if process.poll() is not None and process.stderr else ""
            raise RuntimeError(f"serve did not start: {url!r} {log}")
        yield process, url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()
        if process.stderr:
            process.stderr.close()
