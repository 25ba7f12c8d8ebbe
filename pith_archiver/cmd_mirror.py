"""``pith-archiver corpus generate`` and ``pith-archiver serve``: a signed test corpus
and a conforming Pith mirror of a corpus or an archive, with optional fault injection."""

import dataclasses
import functools
import tempfile
from typing import Any
from pathlib import Path

import click

from mirror.archive_source import ArchiveSource, NothingServable
from mirror.corpus import generate_corpus
from mirror.faults import FaultPlan
from mirror.limits import CONNECTION_CAP, ServerLimits
from mirror.resolver import SiteOptions
from mirror.runner import serve_until_signalled
from mirror.server import MirrorServer
from mirror.source import BUNDLES_DIR, KEYRING_NAME, CorpusDirectory, RecordSource
from mirror.virtual import VirtualCorpus
from pith.mint import REGISTRY_BASE
from storage.stores import StorageError
from storage.reader import NothingCommitted
from .archive_reading import TRUST_HELP, is_archive, nothing_trusted, open_archive, trust_options
from .exit_status import ConfigError, RunFailed
from .output import Command, log_to_stderr, say, verbosity_options

FAULT_FIELDS = [f.name for f in dataclasses.fields(FaultPlan)]


@click.group()
def corpus() -> None:
    """Test corpora of signed bundles."""


@corpus.command()
@click.option("--records", type=click.IntRange(0), required=True, help="How many bundles to mint.")
@click.option("--out", type=click.Path(file_okay=False), required=True, help="A new or empty directory.")
@click.option("--seed", type=int, default=1, show_default=True, help="Same seed, same bytes.")
@click.option(
    "--base-url",
    default=REGISTRY_BASE,
    show_default=True,
    help="Base of the links and mirror hints written into minted bundles.",
)
@verbosity_options
def generate(records: int, out: str, seed: int, base_url: str, verbosity: int) -> None:
    """Mint RECORDS bundles in the registry's format, signed by a test key derived from
    SEED, plus the real registry bundles; write DIR/bundles/, DIR/keyring.json (verifies
    them all) and DIR/corpus.json (the index `serve` starts from)."""
    try:
        catalog = generate_corpus(out, records, seed, base_url)
    except FileExistsError as exc:
        raise ConfigError(str(exc)) from None
    say(
        f"wrote {len(catalog)} bundles ({records} minted, {len(catalog) - records} real) to "
        f"{out}/{BUNDLES_DIR}; verify them with --keyring {out}/{KEYRING_NAME}"
    )


def limit_options(command: Command) -> Command:
    """The deadlines and the connection cap of a public mirror, handed to ``command``
    as one ServerLimits ``limits``."""

    @functools.wraps(command)
    def with_limits(
        *args: Any,
        header_timeout: float,
        body_timeout: float,
        idle_timeout: float,
        send_timeout: float,
        max_connections: int | None,
        **kwargs: Any,
    ) -> Any:
        try:
            limits = ServerLimits(header_timeout, body_timeout, idle_timeout, send_timeout, max_connections)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        return command(*args, limits=limits, **kwargs)

    seconds = click.FloatRange(0, min_open=True)
    for option in reversed(
        [
            click.option(
                "--header-timeout",
                type=seconds,
                default=ServerLimits.header_timeout,
                show_default=True,
                help="Seconds a client has to send a request's head (from the connection's opening or "
                "the request's first byte); then 408 and close.",
            ),
            click.option(
                "--body-timeout",
                type=seconds,
                default=ServerLimits.body_timeout,
                show_default=True,
                help="Seconds a client has to send the request body it declared; then 408 and close.",
            ),
            click.option(
                "--idle-timeout",
                type=seconds,
                default=ServerLimits.idle_timeout,
                show_default=True,
                help="Seconds a keep-alive connection may wait for its next request before it is closed.",
            ),
            click.option(
                "--send-timeout",
                type=seconds,
                default=ServerLimits.send_timeout,
                show_default=True,
                help="Seconds a client has to take an answer before its connection is dropped.",
            ),
            click.option(
                "--max-connections",
                type=click.IntRange(1),
                default=None,
                help=f"Open connections served at once; more are answered 503 and closed. Default: "
                f"{CONNECTION_CAP}, or less when the open-file limit (ulimit -n) leaves less room.",
            ),
        ]
    ):
        with_limits = option(with_limits)
    return with_limits


