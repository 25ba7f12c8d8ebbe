"""Run the ``pith`` spider in-process with the project settings plus overrides.

Shared by ``pith-archiver crawl``, the embedded demo and the benchmarks, so every way
in runs the same Scrapy configuration.
"""

import os
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from scrapy.crawler import CrawlerProcess
from scrapy.settings import Settings
from twisted.python.failure import Failure

from crawler.crawl_config import CrawlConfig
from crawler.signals import interim_committed, operator_notice
from crawler.spiders.pith import PithSpider

from . import tuning
from .crawl_stop import CrawlStop
from .exit_status import ConfigError
from .output import DEBUG, QUIET, VERBOSE, escape_logs, say


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
