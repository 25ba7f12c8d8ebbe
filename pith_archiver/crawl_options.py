"""The crawl command's options, as one object, and the one function that turns them
into the crawl's ``CrawlConfig`` (``crawler.crawl_config``).

Adding a crawl option (docs/ARCHITECTURE.md, "Adding a crawl option"): here its
``click.option`` (in ``crawl_option_list``, named in a section of ``SECTIONS``), its
``CrawlOptions`` field and the line of ``config_of`` that copies it into the config;
in ``crawler.crawl_config`` the field it fills and how ``scrapy crawl`` gives it;
the component that reads it; the docs.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from crawler.crawl_config import DEFAULT_RESOLVER, CrawlConfig, tuned_by
from crawler.defaults import PITH_ARCHIVE, PITH_COMMIT_EVERY, PITH_PROGRESS, PITH_RECHECK_AFTER_DAYS
from crawler.seeds import SeedError, SeedList
from storage.archive.signing_key import default_key_path

from .crawl_report import FailureBudget
from .crawl_setup import (
    SINGLE_WRITER_HELP,
    check_archive_keyring,
    check_base_url,
    check_frontier,
    check_signing_key,
    check_store,
    signing_key_file,
)
from .exit_status import ConfigError
from .keyrings import build_keyring, keyring_options
from .output import Command, echo
from .run_hooks import RunHooks
from .state_dir import default_state_dir

if TYPE_CHECKING:  # a sync from a peer checks its options without Scrapy
    from scrapy.settings import BaseSettings

    from .peer_sync import SyncOptions

# the crawl command's help, in sections (click lists every option in one); by parameter name
SECTIONS = (
    ("What to crawl", ("seeds_file", "resolver", "mirrors", "mirrors_from_registry", "allow_hosts")),
    (
        "How far",
        ("max_records", "max_depth", "no_follow", "check_state", "check_state_sample", "cross_check", "recheck_after"),
    ),
    ("Trust", ("keyrings", "no_default_keys", "archive_keyrings", "signing_key", "add_signing_key")),
    (
        "The archive",
        ("archive", "s3_endpoint_url", "s3_single_writer", "commit_every", "no_warc", "log_origin", "witness_policy"),
    ),
    ("Running", ("jobdir", "frontier", "worker", "verify_workers", "max_failures", "settings")),
    (
        "Reporting",
        ("progress", "log_file", "stats_json", "quiet", "verbose", "metrics_file", "pushgateway", "notify_urls"),
    ),
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


RENAMED_SYNC = "pith-archiver sync PEER"  # what `crawl --from-archive PEER` is now

# the crawl command's options (click's decorators) by parameter name, in the order of its help
CRAWL_OPTIONS: dict[str, Callable[[Command], Command]] = {
    "seeds": click.argument("seeds", nargs=-1),
    "seeds_file": click.option(
        "--seeds-file",
        type=click.Path(exists=True, dir_okay=False),
        help="One seed per line; '#' starts a comment.",
    ),
    "resolver": click.option("--resolver", default=None, help=f"Resolver base URL [default: {DEFAULT_RESOLVER}]."),
    "archive": click.option(
        "--out",
        "archive",
        default=PITH_ARCHIVE,
        show_default=True,
        help="Archive: a local folder or s3://bucket/prefix.",
    ),
    "s3_endpoint_url": click.option(
        "--s3-endpoint-url", default=None, help="S3-compatible endpoint (MinIO, Ceph, R2...)."
    ),
    "s3_single_writer": click.option("--s3-single-writer", is_flag=True, help=SINGLE_WRITER_HELP),
    "keyrings": keyring_options,
    "archive_keyrings": click.option(
        "--archive-keyring",
        "archive_keyrings",
        multiple=True,
        type=click.Path(exists=True, dir_okay=False),
        help="Also count what the archiver keys in this file committed as archived (the other workers "
        "of a shared crawl, an earlier key); repeatable.",
    ),
    "max_records": click.option(
        "--max-records", type=click.IntRange(0), default=0, help="Stop after this many records (0: no bound)."
    ),
    "max_depth": click.option(
        "--max-depth", type=click.IntRange(-1), default=-1, help="Link hops from the seeds (-1: no bound)."
    ),
    "no_follow": click.option("--no-follow", is_flag=True, help="Fetch the seeds only."),
    "check_state": click.option(
        "--check-state",
        is_flag=True,
        help="Also fetch every record's state.json and compare it with the state signed in its bundle.",
    ),
    "check_state_sample": click.option(
        "--check-state-sample",
        metavar="N%",
        default=None,
        help="As --check-state, for N% of the records only (the same ones on every run).",
    ),
    "jobdir": click.option(
        "--jobdir", type=click.Path(file_okay=False), help="Keep crawl state here to resume after Ctrl-C."
    ),
    "frontier": click.option(
        "--frontier",
        metavar="URL",
        help="Share the crawl with other workers through this Redis "
        "(redis://host:port/db); resumable there, so not with --jobdir.",
    ),
    "worker": click.option(
        "--worker", metavar="NAME", help="This worker's name in run ids and a crawl's frontier [default: host.pid]."
    ),
    "witness_policy": click.option(
        "--witness-policy",
        metavar="FILE",
        help="After the crawl, have this key's log cosigned by the policy's witnesses, as `cosign` does "
        "(its lines on stderr; the crawl's exit status stays its own).",
    ),
    "log_origin": click.option(
        "--log-origin",
        metavar="NAME",
        help="Name this key's transparency log (a schema-less URL, e.g. archive.example.org/pith) when it has none "
        "yet [default: pith-archiver/KEY_ID].",
    ),
    "mirrors": click.option(
        "--mirror",
        "mirrors",
        multiple=True,
        help="Another source of the registry's bundles (a mirror's base URL): bundle requests are spread "
        "over the resolver and the mirrors, each host with its own politeness, and a failed one is tried "
        "elsewhere; repeatable.",
    ),
    "mirrors_from_registry": click.option(
        "--mirrors-from-registry",
        is_flag=True,
        help="Also spread bundle requests over every mirror the resolver's /pith-mirrors.json lists "
        "(verification is unchanged: trust comes from the keyring, never from a host).",
    ),
    "cross_check": click.option(
        "--cross-check",
        type=click.IntRange(0),
        default=None,
        metavar="N",
        help="Also fetch the first N records from every mirror and compare the copies: a fork (a split "
        "view) is kept as evidence, flagged equivocation, and exits 1.",
    ),
    "recheck_after": click.option(
        "--recheck-after",
        type=click.FloatRange(0),
        default=None,
        metavar="DAYS",
        help="A re-run skips held records its sitemaps date as unchanged, but asks again (conditionally) any "
        f"not confirmed for DAYS (default: {PITH_RECHECK_AFTER_DAYS:g}; 0: every record, dates ignored).",
    ),
    "allow_hosts": click.option(
        "--allow-host", "allow_hosts", multiple=True, help="Another host the crawl may fetch from."
    ),
    "from_archive": click.option(  # renamed `sync PEER`: works, with a notice, until the next release
        "--from-archive", metavar="PEER", hidden=True, help=f"Now `{RENAMED_SYNC}`."
    ),
    "progress": click.option(
        "--progress",
        type=click.Choice(["auto", "log", "off"]),
        default=PITH_PROGRESS,
        show_default=True,
        help="auto: a live line on a terminal (none when quiet), log lines otherwise.",
    ),
    "max_failures": click.option(
        "--max-failures",
        type=FailureBudget(),
        default="1%",
        show_default=True,
        help="Records that may fail to fetch (after retries and mirrors) before the run counts as failed "
        "(exit 4) rather than done with failures (exit 3): a count, or a share of the records found.",
    ),
    "log_file": click.option(
        "--log-file",
        type=click.Path(dir_okay=False),
        help="Scrapy's log goes here [default: a new file in the crawl's state folder; -v: stderr].",
    ),
    "signing_key": click.option(
        "--signing-key",
        type=click.Path(dir_okay=False),
        help=f"The archiver's signing key file [default: {default_key_path()}, created on first use].",
    ),
    "add_signing_key": click.option(
        "--add-signing-key",
        is_flag=True,
        help="Let this signing key start signing an archive that other keys sign (a new machine, a new key); "
        "without it such a run is refused.",
    ),
    "commit_every": click.option(
        "--commit-every",
        type=click.IntRange(0),
        default=None,
        help=f"Commit a manifest every N bundles as the run goes (0: only at the end) [default: {PITH_COMMIT_EVERY}].",
    ),
    "verify_workers": click.option(
        "--verify-workers",
        type=click.IntRange(0),
        default=None,
        help="Processes that parse and verify bundles beside the crawl (0: in the crawl's own thread) "
        "[default: 1 with 2 cores or more, else 0].",
    ),
    "no_warc": click.option(
        "--no-warc",
        is_flag=True,
        help="Do not record the run's HTTP exchanges in WARC files (PITH_WARC=False).",
    ),
    "stats_json": click.option(
        "--stats-json", type=click.Path(dir_okay=False), help="Write the final crawl stats here."
    ),
    "settings": click.option("-s", "--set", "settings", multiple=True, help="A Scrapy setting NAME=VALUE; repeatable."),
}


def crawl_option_list(func: Command) -> Command:
    """The crawl command's options, each of them named in a section of ``SECTIONS`` and
    a field of ``CrawlOptions``."""
    return crawl_options_named(*CRAWL_OPTIONS)(func)


def crawl_options_named(*names: str) -> Callable[[Command], Command]:
    """Some of the crawl's options, as they are in ``crawl`` (``sync`` has those that apply)."""

    def decorate(func: Command) -> Command:
        for name in reversed(names):
            func = CRAWL_OPTIONS[name](func)
        return func

    return decorate


