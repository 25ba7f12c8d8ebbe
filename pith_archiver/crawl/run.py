"""One crawl from the crawl command's options: its Scrapy settings (each option's
setting, from the option table), its config, checked (``config_of``), run in-process
with the project settings plus overrides (``run_crawl``), reported.

``pith-archiver crawl``, the embedded demo and the benchmarks all come here, so every
option means the same in each (``--stats-json``, ``--log-file``, ``--jobdir``, ``-s``,
a witness policy) and every way in runs the same Scrapy configuration: the demo only
chooses the seeds and the resolver first.
"""

import os
import shlex
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from scrapy.crawler import CrawlerProcess
from scrapy.settings import Settings
from twisted.python.failure import Failure

from crawler.crawl_config import DEFAULT_RESOLVER, CrawlConfig, tuned_by
from crawler.frontier import SigningKeyInUse
from crawler.scheduling.jobdir import JobdirInUse
from crawler.seeds import SeedError, SeedList
from crawler.signals import interim_committed, operator_notice
from crawler.spiders.pith import PithSpider
from crawler.stat_keys import CrawlStats
from pith.policy import Policy

from ..exit_status import ConfigError, ExitStatus
from ..keyrings import build_keyring
from ..output import DEBUG, QUIET, VERBOSE, escape_logs, say
from . import tuning
from .options import CRAWL_OPTIONS, CrawlOptions
from .report import STOPPED, outcome, report
from .setup import (
    check_archive_keyring,
    check_base_url,
    check_frontier,
    check_signing_key,
    check_store,
    signing_key_file,
)
from .stop import CrawlStop

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


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
        from ..cosigning import read_policy  # its storage imports pyarrow: only when asked

        policy = read_policy(options.witness_policy)
    overrides = settings_of(options)
    pairs = setting_pairs(options.settings)  # -s: last, over everything
    config = config_of(options, project_settings({**overrides, **pairs}))  # checked once, handed over as built
    overrides.update(logging_settings(options.verbosity, options.progress, options.log_file, options.state_dir))
    overrides.update(pairs)
    return CheckedCrawl(options, config, overrides, policy)


def config_of(options: CrawlOptions, settings: "BaseSettings") -> CrawlConfig:
    """The crawl's config, each part checked (a ConfigError, one line, before the first
    request); ``settings`` (the project's and ``-s``) give what no option does."""
    try:
        seeds = SeedList(options.seeds, options.seeds_file)
    except SeedError as exc:
        raise ConfigError(f"seed: {exc}") from None
    if options.jobdir and options.frontier:
        raise ConfigError("--jobdir and --frontier do not go together: the frontier keeps the crawl's state")
    if options.check_state and options.check_state_sample is not None:
        raise ConfigError("--check-state checks every record: give it or --check-state-sample N%, not both")
    if options.no_follow and options.max_depth >= 0:
        raise ConfigError("--max-depth counts link hops, and --no-follow follows none: give one of them")
    if options.frontier and options.s3_single_writer:
        raise ConfigError("--s3-single-writer and --frontier do not go together: a shared crawl has several writers")
    tuned = tuned_by(settings)  # the options that give a setting are in it (settings_of)
    if options.check_state or options.check_state_sample is not None:
        sample = options.check_state_sample
        tuned["check_state"] = 1.0 if options.check_state or sample is None else _share(sample)
    tuned["state_dir"] = options.state_dir
    if options.frontier:
        check_frontier(options.frontier)
    signing_key_file(options.signing_key)  # before the archive's folder is made
    keyring = build_keyring(options.keyrings, options.no_default_keys, s3_endpoint_url=options.s3_endpoint_url)
    archive_keyring = check_archive_keyring(options.archive_keyrings)
    return CrawlConfig(
        seeds=seeds,
        resolver=DEFAULT_RESOLVER if options.resolver is None else check_base_url(options.resolver, "--resolver"),
        mirrors=tuple(check_base_url(mirror, "--mirror") for mirror in options.mirrors),
        mirrors_from_registry=options.mirrors_from_registry,
        allow_hosts=options.allow_hosts,
        max_records=options.max_records,
        max_depth=options.max_depth,
        follow=not options.no_follow,
        keyring=keyring,  # a crawl never runs without one
        archive_keyring=archive_keyring,
        store=(store := check_store(options.archive, options.s3_endpoint_url, options.s3_single_writer)),
        # last: it may create the key
        signer=check_signing_key(options.signing_key, store, options.add_signing_key, archive_keyring),
        **tuned,
    )


