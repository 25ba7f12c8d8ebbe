"""The keyring options every command that checks signatures shares, and the archiver
key this machine holds (the one ``crawl`` signs with), which the commands that read
what this machine wrote trust without options.

A ``--keyring`` is a file, or a key document where it is published: an http(s) URL or
an S3 object (an archive's ``keys/<key_id>.json``, as ``audit`` prints it), read once,
at most ``KEY_DOCUMENT_LIMIT`` bytes."""

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click

from pith.keyring import REGISTRY_KEY, Keyring, KeyringError
from storage.archive.signing_key import default_key_path
from storage.archive.stores import StorageError

from .exit_status import ConfigError
from .output import Command
from .reading import s3_sources

KEY_DOCUMENT_LIMIT = 1024 * 1024
REMOTE = ("http://", "https://", s3_sources.SCHEME)


class KeyringSource(click.ParamType):
    """A keyring file that exists, or an http(s):// or s3:// key document."""

    name = "FILE|URL"
    _file = click.Path(exists=True, dir_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if isinstance(value, str) and value.startswith(REMOTE):
            return value
        return str(self._file.convert(value, param, ctx))


no_default_keys_option = click.option(
    "--no-default-keys", is_flag=True, help=f"Do not trust the built-in registry key ({REGISTRY_KEY['key_id']})."
)
keyring_option = click.option(
    "--keyring",
    "keyrings",
    multiple=True,
    type=KeyringSource(),
    help='Pin the keys in this JSON file: {"keys": [...]} (registry keys unless an entry names '
    "its role), one key document such as an archive's keys/<key_id>.json (an archive "
    "key; also as an http(s):// URL or s3://bucket/key), or an archiver's private key "
    "file (its public half); repeatable.",
)


def keyring_options(func: Command) -> Command:
    return keyring_option(no_default_keys_option(func))


def machine_key(signing_key: str | None = None) -> Path | None:
    """The archiver key file to trust: ``signing_key`` (``--signing-key``), else this
    machine's default key when there is one."""
    if signing_key:
        if not Path(signing_key).is_file():
            raise ConfigError(f"--signing-key {signing_key}: no such file")
        return Path(signing_key)
    default = default_key_path()
    return default if default.is_file() else None


def pinned_keys(
    sources: Iterable[str | Path],
    default_keys: bool,
    role: str | None = None,
    s3_endpoint_url: str | None = None,
    option: str = "--keyring",
) -> Keyring:
    """The registry key (unless not ``default_keys``) and the keys of every file or
    published key document of ``sources``; a ConfigError, one line, for one that
    cannot be read or is no keyring."""
    ring = Keyring.default() if default_keys else Keyring()
    try:
        for source in sources:
            if isinstance(source, str) and source.startswith(REMOTE):
                ring.load_text(source, _published(source, s3_endpoint_url, option), role)
            else:
                ring.load(source, role)
    except KeyringError as exc:
        raise ConfigError(f"{option} {exc}") from None
    return ring


def _published(source: str, s3_endpoint_url: str | None, option: str) -> str:
    """The text of a key document at an http(s) URL or in S3."""
    try:
        if source.startswith(s3_sources.SCHEME):
            data = s3_sources.read_at_most(source, KEY_DOCUMENT_LIMIT, s3_endpoint_url)
        else:
            from .reading.sources import fetch

            data = fetch(source, KEY_DOCUMENT_LIMIT, "application/json")
    except (OSError, StorageError) as exc:
        raise ConfigError(f"{option} {source}: cannot read it ({exc})") from None
    if len(data) > KEY_DOCUMENT_LIMIT:
        raise ConfigError(f"{option} {source}: larger than {KEY_DOCUMENT_LIMIT} bytes, so not a key document")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{option} {source}: not UTF-8 text, so not a key document") from None


def build_keyring(
    keyrings: Iterable[str],
    no_default_keys: bool,
    with_machine_key: bool = False,
    s3_endpoint_url: str | None = None,
) -> Keyring:
    """The keys of ``keyrings`` and the registry key (unless ``no_default_keys``); with
    ``with_machine_key`` also this machine's archiver key, an archive key (what signs
    releases, proofs' checkpoints and WACZ files made here)."""
    own = machine_key() if with_machine_key else None
    ring = pinned_keys([*keyrings, *([own] if own else [])], not no_default_keys, s3_endpoint_url=s3_endpoint_url)
    if not len(ring):
        raise ConfigError("the keyring is empty: give --keyring FILE or drop --no-default-keys")
    return ring
