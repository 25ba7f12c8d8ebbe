"""One crawl from the crawl command's options: its Scrapy settings, run, reported.

``pith-archiver crawl`` and the embedded demo both come here, so every option means
the same in both (``--stats-json``, ``--log-file``, ``--jobdir``, ``-s``, a witness
policy): the demo only chooses the seeds and the resolver first.
"""

import shlex
import sys
from dataclasses import dataclass

from crawler.crawl_config import CrawlConfig
from crawler.frontier import SigningKeyInUse
from crawler.scheduling.jobdir import JobdirInUse
from crawler.stat_keys import CrawlStats
from pith.policy import Policy

from .crawl_options import CrawlOptions, config_of, scrapy_settings_of, setting_pairs
from .crawl_report import STOPPED, outcome, report
from .crawling import logging_settings, project_settings, run_crawl
from .exit_status import ConfigError, ExitStatus
from .output import say


@dataclass(frozen=True)
class CheckedCrawl:
    """A crawl whose every part was checked (``config_of``), ready to run."""

    options: CrawlOptions
    config: CrawlConfig
    overrides: dict  # Scrapy's settings over the project's: the job folder, the stats file, logging, -s
    policy: Policy | None  # --witness-policy, read


def checked(options: CrawlOptions) -> CheckedCrawl:
    """Check what ``options`` ask (a ConfigError, one line, before the first request)."""
    policy = None
    if options.witness_policy:
        from .cmd_cosign import read_policy  # its storage imports pyarrow: only when asked

        policy = read_policy(options.witness_policy)
    overrides = scrapy_settings_of(options)
    pairs = setting_pairs(options.settings)  # -s: last, over everything
    config = config_of(options, project_settings({**overrides, **pairs}))  # checked once, handed over as built
    overrides.update(logging_settings(options.verbosity, options.progress, options.log_file, options.state_dir))
    overrides.update(pairs)
    return CheckedCrawl(options, config, overrides, policy)


def crawl_with(crawl: CheckedCrawl) -> ExitStatus:
    """Run the crawl, print its summary and return its exit status."""
    options, config, overrides, policy = crawl.options, crawl.config, crawl.overrides, crawl.policy
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
        resume=resume_command(),
        shared=shared,
    )
    if policy is not None and status in STOPPED:  # stopped by a signal: no more network waits
        again = shlex.join(["pith-archiver", "cosign", options.archive, "--policy", options.witness_policy or ""])
        say(f"cosign: skipped, the crawl was stopped; cosign later with: {again}", err=True)
    elif policy is not None and config.store is not None and config.signer is not None:
        from .cmd_cosign import cosign_after_crawl

        cosign_after_crawl(config.store, config.signer, policy)
    return status


def resume_command() -> str:
    """What to type to go on after Ctrl-C: the very command that ran, quoted for a POSIX
    shell. With a ``--jobdir`` it picks up the job's queue where it stopped; without one
    it starts over, and what was archived comes back unchanged (never stored twice)."""
    return shlex.join(["pith-archiver", *sys.argv[1:]])
