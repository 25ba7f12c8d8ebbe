"""``pith-archiver serve``: a conforming Pith mirror of a corpus folder or an archive,
fit for public use. Its options (where it listens, what its site says, its limits)
are decorators the test kit's fault-injecting ``serve`` reuses."""

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from pith.keyring import Keyring
from pith.parse import Limits
from pith.verdict import Status
from storage.archive import layout
from storage.runtime.cores import available_cores
from storage.serving.archive_source import ArchiveSource, NothingServable
from storage.serving.limits import CONNECTION_CAP, ServerLimits
from storage.serving.resolver import SiteOptions
from storage.serving.runner import serve_until_signalled
from storage.serving.server import RENEW_SECONDS, MirrorServer
from storage.serving.source import BundleCheck, CorpusDirectory, NoBundleFiles, NothingToServe, RecordSource

from ..exit_status import ConfigError
from ..ordered_pool import ordered_map
from ..output import Command, echo, log_to_stderr, output_is_a_report, verbosity_options
from ..reading.archives import (
    TRUST_HELP,
    Trust,
    is_archive,
    no_archive,
    open_archive,
    pinned_keyring,
    reading,
    trust_options,
)
from ..reading.checking import TargetChecker


@dataclass(frozen=True)
class Listening:
    """Where a mirror listens, what its site says and the limits it keeps."""

    host: str
    port: int
    public_url: str | None
    site: SiteOptions
    limits: ServerLimits

    def serve(
        self,
        source: RecordSource,
        server_class: type[MirrorServer] = MirrorServer,
        after_url: Iterable[str] = (),
        **server_args: Any,
    ) -> None:
        """Serve ``source`` until SIGINT or SIGTERM: the URL is the first line printed,
        then the lines of ``after_url``."""
        server = server_class(
            source, self.host, self.port, self.public_url, self.site, log_size=0, limits=self.limits, **server_args
        )

        def ready(url: str) -> None:  # click.echo flushes: the URL is out before any request
            echo(url)
            for line in after_url:
                echo(line)

        serve_until_signalled(server, ready)


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

    return with_options(with_limits, limit_flags())


# the per-connection deadlines: flag, ServerLimits field, what the client has that long for
DEADLINES = (
    (
        "--header-timeout",
        "header_timeout",
        "Seconds a client has to send a request's head (from the connection's opening or "
        "the request's first byte); then 408 and close.",
    ),
    (
        "--body-timeout",
        "body_timeout",
        "Seconds a client has to send the request body it declared; then 408 and close.",
    ),
    (
        "--idle-timeout",
        "idle_timeout",
        "Seconds a keep-alive connection may wait for its next request before it is closed.",
    ),
    ("--send-timeout", "send_timeout", "Seconds a client has to take an answer before its connection is dropped."),
)


def limit_flags() -> list[Callable[[Command], Command]]:
    """The options ``limit_options`` reads, in the order ``--help`` lists them."""
    seconds = click.FloatRange(0, min_open=True)
    return [
        *(
            click.option(flag, type=seconds, default=getattr(ServerLimits, field), show_default=True, help=text)
            for flag, field, text in DEADLINES
        ),
        click.option(
            "--max-connections",
            type=click.IntRange(1),
            default=None,
            help=f"Open connections served at once; more are answered 503 and closed. Default: "
            f"{CONNECTION_CAP}, or less when the open-file limit (ulimit -n) leaves less room.",
        ),
    ]


def listen_options(command: Command) -> Command:
    """--host, --port, --public-url, the site's options and the limits, handed to
    ``command`` as one Listening ``listening``."""

    @functools.wraps(command)
    def with_listening(
        *args: Any,
        host: str,
        port: int,
        public_url: str | None,
        name: str,
        sitemap_page_size: int,
        disallow: tuple[str, ...],
        cache_size: int,
        limits: ServerLimits,
        **kwargs: Any,
    ) -> Any:
        site = SiteOptions(name=name, sitemap_page_size=sitemap_page_size, disallow=disallow, cache_size=cache_size)
        return command(*args, listening=Listening(host, port, public_url, site, limits), **kwargs)

    return limit_options(with_options(with_listening, listen_flags()))


