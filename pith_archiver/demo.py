"""The embedded default: the whole job on one machine with nothing outside it.

A signed test corpus (plus the registry's real bundles) is generated, served by our
own mirror on a loopback port, crawled from one real record, verified and archived.
"""

import shutil
import tempfile
from pathlib import Path

import click

from mirror.corpus import generate_corpus
from mirror.runner import BackgroundMirror
from mirror.server import MirrorServer
from mirror.source import KEYRING_NAME, CorpusDirectory
from .crawling import default_state_dir, run_crawl
from .signing_key import default_key_path

DEMO_RECORDS = 250
DEMO_SEED = 1
DEMO_START = "pith:2019:RLLQL6357CWNZYHNBMCYD3UK5B"  # a real registry record


def demo_keyring_path() -> Path:
    """Where the demo keeps its corpus keyring, so that its archive can be audited later."""
    return default_key_path().parent / "demo-keyring.json"


def run_demo(archive: str, progress: str) -> int:
    from .cmd_crawl import report
    with tempfile.TemporaryDirectory(prefix="pith-demo-") as folder:
        corpus = Path(folder) / "corpus"
        generate_corpus(corpus, DEMO_RECORDS, DEMO_SEED)
        keyring = demo_keyring_path()
        keyring.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(corpus / KEYRING_NAME, keyring)  # the same seed, the same keys: safe to overwrite
        with BackgroundMirror(MirrorServer(CorpusDirectory(corpus))) as server:
            click.echo(f"embedded mirror: {server.url} ({DEMO_RECORDS} test records + the real bundles); "
                       f"crawling from {DEMO_START} into {archive}")
            stats = run_crawl(
                {"seeds": [DEMO_START], "resolver": server.url},
                {"PITH_ARCHIVE": archive, "PITH_KEYRINGS": [str(corpus / KEYRING_NAME)], "PITH_PROGRESS": progress,
                 "PITH_STATE_DIR": default_state_dir(archive, None), "LOG_LEVEL": "WARNING"})
    status = report(stats, archive)
    if status == 0:
        click.echo(f"\nAudit it (the test corpus's keys are kept in {keyring}):\n"
                   f"  pith-archiver audit {archive} --keyring {keyring}")
        click.echo(f"\nQuery it, for example with DuckDB (pip install duckdb):\n"
                   f"  python -c \"import duckdb; duckdb.sql(\\\"SELECT year, count(*) AS records FROM read_parquet("
                   f"'{archive}/tables/records/**/*.parquet', hive_partitioning=true) GROUP BY year ORDER BY year\\\")"
                   f".show()\"\n"
                   f"or with pyarrow:\n"
                   f"  python -c \"import pyarrow.dataset as ds; print(ds.dataset('{archive}/tables/records',"
                   f" partitioning='hive').to_table().num_rows)\"")
    return status
