"""The crawl command's options, each declared once, in one table (``CRAWL_OPTIONS``):
its name, its help section, click's declaration (type, with its unit as the metavar,
default, help) and the Scrapy setting it gives. The command's options, its help's
sections, the settings a crawl runs with (``settings_of``) and so the crawl's
``CrawlConfig`` (``crawler.crawl_config.tuned_by``) all come from that table.

Adding a crawl option (docs/ARCHITECTURE.md, "Adding a crawl option"): a row here (and
its ``CrawlOptions`` field), plus where it takes effect: the setting's default in
``crawler.defaults`` and the component that reads it, through the config.
"""

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from crawler.crawl_config import DEFAULT_RESOLVER
from crawler.defaults import PITH_ARCHIVE, PITH_COMMIT_EVERY, PITH_PROGRESS, PITH_RECHECK_AFTER_DAYS
from storage.archive.signing_key import default_key_path

from ..keyrings import keyring_option, no_default_keys_option
from ..output import Command
from ..reporting.job_hooks import JobHooks
from .report import FailureBudget
from .setup import (
    SINGLE_WRITER_HELP,
)
from .state_dir import default_state_dir

if TYPE_CHECKING:  # a sync from a peer checks its options without Scrapy
    pass

RENAMED_SYNC = "pith-archiver sync PEER"  # what `crawl --from-archive PEER` is now
# the help's sections, in this order (click lists every option in one)
WHAT, HOW_FAR, TRUST, ARCHIVE = "What to crawl", "How far", "Trust", "The archive"
RUNNING, REPORTING = "Running", "Reporting"
# options the crawl shares with other commands, declared with them, listed in a section
DECLARED_ELSEWHERE = {REPORTING: ("quiet", "verbose", "metrics_file", "pushgateway", "notify_urls")}


class CrawlOption:
    """One row of the table: the option's parameter name (its ``CrawlOptions`` field),
    its help section (None: hidden), click's declaration (its flags and keywords, or
    ``declared``: a declaration shared with other commands) and the Scrapy setting its
    value gives when it is given (``as_setting`` turns it into the setting's value)."""

    def __init__(
        self,
        name: str,
        section: str | None,
        *flags: str,
        setting: str | None = None,
        as_setting: Callable[[Any], Any] = lambda value: value,
        declared: Callable[[Command], Command] | None = None,
        **click_keywords: Any,
    ) -> None:
        self.name, self.section, self.setting, self.as_setting = name, section, setting, as_setting
        self.declare = declared or click.option(*flags, name, **click_keywords)