@click.command(epilog=TRUST_HELP)
@click.argument("directory", required=False)
@click.option(
    "--virtual",
    type=click.IntRange(1),
    metavar="N",
    help="Serve N records minted on demand from --seed, instead of DIRECTORY (nothing on disk).",
)
@click.option(
    "--keyring-out",
    type=click.Path(dir_okay=False),
    help="With --virtual: write the keyring that verifies its records here [default: a temporary file].",
)
@trust_options
@limit_options
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="0 picks a free port.")
@click.option("--public-url", help="Base URL to write into links (default: the URL listened on).")
@click.option("--name", default=SiteOptions.name, show_default=True, help="Mirror name in the manifest.")
@click.option(
    "--sitemap-page-size",
    type=click.IntRange(1),
    default=SiteOptions.sitemap_page_size,
    show_default=True,
    help="URLs per sitemap page; more records make /sitemap.xml an index.",
)
@click.option("--disallow", multiple=True, help="Add a Disallow rule to robots.txt; repeatable.")
@click.option(
    "--cache-size",
    type=click.IntRange(1),
    default=SiteOptions.cache_size,
    show_default=True,
    help="Rendered record documents kept in memory.",
)
@click.option("--latency-ms", type=click.FloatRange(0), default=0, help="Fault: delay every answer.")
@click.option(
    "--error-rate", type=click.FloatRange(0, 1), default=0.0, help="Fault: share answered with --error-status."
)
@click.option("--error-status", type=click.Choice(["500", "503"]), default="503", show_default=True)
@click.option("--rate-limit-every", type=click.IntRange(0), default=0, help="Fault: every Nth request gets 429.")
@click.option(
    "--retry-after",
    type=click.IntRange(0),
    default=1,
    show_default=True,
    help="Retry-After seconds on 429 and --fail-first 503s.",
)
@click.option("--drop-rate", type=click.FloatRange(0, 1), default=0.0, help="Fault: share of connections dropped.")
@click.option("--truncate-rate", type=click.FloatRange(0, 1), default=0.0, help="Fault: share of bodies cut in half.")
@click.option("--fail-first", type=click.IntRange(0), default=0, help="Fault: first N requests of each path get 503.")
@click.option("--wrong-content-type", is_flag=True, help="Fault: JSON served as text/html.")
@click.option("--tamper", multiple=True, metavar="SUFFIX", help="Fault: corrupt this record's bundle; repeatable.")
@click.option("--redirect-loop", multiple=True, metavar="SUFFIX", help="Fault: this record redirects forever.")
@click.option("--oversize", multiple=True, metavar="SUFFIX", help="Fault: this record's bundle is huge.")
@click.option("--oversize-bytes", type=click.IntRange(1), default=FaultPlan.oversize_bytes, show_default=True)
@click.option("--fault-paths", "paths", metavar="REGEX", help="Request faults only on paths matching this.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the fault rates and of --virtual.")
@verbosity_options
def serve(
    directory: str | None,
    virtual: int | None,
    keyring_out: str | None,
    keyrings: tuple[str, ...],
    no_default_keys: bool,
    signing_key: str | None,
    trust_archive_keys: bool,
    s3_endpoint_url: str | None,
    host: str,
    port: int,
    public_url: str | None,
    name: str,
    sitemap_page_size: int,
    disallow: tuple[str, ...],
    cache_size: int,
    verbosity: int,
    limits: ServerLimits,
    **faults: Any,
) -> None:
    """Serve DIRECTORY in Pith's resolver layout: a corpus, a folder of
    <SUFFIX>.bundle.json files, or an archive (a folder with manifests/, or
    s3://bucket/prefix), whose committed current version of each record is served as
    the bytes stored, each verified (under the trusted keys, with their roles) before
    it is first served. Or, with --virtual N, the records `corpus generate --seed S`
    plans, minted as they are asked for. Prints the URL it listens on as its first line
    (then the --virtual keyring's path), then serves until SIGINT or SIGTERM. -v logs
    startup, -vv every request. Exit 2 on usage or configuration errors, 4 when the
    archive cannot be read."""
    log_to_stderr(verbosity)
    faults["error_status"] = int(faults["error_status"])
    try:
        plan = FaultPlan(**{field: faults[field] for field in FAULT_FIELDS if field in faults})
    except (ValueError, TypeError) as exc:
        raise click.UsageError(str(exc)) from None
    if keyring_out and not virtual:
        raise ConfigError("--keyring-out goes with --virtual N")
    source, keyring_path = (
        _virtual(virtual, faults["seed"], keyring_out, directory)
        if virtual
        else (_source(directory, s3_endpoint_url, keyrings, no_default_keys, signing_key, trust_archive_keys), None)
    )
    unknown = (plan.tamper | plan.redirect_loop | plan.oversize) - set(source.catalog.suffixes)
    if unknown:
        raise click.UsageError(f"not records of {directory}: {', '.join(sorted(unknown))}")
    options = SiteOptions(name=name, sitemap_page_size=sitemap_page_size, disallow=disallow, cache_size=cache_size)
    server = MirrorServer(source, host, port, public_url, options, plan, log_size=0, limits=limits)

    def ready(url: str) -> None:  # click.echo flushes: the URL is out before any request
        click.echo(url)
        if keyring_path:
            click.echo(f"keyring {keyring_path}")

    serve_until_signalled(server, ready)


