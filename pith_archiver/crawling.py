"""Run the ``pith`` spider in-process with the project settings plus overrides.

Shared by ``pith-archiver crawl``, the embedded demo and the benchmarks, so every way
in runs the same Scrapy configuration.
"""

import hashlib
from pathlib import Path

from scrapy.crawler import CrawlerProcess
from scrapy.settings import Settings

from crawler.spiders.pith import PithSpider
from storage import layout


def project_settings(overrides: dict | None = None) -> Settings:
    settings = Settings()
    settings.setmodule("crawler.settings", priority="project")
    for name, value in (overrides or {}).items():
        settings.set(name, value, priority="cmdline")
    return settings


def default_state_dir(archive: str, jobdir: str | None) -> str:
    """Where validators for conditional requests live: beside the job, or beside a local
    archive, or in the user's cache for a remote one (keyed by its URI)."""
    if jobdir:
        return str(Path(jobdir) / "pith-state")
    if "://" not in archive:
        return str(Path(archive) / layout.LOCAL_STATE)
    key = hashlib.sha256(archive.encode()).hexdigest()[:16]
    return str(Path.home() / ".cache" / "pith-archiver" / "state" / key)


def run_crawl(spider_args: dict, overrides: dict) -> dict:
    """Crawl until done (or stopped by Ctrl-C, which commits what was archived) and
    return the final Scrapy stats."""
    process = CrawlerProcess(project_settings(overrides))
    crawler = process.create_crawler(PithSpider)
    failures = []
    process.crawl(crawler, **spider_args).addErrback(failures.append)
    process.start()
    if failures:  # the crawl could not start (a component refused): say why, not how
        failures[0].raiseException()
    return crawler.stats.get_stats()
