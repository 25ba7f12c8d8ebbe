"""The embedded default: the whole job on one machine with nothing outside it.

The registry's real bundles that ship with the package (``pith.shipped``, signed by
the registry key the keyring has built in) are served by our own mirror on a loopback
port, crawled from its sitemap, verified and archived. Nothing but product data is
needed, and the archive audits (and serves, exports) clean with no option.
"""

import hashlib
from dataclasses import replace
from importlib.resources import as_file
from pathlib import Path

from pith.shipped import FIXTURES, real_bundles
from storage.serving.runner import BackgroundMirror
from storage.serving.server import MirrorServer
from storage.serving.source import CorpusDirectory

from ..exit_status import ExitStatus
from ..output import NORMAL, echo
from .next_steps import next_steps
from .options import CrawlOptions
from .run import CheckedCrawl, checked, crawl_with
from .state_dir import archive_location

DEMO_START = "sitemap"  # one seed that reaches every record served
DEMO_PORTS = range(47000, 48000)  # the embedded mirror's, one for each archive


def demo_port(archive: str) -> int:
    """The embedded mirror's port for a crawl into ``archive``: the same every crawl, so a
    crawl after the first is a re-crawl of the same resolver URL (by which its validators
    and dates are kept) and asks only what changed; another archive, another port."""
    digest = hashlib.sha256(archive_location(archive).encode()).hexdigest()
    return DEMO_PORTS[int(digest[:8], 16) % len(DEMO_PORTS)]


def embedded_mirror(folder: Path, port: int) -> BackgroundMirror:
    """The embedded mirror of ``folder``, listening on ``port``, or on any free port
    when that one is taken."""
    mirror = BackgroundMirror(MirrorServer(CorpusDirectory(folder), port=port))
    try:
        mirror.start()
    except OSError:
        mirror.stop()
        mirror = BackgroundMirror(MirrorServer(CorpusDirectory(folder)))
        mirror.start()
    return mirror


def run_demo(options: CrawlOptions) -> int:
    """The crawl ``options`` asks, of the embedded mirror from its sitemap: the same
    road (``checked``, ``crawl_with``) as any other crawl, every option with it."""
    with as_file(FIXTURES) as folder:
        mirror = embedded_mirror(folder, demo_port(options.archive))
        try:
            crawl = checked(replace(options, seeds=(DEMO_START,), resolver=mirror.server.url))
            status = _crawl_embedded(crawl, mirror.server)
        finally:
            mirror.stop()
    if status == ExitStatus.OK and options.verbosity >= NORMAL:
        echo(f"\n{next_steps(options, crawl.config.store)}")
    return status


def _crawl_embedded(crawl: CheckedCrawl, server: MirrorServer) -> ExitStatus:
    options = crawl.options
    if options.verbosity >= NORMAL:
        echo(
            f"embedded mirror: {server.url} (the {len(real_bundles())} real registry bundles shipped); "
            f"crawling from its {DEMO_START} into {options.archive}"
        )
    return crawl_with(crawl)
