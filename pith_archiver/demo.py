"""The embedded default: the whole job on one machine with nothing outside it.

The registry's real bundles that ship with the package (``pith.shipped``, signed by
the registry key the keyring has built in) are served by our own mirror on a loopback
port, crawled from its sitemap, verified and archived. Nothing but product data is
needed, and the archive audits (and serves, exports) clean with no option.
"""

import shlex
from importlib.resources import as_file

from crawler.stat_keys import CrawlStats
from mirror.runner import BackgroundMirror
from mirror.server import MirrorServer
from mirror.source import CorpusDirectory
from pith.shipped import FIXTURES, real_bundles

from .crawl_report import outcome, report
from .crawl_setup import check_store
from .crawling import default_state_dir, logging_settings, run_crawl
from .exit_status import ExitStatus
from .output import NORMAL, echo
from .run_hooks import RunHooks

DEMO_START = "sitemap"  # one seed that reaches every record served


def run_demo(archive: str, progress: str, verbosity: int, budget: tuple[float, bool], hooks: RunHooks) -> int:
    check_store(archive, None)
    state_dir = default_state_dir(archive, None)
    with as_file(FIXTURES) as folder, BackgroundMirror(MirrorServer(CorpusDirectory(folder))) as server:
        if verbosity >= NORMAL:
            echo(
                f"embedded mirror: {server.url} (the {len(real_bundles())} real registry bundles shipped); "
                f"crawling from its {DEMO_START} into {archive}"
            )
        overrides = {
            "PITH_ARCHIVE": archive,
            "PITH_STATE_DIR": state_dir,
            **logging_settings(verbosity, progress, None, state_dir),
        }
        stats = run_crawl(
            {"seeds": [DEMO_START], "resolver": server.url}, overrides, on_interim_commit=hooks.crawl_interim_commit
        )
    hooks.crawl_ended(stats, outcome(CrawlStats.of(stats), budget).why)
    status = report(stats, archive, budget, verbosity, overrides.get("LOG_FILE"))
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
