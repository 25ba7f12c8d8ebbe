"""The keyring options every command that checks signatures shares."""

from collections.abc import Iterable

import click

from pith.keyring import Keyring, KeyringError

from .exit_status import ConfigError
from .output import Command


def keyring_options(func: Command) -> Command:
    func = click.option(
        "--no-default-keys", is_flag=True, help="Do not trust the built-in registry key (pith-v1-2026-05)."
    )(func)
    func = click.option(
        "--keyring",
        "keyrings",
        multiple=True,
        type=click.Path(exists=True, dir_okay=False),
        help='Pin the keys in this JSON file: {"keys": [...]} (registry keys unless an entry names '
        "its role), one key document such as an archive's keys/<key_id>.json (an archive "
        "key), or an archiver's private key file (its public half); repeatable.",
    )(func)
    return func


def build_keyring(keyrings: Iterable[str], no_default_keys: bool) -> Keyring:
    try:
        ring = Keyring.build(keyrings, default_keys=not no_default_keys)
    except KeyringError as exc:
        raise ConfigError(str(exc)) from None
    if not len(ring):
        raise ConfigError("the keyring is empty: give --keyring FILE or drop --no-default-keys")
    return ring
