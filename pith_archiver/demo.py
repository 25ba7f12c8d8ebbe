"""The embedded default: the whole job on one machine with nothing outside it.

A signed test corpus (plus the registry's real bundles) is generated, served by our
own mirror on a loopback port, crawled from one real record, verified and archived.
"""

import tempfile
from pathlib import Path

import click

from mirror.corpus import generate_corpus
from mirror.runner import BackgroundMirror
from mirror.server import MirrorServer
from mirror.source import KEYRING_NAME, CorpusDirectory
from .crawling import default_state_dir, run_crawl

DEMO_RECORDS = 250
DEMO_SEED = 1
DEMO_START = "pith:2019:RLLQL6357CWNZYHNBMCYD3UK5B"  # a real registry record


def run_demo(archive: str, progress: str) -> int:
    from .cmd_crawl import report
    with tempfile.TemporaryDirectory(prefix="pith-demo-") as folder:
        corpus = Path(folder) / "corpus"
        generate_corpus(corpus, DEMO_RECORDS, DEMO_SEED)
        with BackgroundMirror(MirrorServer(CorpusDirectory(corpus))) as server:
            click.echo(f"embedded mirror: {server.url} ({DEMO_RECORDS} test records + the real bundles); "
                       f"crawling from {DEMO_START} into {archive}")
            stats = run_crawl(
                {"seeds": [DEMO_START], "resolver": server.url},
                {"PITH_ARCHIVE": archive, "PITH_KEYRINGS": [str(corpus / KEYRING_NAME)], "PITH_PROGRESS": progress,
                 "PITH_STATE_DIR": default_state_dir(archive, None), "LOG_LEVEL": "WARNING"})
    status = report(stats, archive)
    if status == 0:
        click.echo(f"\nQuery it, for example with DuckDB (pip install duckdb):\n"
                   f"  python -c \"import duckdb; duckdb.sql(\\\"SELECT year, count(*) AS records FROM read_parquet("
                   f"'{archive}/tables/records/**/*.parquet', hive_partitioning=true) GROUP BY year ORDER BY year\\\")"
                   f".show()\"\n"
                   f"or with pyarrow:\n"
                   f"  python -c \"import pyarrow.dataset as ds; print(ds.dataset('{archive}/tables/records',"
                   f" partitioning='hive').to_table().num_rows)\"")
    return status