CRAWL_OPTIONS = (  # in the order of the help
    CrawlOption("seeds", None, declared=click.argument("seeds", nargs=-1)),
    CrawlOption(
        "seeds_file",
        WHAT,
        "--seeds-file",
        type=click.Path(exists=True, dir_okay=False),
        help="One seed per line; '#' starts a comment.",
    ),
    CrawlOption("resolver", WHAT, "--resolver", default=None, help=f"Resolver base URL [default: {DEFAULT_RESOLVER}]."),
    CrawlOption(
        "mirrors",
        WHAT,
        "--mirror",
        multiple=True,
        help="Another source of the registry's bundles (a mirror's base URL): bundle requests are spread "
        "over the resolver and the mirrors, each host with its own politeness, and a failed one is tried "
        "elsewhere; repeatable.",
    ),
    CrawlOption(
        "mirrors_from_registry",
        WHAT,
        "--mirrors-from-registry",
        is_flag=True,
        help="Also spread bundle requests over every mirror the resolver's /pith-mirrors.json lists "
        "(verification is unchanged: trust comes from the keyring, never from a host).",
    ),
    CrawlOption("allow_hosts", WHAT, "--allow-host", multiple=True, help="Another host the crawl may fetch from."),
    CrawlOption(
        "max_records",
        HOW_FAR,
        "--max-records",
        type=click.IntRange(0),
        default=0,
        help="Stop after this many records (0: no bound).",
    ),
    CrawlOption(
        "max_depth",
        HOW_FAR,
        "--max-depth",
        type=click.IntRange(-1),
        default=-1,
        help="Link hops from the seeds (-1: no bound).",
    ),
    CrawlOption("no_follow", HOW_FAR, "--no-follow", is_flag=True, help="Fetch the seeds only."),
    CrawlOption(
        "check_state",
        HOW_FAR,
        "--check-state",
        is_flag=True,
        help="Also fetch every record's state.json and compare it with the state signed in its bundle.",
    ),
    CrawlOption(
        "check_state_sample",
        HOW_FAR,
        "--check-state-sample",
        metavar="N%",
        default=None,
        help="As --check-state, for N% of the records only (the same ones on every crawl).",
    ),
    CrawlOption(
        "cross_check",
        HOW_FAR,
        "--cross-check",
        type=click.IntRange(0),
        default=None,
        metavar="N",
        help="Also fetch the first N records from every mirror and compare the copies: a fork (a split "
        "view) is kept as evidence, flagged equivocation, and exits 1.",
        setting="PITH_CROSS_CHECK",
    ),
    CrawlOption(
        "recheck_after",
        HOW_FAR,
        "--recheck-after",
        type=click.FloatRange(0),
        default=None,
        metavar="DAYS",
        help="A crawl into an archive that holds records skips those its sitemaps date as unchanged, but asks "
        f"again (conditionally) any not confirmed for DAYS (default: {PITH_RECHECK_AFTER_DAYS:g}; 0: every "
        "record, dates ignored).",
        setting="PITH_RECHECK_AFTER_DAYS",
    ),
    CrawlOption("keyrings", TRUST, declared=keyring_option),
    CrawlOption("no_default_keys", TRUST, declared=no_default_keys_option),
    CrawlOption(
        "archive_keyrings",
        TRUST,
        "--archive-keyring",
        multiple=True,
        type=click.Path(exists=True, dir_okay=False),
        help="Also count what the archiver keys in this file committed as archived (the other workers "
        "of a shared crawl, an earlier key); repeatable.",
    ),
    CrawlOption(
        "signing_key",
        TRUST,
        "--signing-key",
        type=click.Path(dir_okay=False),
        help=f"The archiver's signing key file [default: {default_key_path()}, created on first use].",
    ),
    CrawlOption(
        "add_signing_key",
        TRUST,
        "--add-signing-key",
        is_flag=True,
        help="Let this signing key start signing an archive that other keys sign (a new machine, a new key); "
        "without it such a crawl or sync is refused.",
    ),
    CrawlOption(
        "archive",
        ARCHIVE,
        "--out",
        default=PITH_ARCHIVE,
        show_default=True,
        help="Archive: a local folder or s3://bucket/prefix.",
        setting="PITH_ARCHIVE",
    ),
    CrawlOption(
        "s3_endpoint_url",
        ARCHIVE,
        "--s3-endpoint-url",
        default=None,
        help="S3-compatible endpoint (MinIO, Ceph, R2...).",
    ),
    CrawlOption("s3_single_writer", ARCHIVE, "--s3-single-writer", is_flag=True, help=SINGLE_WRITER_HELP),
    CrawlOption(
        "commit_every",
        ARCHIVE,
        "--commit-every",
        type=click.IntRange(0),
        default=None,
        help=f"Commit a run every N bundles as the crawl goes (0: only at the end) [default: {PITH_COMMIT_EVERY}].",
        setting="PITH_COMMIT_EVERY",
    ),
    CrawlOption(
        "no_warc",
        ARCHIVE,
        "--no-warc",
        is_flag=True,
        help="Do not record the crawl's HTTP exchanges in WARC files (PITH_WARC=False).",
        setting="PITH_WARC",
        as_setting=operator.not_,
    ),
    CrawlOption(
        "log_origin",
        ARCHIVE,
        "--log-origin",
        metavar="NAME",
        help="Name this key's transparency log (a schema-less URL, e.g. archive.example.org/pith) when it has none "
        "yet [default: pith-archiver/KEY_ID].",
        setting="PITH_LOG_ORIGIN",
    ),
    CrawlOption(
        "witness_policy",
        ARCHIVE,
        "--witness-policy",
        metavar="FILE",
        help="After the crawl, have this key's log cosigned by the policy's witnesses, as `cosign` does "
        "(its lines on stderr; the crawl's exit status stays its own).",
    ),
    CrawlOption(
        "jobdir",
        RUNNING,
        "--jobdir",
        type=click.Path(file_okay=False),
        help="Keep crawl state here to resume after Ctrl-C.",
        setting="JOBDIR",
    ),
    CrawlOption(
        "frontier",
        RUNNING,
        "--frontier",
        metavar="URL",
        help="Share the crawl with other workers through this Redis "
        "(redis://host:port/db); resumable there, so not with --jobdir.",
        setting="PITH_FRONTIER",
    ),
    CrawlOption(
        "worker",
        RUNNING,
        "--worker",
        metavar="NAME",
        help="This worker's name in run ids and a crawl's frontier [default: host.pid].",
        setting="PITH_WORKER",
    ),
    CrawlOption(
        "verify_workers",
        RUNNING,
        "--verify-workers",
        type=click.IntRange(0),
        default=None,
        help="Processes that parse and verify bundles beside the crawl (0: in the crawl's own thread) "
        "[default: 1 with 2 cores or more, else 0].",
        setting="PITH_VERIFY_WORKERS",
    ),
    CrawlOption(
        "max_failures",
        RUNNING,
        "--max-failures",
        type=FailureBudget(),
        default="1%",
        show_default=True,
        help="Records that may fail to fetch (after retries and mirrors) before the crawl counts as failed "
        "(exit 4) rather than done with failures (exit 3): a count, or a share of the records found.",
    ),
    CrawlOption("settings", RUNNING, "-s", "--set", multiple=True, help="A Scrapy setting NAME=VALUE; repeatable."),
    CrawlOption(
        "progress",
        REPORTING,
        "--progress",
        type=click.Choice(["auto", "log", "off"]),
        default=PITH_PROGRESS,
        show_default=True,
        help="auto: a live line on a terminal (none when quiet), log lines otherwise.",
    ),
    CrawlOption(
        "log_file",
        REPORTING,
        "--log-file",
        type=click.Path(dir_okay=False),
        help="Scrapy's log goes here [default: a new file in the crawl's state folder; -v: stderr].",
    ),
    CrawlOption(
        "stats_json",
        REPORTING,
        "--stats-json",
        type=click.Path(dir_okay=False),
        help="Write the final crawl stats here.",
        setting="PITH_STATS_FILE",
    ),
    CrawlOption("from_archive", None, "--from-archive", metavar="PEER", hidden=True, help=f"Now `{RENAMED_SYNC}`."),
)
OPTION = {option.name: option for option in CRAWL_OPTIONS}
SECTIONS = tuple(  # by parameter name
    (title, tuple(o.name for o in CRAWL_OPTIONS if o.section == title) + DECLARED_ELSEWHERE.get(title, ()))
    for title in dict.fromkeys(o.section for o in CRAWL_OPTIONS if o.section)
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


def crawl_option_list(func: Command) -> Command:
    """The crawl command's options, the table's rows."""
    return crawl_options_named(*OPTION)(func)


def crawl_options_named(*names: str) -> Callable[[Command], Command]:
    """Some of the crawl's options, as they are in ``crawl`` (``sync`` has those that apply)."""

    def decorate(func: Command) -> Command:
        for name in reversed(names):
            func = OPTION[name].declare(func)
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
    hooks: JobHooks

    @property
    def state_dir(self) -> str:
        return default_state_dir(self.archive, self.jobdir)
