"""``pith-archiver crawl``: the main job."""

import shlex
import sys
from collections.abc import Iterable
from typing import Any

import click

from crawler.crawl_config import CrawlConfig
from crawler.frontier import SigningKeyInUse
from crawler.jobdir import JobdirInUse
from crawler.stat_keys import CrawlStats
from pith.policy import Policy

from . import tuning
from .cmd_cosign import cosign_after_crawl, read_policy
from .crawl_options import CrawlOptions, SectionedCommand, config_of
from .crawl_report import FailureBudget, outcome, report
from .crawling import logging_settings, project_settings, run_crawl
from .exit_status import EXIT_STATUS_HELP, ConfigError
from .keyrings import keyring_options
from .output import verbosity_options
from .run_hooks import run_hook_options


def _setting_pairs(values: Iterable[str]) -> dict[str, str]:
    pairs = {}
    for value in values:
        name, sep, setting = value.partition("=")
        if not sep:
            raise ConfigError(f"-s {value!r} is not NAME=VALUE")
        pairs[name] = setting
    return pairs


@click.command(cls=SectionedCommand, epilog=EXIT_STATUS_HELP)
@click.argument("seeds", nargs=-1)
@click.option(
    "--seeds-file", type=click.Path(exists=True, dir_okay=False), help="One seed per line; '#' starts a comment."
)
@click.option("--resolver", default=None, help="Resolver base URL [default: https://pith.science].")
@click.option(
    "--out", "archive", default="archive", show_default=True, help="Archive: a local folder or s3://bucket/prefix."
)
@click.option("--s3-endpoint-url", default=None, help="S3-compatible endpoint (MinIO, Ceph, R2...).")
@keyring_options
@click.option(
    "--archive-keyring",
    "archive_keyrings",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Also count what the archiver keys in this file committed as archived (the other workers "
    "of a shared crawl, an earlier key); repeatable.",
)
@click.option("--max-records", type=click.IntRange(0), default=0, help="Stop after this many records (0: no bound).")
@click.option("--max-depth", type=click.IntRange(-1), default=-1, help="Link hops from the seeds (-1: no bound).")
@click.option("--no-follow", is_flag=True, help="Fetch the seeds only.")
@click.option(
    "--check-state",
    is_flag=True,
    help="Also fetch every record's state.json and compare it with the state signed in its bundle.",
)
@click.option(
    "--check-state-sample",
    metavar="N%",
    default=None,
    help="As --check-state, for N% of the records only (the same ones on every run).",
)
@click.option("--jobdir", type=click.Path(file_okay=False), help="Keep crawl state here to resume after Ctrl-C.")
@click.option(
    "--frontier",
    metavar="URL",
    help="Share the crawl with other workers through this Redis "
    "(redis://host:port/db); resumable there, so not with --jobdir.",
)
@click.option("--worker", metavar="NAME", help="This worker's name in run ids and the frontier [default: host.pid].")
@click.option(
    "--witness-policy",
    metavar="FILE",
    help="After the crawl, have this key's log cosigned by the policy's witnesses, as `cosign` does "
    "(its lines on stderr; the crawl's exit status stays its own).",
)
@click.option(
    "--log-origin",
    metavar="NAME",
    help="Name this key's transparency log (a schema-less URL, e.g. archive.example.org/pith) when it has none "
    "yet [default: pith-archiver/KEY_ID].",
)
@click.option(
    "--mirror",
    "mirrors",
    multiple=True,
    help="Another source of the registry's bundles (a mirror's base URL): bundle requests are spread over the "
    "resolver and the mirrors, each host with its own politeness, and a failed one is tried elsewhere; repeatable.",
)
@click.option(
    "--mirrors-from-registry",
    is_flag=True,
    help="Also spread bundle requests over every mirror the resolver's /pith-mirrors.json lists "
    "(verification is unchanged: trust comes from the keyring, never from a host).",
)
@click.option(
    "--cross-check",
    type=click.IntRange(0),
    default=None,
    metavar="N",
    help="Also fetch the first N records from every mirror and compare the copies: a fork (a split "
    "view) is kept as evidence, flagged equivocation, and exits 1.",
)
@click.option("--allow-host", "allow_hosts", multiple=True, help="Another host the crawl may fetch from.")
@click.option(
    "--progress",
    type=click.Choice(["auto", "log", "off"]),
    default="auto",
    show_default=True,
    help="auto: a live line on a terminal (none when quiet), log lines otherwise.",
)
@click.option(
    "--max-failures",
    type=FailureBudget(),
    default="1%",
    show_default=True,
    help="Records that may fail to fetch (after retries and mirrors) before the run counts as failed "
    "(exit 4) rather than done with failures (exit 3): a count, or a share of the records found.",
)
@click.option(
    "--log-file",
    type=click.Path(dir_okay=False),
    help="Scrapy's log goes here [default: a new file in the crawl's state folder; -v: stderr].",
)
@click.option(
    "--signing-key",
    type=click.Path(dir_okay=False),
    help="The archiver's signing key file [default: created on first use in ~/.config/pith-archiver].",
)
@click.option(
    "--commit-every",
    type=click.IntRange(0),
    default=None,
    help="Commit a manifest every N bundles as the crawl goes (0: only at the end) [default: 10000].",
)
@click.option(
    "--verify-workers",
    type=click.IntRange(0),
    default=None,
    help="Processes that parse and verify bundles beside the crawl (0: in the crawl's own thread) "
    "[default: 1 with 2 cores or more, else 0].",
)
@click.option(
    "--no-warc",
    is_flag=True,
    help="Do not record the crawl's HTTP exchanges in WARC files (PITH_WARC=False).",
)
@click.option("--stats-json", type=click.Path(dir_okay=False), help="Write the final crawl stats here.")
@click.option("-s", "--set", "settings", multiple=True, help="A Scrapy setting NAME=VALUE; repeatable.")
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
    if not options.seeds and not options.seeds_file and options.resolver is None:
        from .demo import run_demo

        sys.exit(run_demo(options))
    policy = read_policy(options.witness_policy) if options.witness_policy else None
    overrides: dict[str, Any] = {}
    if options.jobdir:
        overrides["JOBDIR"] = options.jobdir
    if options.frontier:
        overrides["PITH_FRONTIER"] = options.frontier
    if options.stats_json:
        overrides["PITH_STATS_FILE"] = options.stats_json
    if options.verify_workers is not None:
        overrides["PITH_VERIFY_WORKERS"] = options.verify_workers
    pairs = _setting_pairs(options.settings)  # -s: last, over everything
    config = config_of(options, project_settings({**overrides, **pairs}))  # checked once, handed over as built
    overrides.update(logging_settings(options.verbosity, options.progress, options.log_file, options.state_dir))
    overrides.update(pairs)
    sys.exit(crawl_with(options, config, overrides, policy, resume_command(options.jobdir)))


def crawl_with(
    options: CrawlOptions, config: CrawlConfig, overrides: dict, policy: Policy | None = None, resume: str = ''
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
    if policy is not None and config.store is not None and config.signer is not None:
        cosign_after_crawl(config.store, config.signer, policy)
    return status


def resume_command(jobdir: str | None) -> str:
    """What to type to go on after Ctrl-C: the same command; with a --jobdir it picks
    up the queue where it stopped, without one it starts over and skips what is archived."""
    command = shlex.join(["pith-archiver", *sys.argv[1:]])
    return command if jobdir else f"{command} --jobdir DIR (or the same command: archived records are skipped)"