def _virtual(records: int, seed: int, keyring_out: str | None, directory: str | None) -> tuple[VirtualCorpus, str]:
    """The --virtual corpus, and where its keyring was written."""
    if directory:
        raise ConfigError("give DIRECTORY or --virtual N, not both")
    source = VirtualCorpus(records, seed)
    path = keyring_out or str(Path(tempfile.gettempdir()) / f"pith-virtual-{records}-{seed}.keyring.json")
    try:
        source.write_keyring(path)
    except OSError as exc:
        raise ConfigError(f"--keyring-out {path}: {exc.strerror}") from None
    return source, path


def _source(
    directory: str | None,
    s3_endpoint_url: str | None,
    keyrings: tuple[str, ...],
    no_default_keys: bool,
    signing_key: str | None,
    trust_archive_keys: bool,
) -> RecordSource:
    """The RecordSource DIRECTORY names: an archive (see is_archive) or a corpus folder."""
    if not directory:
        raise click.UsageError("give DIRECTORY (a corpus, a folder of bundles or an archive) or --virtual N")
    if not is_archive(directory):
        if not Path(directory).is_dir():
            raise ConfigError(f"{directory}: neither a folder nor s3://bucket/prefix")
        if s3_endpoint_url or keyrings or no_default_keys or signing_key or trust_archive_keys:
            raise ConfigError(
                f"{directory} is a corpus, not an archive (no manifests/ folder): --s3-endpoint-url, "
                "--keyring, --no-default-keys, --signing-key and --trust-archive-keys apply to archives"
            )
        return CorpusDirectory(directory)
    store, keyring = open_archive(
        directory, s3_endpoint_url, keyrings, no_default_keys, signing_key, trust_archive_keys
    )
    try:
        return ArchiveSource(store, keyring)
    except NothingCommitted as exc:
        raise nothing_trusted(directory, exc) from None
    except NothingServable as exc:
        raise ConfigError(str(exc)) from None
    except StorageError as exc:
        raise RunFailed(str(exc)) from None