@dataclass(frozen=True)
class CrawlOptions:
    """What ``pith-archiver crawl`` was given, as click parsed it."""

    seeds: tuple[str, ...]
    seeds_file: str | None
    resolver: str | None
    mirrors: tuple[str, ...]
    mirrors_from_registry: bool
    allow_hosts: tuple[str, ...]
    from_archive: str | None
    max_records: int
    max_depth: int
    no_follow: bool
    check_state: bool
    check_state_sample: str | None
    cross_check: int | None
    recheck_after: float | None
    keyrings: tuple[str, ...]
    no_default_keys: bool
    archive_keyrings: tuple[str, ...]
    signing_key: str | None
    add_signing_key: bool
    archive: str
    s3_endpoint_url: str | None
    s3_single_writer: bool
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
    tuned = tuned_by(settings)
    if options.check_state or options.check_state_sample is not None:
        sample = options.check_state_sample
        tuned["check_state"] = 1.0 if options.check_state or sample is None else _share(sample)
    if options.cross_check is not None:
        tuned["cross_check"] = options.cross_check
    if options.recheck_after is not None:
        tuned["recheck_after_days"] = options.recheck_after
    if options.commit_every is not None:
        tuned["commit_every"] = options.commit_every
    if options.no_warc:
        tuned["warc"] = None
    tuned["log_origin"] = options.log_origin or tuned["log_origin"]
    tuned["worker"] = options.worker or tuned["worker"]
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


