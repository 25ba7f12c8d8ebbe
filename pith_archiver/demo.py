"""The embedded default: the whole job on one machine with nothing outside it.

A signed test corpus (plus the registry's real bundles) is generated, served by our
own mirror on a loopback port, crawled from one real record, verified and archived.
The corpus keyring is kept beside the archiver's signing key, so the archive can be
audited (and served, exported) clean afterwards.
"""

import shlex
import shutil
import tempfile
from pathlib import Path

import click

from mirror.corpus import generate_corpus
from mirror.runner import BackgroundMirror
from mirror.server import MirrorServer
from mirror.source import KEYRING_NAME, CorpusDirectory
from storage.signing_key import default_key_path
from .crawl_report import outcome, report
from .crawl_setup import check_store
from .crawling import default_state_dir, logging_settings, run_crawl
from .exit_status import ExitStatus
from .output import NORMAL
from .run_hooks import RunHooks

DEMO_RECORDS = 250
DEMO_SEED = 1
DEMO_START = "pith:2019:RLLQL6357CWNZYHNBMCYD3UK5B"  # a real registry record


def demo_keyring_path() -> Path:
    """Where the demo corpus's keyring lasts: beside the archiver key, not in a temp folder."""
    return default_key_path().parent / "demo-keyring.json"


def run_demo(archive: str, progress: str, verbosity: int, budget: tuple[float, bool], hooks: RunHooks) -> int:
    check_store(archive, None)
    state_dir = default_state_dir(archive, None)
    keyring = demo_keyring_path()
    with tempfile.TemporaryDirectory(prefix="pith-demo-") as folder:
        corpus = Path(folder) / "corpus"
        generate_corpus(corpus, DEMO_RECORDS, DEMO_SEED)
        keyring.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(corpus / KEYRING_NAME, keyring)
        with BackgroundMirror(MirrorServer(CorpusDirectory(corpus))) as server:
            if verbosity >= NORMAL:
                click.echo(
                    f"embedded mirror: {server.url} ({DEMO_RECORDS} test records + the real bundles); "
                    f"crawling from {DEMO_START} into {archive}"
                )
            overrides = {
                "PITH_ARCHIVE": archive,
                "PITH_KEYRINGS": [str(keyring)],
                "PITH_STATE_DIR": state_dir,
                **logging_settings(verbosity, progress, None, state_dir),
            }
            stats = run_crawl(
                {"seeds": [DEMO_START], "resolver": server.url}, overrides, on_interim_commit=hooks.crawl_interim_commit
            )
    hooks.crawl_ended(stats, outcome(stats, budget).why)
    status = report(stats, archive, budget, verbosity, overrides.get("LOG_FILE"))
    if status == ExitStatus.OK and verbosity >= NORMAL:
        quoted = shlex.quote(archive)
        click.echo(
            f"\nAudit it (the demo's registry key is kept at {keyring}):\n"  # noqa: S608 - printed for the user to run, not executed
            f"  pith-archiver audit {quoted} --keyring {shlex.quote(str(keyring))}\n"
            f"Query it, for example with DuckDB (pip install duckdb):\n"
            f"  python -c \"import duckdb; duckdb.sql(\\\"SELECT year, count(*) AS records FROM read_parquet("
            f"'{archive}/tables/records/**/*.parquet', hive_partitioning=true) GROUP BY year ORDER BY year\\\")"
            f".show()\"\n"
            f"or with pyarrow:\n"
            f"  python -c \"import pyarrow.dataset as ds; print(ds.dataset('{archive}/tables/records',"
            f" partitioning='hive').to_table().num_rows)\""
        )
    return status