def listen_flags() -> list[Callable[[Command], Command]]:
    """The options ``listen_options`` reads, in the order ``--help`` lists them."""
    return [
        click.option("--host", default="127.0.0.1", show_default=True),
        click.option(
            "--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="0 picks a free port."
        ),
        click.option("--public-url", help="Base URL to write into links (default: the URL listened on)."),
        click.option(
            "--name",
            default=SiteOptions.name,
            show_default=True,
            help="Mirror name in the mirror list (/pith-mirrors.json).",
        ),
        click.option(
            "--sitemap-page-size",
            type=click.IntRange(1),
            default=SiteOptions.sitemap_page_size,
            show_default=True,
            help="URLs per sitemap page; more records make /sitemap.xml an index.",
        ),
        click.option("--disallow", multiple=True, help="Add a Disallow rule to robots.txt; repeatable."),
        click.option(
            "--cache-size",
            type=click.IntRange(1),
            default=SiteOptions.cache_size,
            show_default=True,
            help="Rendered record documents kept in memory.",
        ),
    ]


def with_options(command: Command, options: list[Callable[[Command], Command]]) -> Command:
    """``command`` with the click ``options``, which ``--help`` lists in the order given."""
    for option in reversed(options):
        command = option(command)
    return command


@click.command(epilog=TRUST_HELP)
@click.argument("directory")
@trust_options
@listen_options
@click.option(
    "--reread-every",
    type=click.FloatRange(0),
    default=RENEW_SECONDS,
    show_default=True,
    metavar="SECONDS",
    help="An archive's manifests are listed again at most this often, as requests come; runs committed "
    "since are read and served once read.",
)
@verbosity_options
def serve(directory: str, trust: Trust, listening: Listening, reread_every: float, verbosity: int) -> None:
    """Serve DIRECTORY in Pith's resolver layout: a corpus or a folder of
    <SUFFIX>.bundle.json files, every bundle verified at startup, or an archive (a
    folder with manifests/, or s3://bucket/prefix), whose committed current version of
    each record is served as the bytes stored, each verified before it is first
    served. Both verify under the trusted keys, with their roles; what does not verify
    is withheld, with one warning saying how many. Prints the URL it listens on as its
    first line, then serves until SIGINT or SIGTERM. -v logs startup, -vv every
    request. Exit 2 on usage or configuration errors and when nothing could be served,
    4 when the archive cannot be read or DIRECTORY holds neither an archive nor a
    bundle file. An archive is also a ResourceSync source: its Source Description is
    at /.well-known/resourcesync (docs/SERVING.md)."""
    output_is_a_report()  # its URL line: the mirror serves on whether or not anyone read it
    log_to_stderr(verbosity)
    listening.serve(open_source(directory, trust), renew_every=reread_every)


def open_source(directory: str, trust: Trust) -> RecordSource:
    """The RecordSource DIRECTORY names: an archive (see is_archive), or a corpus folder
    whose bundles are verified under the pinned keys first."""
    if not is_archive(directory):
        if not Path(directory).is_dir():
            raise ConfigError(f"{directory}: neither a folder nor s3://bucket/prefix")
        if trust.s3_endpoint_url or trust.trust_archive_keys:
            raise ConfigError(
                f"{directory} is a folder of bundles, not an archive (no manifests/ folder): "
                "--s3-endpoint-url and --trust-archive-keys apply to archives"
            )
        keyring = pinned_keyring(trust)
        if not len(keyring):
            raise ConfigError("no key to trust: give --keyring FILE or drop --no-default-keys")
        try:
            return CorpusDirectory(directory, verified_under(keyring))
        except NoBundleFiles as exc:
            raise no_archive(directory, f"no {layout.MANIFESTS}/ folder, and {exc}") from None
        except NothingToServe as exc:
            raise ConfigError(str(exc)) from None
    store, keyring = open_archive(directory, trust)
    with reading(directory):
        try:
            return ArchiveSource(store, keyring)
        except NothingServable as exc:  # a StorageError, but the user's to fix
            raise ConfigError(str(exc)) from None


def verified_under(keyring: Keyring) -> BundleCheck:
    """A folder's check: each bundle file verified as ``verify`` does, on every core."""
    checker = TargetChecker(keyring, Limits())

    def check(paths: list[Path]) -> Iterator[str | None]:
        for record in ordered_map(checker.bundle, [str(path) for path in paths], available_cores()):
            yield None if record["status"] == Status.VERIFIED else str(record.get("reason") or record["status"])

    return check
