"""``pith-archiver crawl``: the main job."""

import sys
from typing import Any

import click

from . import tuning
from .crawl_options import CrawlOptions, SectionedCommand, crawl_option_list, renamed_sync
from .exit_status import EXIT_STATUS_HELP
from .output import verbosity_options
from .run_hooks import run_hook_options


@click.command(cls=SectionedCommand, epilog=EXIT_STATUS_HELP)
@crawl_option_list
@run_hook_options("crawl")
@verbosity_options
def crawl(**given: Any) -> None:
    """Crawl a resolver from SEEDS, verify every bundle, archive it into --out.

    A seed is a Pith number (full or short), a 26-character suffix, an arXiv id, a
    DOI, a record page or bundle URL, or 'sitemap'. With no SEEDS, no --seeds-file
    and no --resolver, runs the embedded demo: the bundled corpus served on loopback,
    crawled from one seed into --out.

    Everything is checked before the first request (keyring, URLs, the archive's
    folder or bucket, the signing key, the frontier); on a terminal you see a live
    progress line and a summary, and Scrapy's log goes to a file the summary names.
    """
    tuning.economise()  # before anything allocates: checking the configuration does
    options = CrawlOptions(**given)
    if options.from_archive:
        from .peer_sync import sync_from_archive

        sys.exit(sync_from_archive(renamed_sync(options)))
    if not options.seeds and not options.seeds_file and options.resolver is None:
        from .demo import run_demo

        sys.exit(run_demo(options))
    from .crawl_run import checked, crawl_with  # Scrapy: only a crawl starts it

    sys.exit(crawl_with(checked(options)))
