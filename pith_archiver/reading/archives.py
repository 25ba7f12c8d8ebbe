"""What the commands that read an archive (``audit``, ``serve``, ``export`` and the
log's) share: telling an archive from a corpus folder, opening it (a folder or
prefix holding none is exit 4, never an empty archive), and which keys to trust.

Trust comes from outside the archive: the built-in registry key, each ``--keyring``
file, and the archiver key this machine holds (the one ``crawl`` signs with), so an
archive crawled here reads with no options. The keys the archive publishes under
``keys/`` only with ``--trust-archive-keys``: whoever can write to the archive can
publish a key there.
"""

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from crawler.seeds import SeedError, parse_seed
from pith.keyring import Keyring, KeyringError
from storage.archive import layout
from storage.archive.open_store import open_store
from storage.archive.reader import CommittedArchive, NothingCommitted, reading_keyring
from storage.archive.record_names import records_named
from storage.archive.signing_key import default_key_path
from storage.archive.stores import ObjectStore, StorageError, StoreRefused
from storage.log_proofs import NotAttested
from storage.transparency.key_logs import LogBroken

from ..exit_status import ConfigError, ExitStatus, JobFailed, OneLineError
from ..keyrings import keyring_options, machine_key, pinned_keys
from ..option_checks import refuse_endpoint_without_s3
from ..output import Command
from . import s3_sources

TRUST_HELP = (
    "Trusted: the built-in registry key (unless --no-default-keys), every --keyring file, and this "
    "machine's archiver key (the one `crawl` signs with, or --signing-key); the keys the archive "
    "publishes under keys/ only with --trust-archive-keys."
)


def is_archive(target: str) -> bool:
    """An S3 prefix, or a folder holding a manifests/ folder."""
    return target.startswith(("s3://", "file://")) or (Path(target) / layout.MANIFESTS).is_dir()


@dataclass(frozen=True)
class Trust:
    """How a command reads an archive: which keys it trusts (see the module docstring)
    and the S3 endpoint, as the options of ``trust_options`` give them."""

    keyrings: tuple[str, ...] = ()
    no_default_keys: bool = False
    signing_key: str | None = None
    trust_archive_keys: bool = False
    s3_endpoint_url: str | None = None

    @property
    def given(self) -> bool:
        """Whether any of the options was given."""
        return self != Trust()


def trust_options(func: Command) -> Command:
    """--keyring, --no-default-keys, --signing-key, --trust-archive-keys and
    --s3-endpoint-url, handed to ``func`` as one Trust ``trust``."""

    @functools.wraps(func)
    def with_trust(
        *args: Any,
        keyrings: tuple[str, ...],
        no_default_keys: bool,
        signing_key: str | None,
        trust_archive_keys: bool,
        s3_endpoint_url: str | None,
        **kwargs: Any,
    ) -> Any:
        trust = Trust(tuple(keyrings), no_default_keys, signing_key, trust_archive_keys, s3_endpoint_url)
        return func(*args, trust=trust, **kwargs)

    command = s3_sources.endpoint_option(with_trust)
    command = click.option(
        "--trust-archive-keys",
        is_flag=True,
        help="Also trust, for manifests and attestations, the archiver keys the archive publishes "
        "under keys/. Trust then comes from the archive itself: only for an archive you keep.",
    )(command)
    command = click.option(
        "--signing-key",
        type=click.Path(dir_okay=False),
        help="Trust this archiver key file's public half for manifests and attestations "
        f"[default: this machine's key, {default_key_path()}, if there is one].",
    )(command)
    return keyring_options(command)


def open_location(uri: str, s3_endpoint_url: str | None) -> ObjectStore:
    """A folder or s3:// prefix as a store, to read; the endpoint applies to s3://
    only. A bucket that does not exist, or credentials it refuses: one line, exit 2."""
    try:
        store = open_store(uri, s3_endpoint_url if uri.startswith("s3://") else None)
        store.probe_reads()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    except StoreRefused as exc:
        raise ConfigError(str(exc)) from None
    except StorageError as exc:
        raise JobFailed(str(exc)) from None
    return store


def pinned_keyring(trust: Trust) -> Keyring:
    """The keys ``trust`` pins, each with its role: the built-in registry key (unless
    --no-default-keys), every --keyring file and this machine's archiver key."""
    own = machine_key(trust.signing_key)
    return pinned_keys(
        [*trust.keyrings, *([own] if own else [])], not trust.no_default_keys, None, trust.s3_endpoint_url
    )