def scrapy_settings_of(options: CrawlOptions) -> dict[str, Any]:
    """What of the options is Scrapy's plumbing rather than the crawl's config: its job
    folder, the frontier add-on (it acts before the spider exists), the stats file and
    the verifier's processes."""
    settings: dict[str, Any] = {}
    if options.jobdir:
        settings["JOBDIR"] = options.jobdir
    if options.frontier:
        settings["PITH_FRONTIER"] = options.frontier
    if options.stats_json:
        settings["PITH_STATS_FILE"] = options.stats_json
    if options.verify_workers is not None:
        settings["PITH_VERIFY_WORKERS"] = options.verify_workers
    return settings


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


def renamed_sync(options: CrawlOptions) -> "SyncOptions":
    """``crawl --from-archive PEER``, renamed ``sync PEER``: the sync's options, with a
    one-line notice; a crawl option given that a sync does not take is refused (one line,
    exit 2), never ignored. It goes in the next release."""
    from .peer_sync import SyncOptions

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
            "(it is now `pith-archiver sync PEER`)"
        )
    echo(
        f"notice: `crawl --from-archive PEER` is now `{RENAMED_SYNC}`; the old form goes in the next release", err=True
    )
    return SyncOptions(peer=options.from_archive or "", **{name: getattr(options, name) for name in taken})
