"""The crawl command's options, as one object, and the one function that turns them
into the crawl's ``CrawlConfig`` (``crawler.crawl_config``).

Adding a crawl option: its ``click.option`` in ``cmd_crawl`` (named in a help section
of ``SECTIONS``), its field in ``CrawlOptions``, the field it fills in ``CrawlConfig``
(and there the setting ``scrapy crawl`` reads, ``from_settings``), here the line that
copies it across, the component that reads it, and the docs.
"""

from dataclasses import dataclass

import click
from scrapy.settings import BaseSettings

from crawler.crawl_config import DEFAULT_RESOLVER, CrawlConfig, tuned_by
from crawler.seeds import SeedError, SeedList

from .crawl_setup import check_archive_keyring, check_base_url, check_frontier, check_signing_key, check_store
from .crawling import default_state_dir
from .exit_status import ConfigError
from .keyrings import build_keyring
from .run_hooks import RunHooks

# the crawl command's help, in sections (click lists every option in one); by parameter name
SECTIONS = (
    ("What to crawl", ("seeds_file", "resolver", "mirrors", "mirrors_from_registry", "allow_hosts")),
    ("How far", ("max_records", "max_depth", "no_follow", "check_state", "check_state_sample", "cross_check")),
    ("Trust", ("keyrings", "no_default_keys", "archive_keyrings", "signing_key")),
    ("The archive", ("archive", "s3_endpoint_url", "commit_every", "no_warc", "log_origin", "witness_policy")),
    ("Running", ("jobdir", "frontier", "worker", "verify_workers", "max_failures", "settings")),
    ("Reporting", ("progress", "log_file", "stats_json", "quiet", "verbose", "metrics_file", "pushgateway")),
)


class SectionedCommand(click.Command):
    """A command whose help lists its options in ``SECTIONS``, the others last."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records = {param.name: param.get_help_record(ctx) for param in self.get_params(ctx)}
        for title, names in (*SECTIONS, ("Other options", tuple(records))):
            rows = [record for name in names if (record := records.pop(name, None)) is not None]
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


@dataclass(frozen=True)
class CrawlOptions:
    """What ``pith-archiver crawl`` was given, as click parsed it."""

    seeds: tuple[str, ...]
    seeds_file: str | None
    resolver: str | None
    mirrors: tuple[str, ...]
    mirrors_from_registry: bool
    allow_hosts: tuple[str, ...]
    max_records: int
    max_depth: int
    no_follow: bool
    check_state: bool
    check_state_sample: str | None
    cross_check: int | None
    keyrings: tuple[str, ...]
    no_default_keys: bool
    archive_keyrings: tuple[str, ...]
    signing_key: str | None
    archive: str
    s3_endpoint_url: str | None
    commit_every: int | None
    no_warc: bool
    log_origin: str | None
    witness_policy: str | None
    jobdir: str | None
    frontier: str | None
    worker: str | None
    verify_workers: int | None
    max_failures: tuple[float, bool]
    settings: tuple[str, ...]
    progress: str
    log_file: str | None
    stats_json: str | None
    verbosity: int
    hooks: RunHooks

    @property
    def state_dir(self) -> str:
        return default_state_dir(self.archive, self.jobdir)


def config_of(options: CrawlOptions, settings: BaseSettings) -> CrawlConfig:
    """The crawl's config, each part checked (a ConfigError, one line, before the first
    request); ``settings`` (the project's and ``-s``) give what no option does."""
    try:
        seeds = SeedList(options.seeds, options.seeds_file)
    except SeedError as exc:
        raise ConfigError(f"seed: {exc}") from None
    if options.jobdir and options.frontier:
        raise ConfigError("--jobdir and --frontier do not go together: the frontier keeps the crawl's state")
    tuned = tuned_by(settings)
    if options.check_state or options.check_state_sample is not None:
        sample = options.check_state_sample
        tuned["check_state"] = 1.0 if options.check_state or sample is None else _share(sample)
    if options.cross_check is not None:
        tuned["cross_check"] = options.cross_check
    if options.commit_every is not None:
        tuned["commit_every"] = options.commit_every
    if options.no_warc:
        tuned["warc"] = None
    tuned["log_origin"] = options.log_origin or tuned["log_origin"]
    tuned["worker"] = options.worker or tuned["worker"]
    tuned["state_dir"] = options.state_dir
    if options.frontier:
        check_frontier(options.frontier)
    return CrawlConfig(
        seeds=seeds,
        resolver=check_base_url(options.resolver, "--resolver") if options.resolver else DEFAULT_RESOLVER,
        mirrors=tuple(check_base_url(mirror, "--mirror") for mirror in options.mirrors),
        mirrors_from_registry=options.mirrors_from_registry,
        allow_hosts=options.allow_hosts,
        max_records=options.max_records,
        max_depth=options.max_depth,
        follow=not options.no_follow,
        keyring=build_keyring(options.keyrings, options.no_default_keys),  # a crawl never runs without one
        archive_keyring=check_archive_keyring(options.archive_keyrings),
        store=check_store(options.archive, options.s3_endpoint_url),
        signer=check_signing_key(options.signing_key),  # last: it may create the key
        **tuned,
    )


def _share(text: str) -> float:
    """``N%`` (or a bare N) as a share between 0 and 1."""
    try:
        percent = float(text.strip().removesuffix("%"))
    except ValueError:
        percent = -1.0
    if not 0 <= percent <= 100:
        raise click.BadParameter(f"{text!r} is not a percentage from 0% to 100%", param_hint="--check-state-sample")
    return percent / 100