def settings_of(options: CrawlOptions) -> dict[str, Any]:
    """The Scrapy settings the options given set (the table's ``setting``): the crawl's
    config reads them (``tuned_by``), as Scrapy's plumbing does (``JOBDIR``, the frontier
    add-on, which acts before the spider exists)."""
    given = {
        name: value for name, value in vars(options).items() if not (value is None or value is False or value == ())
    }
    return {
        option.setting: option.as_setting(given[option.name])
        for option in CRAWL_OPTIONS
        if option.setting is not None and option.name in given
    }


def setting_pairs(values: Iterable[str]) -> dict[str, str]:
    """``-s NAME=VALUE``, each a Scrapy setting."""
    pairs = {}
    for value in values:
        name, sep, setting = value.partition("=")
        if not sep:
            raise ConfigError(f"-s {value!r} is not NAME=VALUE")
        pairs[name] = setting
    return pairs


def _share(text: str) -> float:
    """``N%`` (or a bare N) as a share between 0 and 1."""
    try:
        percent = float(text.strip().removesuffix("%"))
    except ValueError:
        percent = -1.0
    if not 0 <= percent <= 100:
        raise click.BadParameter(f"{text!r} is not a percentage from 0% to 100%", param_hint="--check-state-sample")
    return percent / 100


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
        from ..cosigning import cosign_after_crawl

        cosign_after_crawl(config.store, config.signer, policy)
    return status


def resume_command() -> str:
    """What to type to go on after Ctrl-C: the very command that ran, quoted for a POSIX
    shell. With a ``--jobdir`` it picks up the job's queue where it stopped; without one
    it starts over, and what was archived comes back unchanged (never stored twice)."""
    return shlex.join(["pith-archiver", *sys.argv[1:]])


def project_settings(overrides: dict | None = None) -> Settings:
    settings = Settings()
    settings.setmodule("crawler.settings", priority="project")
    for name, value in (overrides or {}).items():
        settings.set(name, value, priority="cmdline")
    return settings


def logging_settings(verbosity: int, progress: str, log_file: str | None, state_dir: str) -> dict:
    """Scrapy's log (banner, settings, stats dump) goes to a file unless -v asks for it
    on stderr, so a terminal shows only the progress line and the summary, and cron
    only what went wrong."""
    progress = "off" if verbosity <= QUIET and progress == "auto" else progress
    settings = {"PITH_PROGRESS": progress, "LOG_LEVEL": "DEBUG" if verbosity >= DEBUG else "INFO"}
    if log_file or verbosity < VERBOSE:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        path = Path(log_file or Path(state_dir) / "logs" / f"crawl-{stamp}-{os.getpid()}.log")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        except OSError as exc:
            raise ConfigError(f"--log-file {path}: {exc.strerror or exc}") from None
        settings["LOG_FILE"] = str(path)
    return settings


def run_crawl(config: CrawlConfig, overrides: dict, on_interim_commit: Callable[[dict], None] | None = None) -> dict:
    """Crawl what ``config`` describes until done (or stopped by a signal, which commits what was archived:
    ``crawl_stop``) and return the final Scrapy stats; ``on_interim_commit(stats)`` after each interim commit."""
    tuning.economise()
    tuning.without_unused_libraries()
    process = CrawlerProcess(project_settings(overrides))
    crawler = process.create_crawler(PithSpider)
    crawler.signals.connect(_print_notice, signal=operator_notice)
    if on_interim_commit is not None:

        def interim_done(**_: Any) -> None:
            on_interim_commit(crawler.stats.get_stats())

        crawler.signals.connect(interim_done, signal=interim_committed, weak=False)
    failures: list[Failure] = []
    process.crawl(crawler, config=config).addErrback(failures.append)
    escape_logs()  # on the root handler Scrapy has just installed for this crawl (its log file, or stderr with -v)
    stop = CrawlStop(crawler, process.settings.getfloat("PITH_STOP_GRACE"))
    with tuning.root_log_level(process.settings.get("LOG_LEVEL")):
        stop.install()
        try:
            process.start(install_signal_handlers=False)  # ours, not Scrapy's (crawl_stop)
        finally:
            stop.uninstall()
    if failures:  # the crawl could not start (a component refused): say why, not how
        failures[0].raiseException()
    return crawler.stats.get_stats()


def _print_notice(line: str) -> None:
    say(f"notice: {line}", err=True)
