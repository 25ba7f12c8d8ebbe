"""The embedded default: the whole job on one machine with nothing outside it.

The registry's real bundles that ship with the package (``pith.shipped``, signed by
the registry key the keyring has built in) are served by our own mirror on a loopback
port, crawled from its sitemap, verified and archived. Nothing but product data is
needed, and the archive audits (and serves, exports) clean with no option.
"""

import shlex
from dataclasses import replace
from importlib.resources import as_file

from pith.shipped import FIXTURES, real_bundles
from storage.serving.runner import BackgroundMirror
from storage.serving.server import MirrorServer
from storage.serving.source import CorpusDirectory

from .cmd_crawl import crawl_with
from .crawl_options import CrawlOptions, config_of
from .crawling import logging_settings, project_settings
from .exit_status import ExitStatus
from .output import NORMAL, echo

DEMO_START = "sitemap"  # one seed that reaches every record served


def run_demo(options: CrawlOptions) -> int:
    """The crawl ``options`` asks, of the embedded mirror from its sitemap: the same
    road (``config_of``) as any other crawl."""
    archive, verbosity = options.archive, options.verbosity
    with as_file(FIXTURES) as folder, BackgroundMirror(MirrorServer(CorpusDirectory(folder))) as server:
        config = config_of(replace(options, seeds=(DEMO_START,), resolver=server.url), project_settings())
        overrides = logging_settings(verbosity, options.progress, None, options.state_dir)
        if verbosity >= NORMAL:
            echo(
                f"embedded mirror: {server.url} (the {len(real_bundles())} real registry bundles shipped); "
                f"crawling from its {DEMO_START} into {archive}"
            )
        status = crawl_with(options, config, overrides)
    if status == ExitStatus.OK and verbosity >= NORMAL:
        quoted = shlex.quote(archive)
        echo(
            f"\nAudit it:\n"  # noqa: S608 - a command printed for the user to run, not a query this builds
            f"  pith-archiver audit {quoted}\n"
            f"Query it, for example with DuckDB (pip install duckdb):\n"
            f"  python -c \"import duckdb; duckdb.sql(\\\"SELECT year, count(*) AS records FROM read_parquet("
            f"'{archive}/tables/records/**/*.parquet', hive_partitioning=true) GROUP BY year ORDER BY year\\\")"
            f".show()\"\n"
            f"or with pyarrow:\n"
            f"  python -c \"import pyarrow.dataset as ds; print(ds.dataset('{archive}/tables/records',"
            f" partitioning='hive').to_table().num_rows)\""
        )
    return status
