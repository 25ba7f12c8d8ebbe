"""``pith-archiver crawl``: the main job."""

import sys
from dataclasses import fields
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from ..crawl import tuning
from ..crawl.options import RENAMED_SYNC, CrawlOptions, SectionedCommand, crawl_option_list
from ..exit_status import EXIT_STATUS_HELP, ConfigError
from ..output import echo, output_is_a_report, verbosity_options
from ..reporting.job_hooks import job_hook_options

if TYPE_CHECKING:
    from ..peers.sync import SyncOptions


@click.command(cls=SectionedCommand, epilog=EXIT_STATUS_HELP)
@crawl_option_list
@job_hook_options("crawl")
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
    output_is_a_report()  # the summary of work done whether or not anyone reads it
    options = CrawlOptions(**given)
    if options.from_archive:
        from ..peers.sync import sync_from_archive

        sys.exit(sync_from_archive(renamed_sync(options)))
    if not options.seeds and not options.seeds_file and options.resolver is None:
        from ..crawl.demo import run_demo

        sys.exit(run_demo(options))
    from ..crawl.run import checked, crawl_with  # Scrapy: only a crawl starts it

    sys.exit(crawl_with(checked(options)))


def renamed_sync(options: CrawlOptions) -> "SyncOptions":
    """``crawl --from-archive PEER``, renamed ``sync PEER``: the sync's options, with a
    one-line notice; a crawl option given that a sync does not take is refused (one line,
    exit 2), never ignored. It goes in the next release."""
    from ..peers.sync import SyncOptions

    context = click.get_current_context()
    taken = {field.name for field in fields(SyncOptions)} - {"peer"}
    given = [
        param.opts[-1] if isinstance(param, click.Option) else param.human_readable_name
        for param in context.command.params
        if param.name not in taken | {"from_archive", "verbose", "quiet"}
        and context.get_parameter_source(param.name or "") is not ParameterSource.DEFAULT
    ]
    if given:
        raise ConfigError(
            f"--from-archive copies a peer instead of crawling: not with {', '.join(given)} "
            f"(it is now `{RENAMED_SYNC}`)"
        )
    echo(
        f"notice: `crawl --from-archive PEER` is now `{RENAMED_SYNC}`; the old form goes in the next release", err=True
    )
    return SyncOptions(peer=options.from_archive or "", **{name: getattr(options, name) for name in taken})
