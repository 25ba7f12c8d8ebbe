"""The embedded default: the whole job on one machine with nothing outside it.

The registry's real bundles that ship with the package (``pith.shipped``, signed by
the registry key the keyring has built in) are served by our own mirror on a loopback
port, crawled from its sitemap, verified and archived. Nothing but product data is
needed, and the archive audits (and serves, exports) clean with no option.
"""

from dataclasses import replace
from importlib.resources import as_file

from pith.shipped import FIXTURES, real_bundles
from storage.serving.runner import BackgroundMirror
from storage.serving.server import MirrorServer
from storage.serving.source import CorpusDirectory

from .crawl_options import CrawlOptions
from .crawl_run import checked, crawl_with
from .exit_status import ExitStatus
from .next_steps import next_steps
from .output import NORMAL, echo

DEMO_START = "sitemap"  # one seed that reaches every record served


def run_demo(options: CrawlOptions) -> int:
    """The crawl ``options`` asks, of the embedded mirror from its sitemap: the same
    road (``checked``, ``crawl_with``) as any other crawl, every option with it."""
    with as_file(FIXTURES) as folder, BackgroundMirror(MirrorServer(CorpusDirectory(folder))) as server:
        crawl = checked(replace(options, seeds=(DEMO_START,), resolver=server.url))
        if options.verbosity >= NORMAL:
            echo(
                f"embedded mirror: {server.url} (the {len(real_bundles())} real registry bundles shipped); "
                f"crawling from its {DEMO_START} into {options.archive}"
            )
        status = crawl_with(crawl)
    if status == ExitStatus.OK and options.verbosity >= NORMAL:
        echo(f"\n{next_steps(options)}")
    return status
