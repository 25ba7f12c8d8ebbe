"""``pith-archiver crawl``: the main job."""

import shlex
import sys
from typing import Any

import click

from crawler.crawl_config import CrawlConfig
from crawler.frontier import SigningKeyInUse
from crawler.jobdir import JobdirInUse
from crawler.stat_keys import CrawlStats
from pith.policy import Policy

from . import tuning
from .crawl_options import (
    CrawlOptions,
    SectionedCommand,
    config_of,
    crawl_option_list,
    scrapy_settings_of,
    setting_pairs,
)
from .crawl_report import STOPPED, outcome, report
from .crawling import logging_settings, project_settings, run_crawl
from .exit_status import EXIT_STATUS_HELP, ConfigError
from .output import say, verbosity_options
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

        sys.exit(sync_from_archive(options, options.from_archive))
    if not options.seeds and not options.seeds_file and options.resolver is None:
        from .demo import run_demo

        sys.exit(run_demo(options))
    policy = None
    if options.witness_policy:
        from .cmd_cosign import read_policy  # its storage imports pyarrow: after economise, and only when asked

        policy = read_policy(options.witness_policy)
    overrides = scrapy_settings_of(options)
    pairs = setting_pairs(options.settings)  # -s: last, over everything
    config = config_of(options, project_settings({**overrides, **pairs}))  # checked once, handed over as built
    overrides.update(logging_settings(options.verbosity, options.progress, options.log_file, options.state_dir))
    overrides.update(pairs)
    sys.exit(crawl_with(options, config, overrides, policy, resume_command(options.jobdir)))


def crawl_with(
    options: CrawlOptions, config: CrawlConfig, overrides: dict, policy: Policy | None = None, resume: str = ""
) -> int:
    """Run the crawl ``config`` describes, report it, and return its exit status."""
    hooks, shared = options.hooks, bool(options.frontier)
    try:
        stats = run_crawl(config, overrides, on_interim_commit=hooks.crawl_interim_commit)
    except (JobdirInUse, SigningKeyInUse) as exc:
        raise ConfigError(str(exc)) from None
    hooks.crawl_ended(stats, outcome(CrawlStats.of(stats), options.max_failures, shared).why)
    status = report(
        stats,
        options.archive,
        options.max_failures,
        options.verbosity,
        overrides.get("LOG_FILE"),
        resume=resume,
        shared=shared,
    )
    if policy is not None and status in STOPPED:  # stopped by a signal: no more network waits
        again = shlex.join(["pith-archiver", "cosign", options.archive, "--policy", options.witness_policy or ""])
        say(f"cosign: skipped, the crawl was stopped; cosign later with: {again}", err=True)
    elif policy is not None and config.store is not None and config.signer is not None:
        from .cmd_cosign import cosign_after_crawl

        cosign_after_crawl(config.store, config.signer, policy)
    return status


def resume_command(jobdir: str | None) -> str:
    """What to type to go on after Ctrl-C: the same command; with a --jobdir it picks
    up the queue where it stopped, without one it starts over and skips what is archived."""
    command = shlex.join(["pith-archiver", *sys.argv[1:]])
    return command if jobdir else f"{command} --jobdir DIR (or the same command: archived records are skipped)"