def trusted_keyring(store: ObjectStore, trust: Trust) -> Keyring:
    """Every key a read of ``store`` trusts, each with its role (see the module docstring)."""
    pinned = pinned_keyring(trust)
    try:
        ring = reading_keyring(store, pinned, archive_keys=trust.trust_archive_keys)
    except (KeyringError, StoreRefused) as exc:
        raise ConfigError(str(exc)) from None
    except StorageError as exc:
        raise JobFailed(str(exc)) from None
    if not len(ring):
        raise ConfigError("no key to trust: give --keyring FILE or drop --no-default-keys")
    return ring


def open_archive(uri: str, trust: Trust, elsewhere: tuple[str | None, ...] = ()) -> tuple[ObjectStore, Keyring]:
    """The archive's store and the keyring it is read with, once it holds an archive
    (``check_holds_archive``); ``elsewhere``: the command's other locations, any of
    which --s3-endpoint-url may be for."""
    refuse_endpoint_without_s3(trust.s3_endpoint_url, (uri, *elsewhere, *trust.keyrings))
    if "://" not in uri and not Path(uri).is_dir():
        raise ConfigError(f"no archive folder at {uri}")
    store = open_location(uri, trust.s3_endpoint_url)
    keyring = trusted_keyring(store, trust)
    check_holds_archive(uri, store)
    return store, keyring


def no_archive(uri: str, why: str) -> JobFailed:
    """The one-line error for a folder or prefix holding no archive: a command that
    finds nothing to read has failed (exit 4), never found it clean, since an unmounted
    volume or a mistyped prefix looks just like an empty archive."""
    return JobFailed(f"no archive at {uri}: {why}")


def check_holds_archive(uri: str, store: ObjectStore) -> None:
    """``no_archive`` unless ``store`` holds a manifest (the commit point: an archive
    has one once its first run committed); one listing request, two when there is none.
    A store that cannot be listed is left to the command's own reading, which says how
    it failed (exit 4 too)."""

    def holds(prefix: str) -> bool:
        return next(iter(store.list(prefix)), None) is not None

    try:
        if holds(f"{layout.MANIFESTS}/"):
            return
        empty = not holds("")
    except StorageError:
        return
    raise no_archive(
        uri,
        "it is empty (an unmounted volume? a mistyped prefix?)"
        if empty
        else f"nothing under {layout.MANIFESTS}/ (no run ever committed there)",
    )


class NoProof(OneLineError):
    """The archive cannot prove what was asked (nothing attested, or its log is broken): one line, exit 1."""

    exit_code = ExitStatus.REJECTED


def record_number(archive: CommittedArchive, name: str) -> str:
    """The Pith number (or suffix) of the one committed record ``name`` names, read as
    the crawl reads a seed and looked up in the archive's own tables: ConfigError for
    what names no record or several, NoProof when the archive holds none of that name."""
    try:
        seed = parse_seed(name)
    except SeedError as exc:
        raise ConfigError(f"{exc}") from None
    if seed.kind == "sitemap":
        raise ConfigError(f"{name!r} names no record: give a Pith number, a suffix, an arXiv id or a DOI")
    if seed.kind == "suffix":
        return seed.value
    numbers = records_named(archive, seed.value)
    if not numbers:
        raise NoProof(f"{archive.store.uri} holds no record named {name} (in its records and aliases tables)")
    if len(numbers) > 1:
        shown = ", ".join(numbers[:3]) + (", ..." if len(numbers) > 3 else "")
        raise ConfigError(f"{name} names {len(numbers)} records of {archive.store.uri} ({shown}): give more of it")
    return numbers[0]


@contextmanager
def reading(archive: str) -> Iterator[None]:
    """What reading ``archive`` raises, as its command's one line and exit status, the
    same for every command: no proof of what was asked (exit 1), no manifest under a
    pinned key (exit 2, with how to pin it), a store that failed (exit 4)."""
    try:
        yield
    except (NotAttested, LogBroken) as exc:  # NotAttested first: it is a StorageError
        raise NoProof(str(exc)) from None
    except NothingCommitted as exc:
        raise nothing_trusted(archive, exc) from None
    except StoreRefused as exc:
        raise ConfigError(str(exc)) from None
    except StorageError as exc:
        raise JobFailed(str(exc)) from None


def nothing_trusted(archive: str, exc: NothingCommitted) -> ConfigError:
    """The one-line error for an archive none of whose manifests is trusted."""
    hints = "; ".join(f"for {key_id}, {archive_pin_hint(archive, key_id)}" for key_id in exc.unpinned)
    return ConfigError(f"{exc}" + (f"; {hints}" if hints else ""))


def archive_pin_hint(archive: str, key_id: str) -> str:
    """How to trust the manifests of an archiver key that is not pinned."""
    return (
        f"pass --keyring {archive.rstrip('/')}/{layout.key_document(key_id)} after checking its fingerprint, "
        "or --trust-archive-keys"
    )
