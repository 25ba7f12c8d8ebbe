"""The keyring options every command that checks signatures shares, and the archiver
key this machine holds (the one ``crawl`` signs with), which the commands that read
what this machine wrote trust without options."""

from collections.abc import Iterable
from pathlib import Path

import click

from pith.keyring import REGISTRY_KEY, Keyring, KeyringError
from storage.archive.signing_key import default_key_path

from .exit_status import ConfigError
from .output import Command


def keyring_options(func: Command) -> Command:
    func = click.option(
        "--no-default-keys", is_flag=True, help=f"Do not trust the built-in registry key ({REGISTRY_KEY['key_id']})."
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


def machine_key(signing_key: str | None = None) -> Path | None:
    """The archiver key file to trust: ``signing_key`` (``--signing-key``), else this
    machine's default key when there is one."""
    if signing_key:
        if not Path(signing_key).is_file():
            raise ConfigError(f"--signing-key {signing_key}: no such file")
        return Path(signing_key)
    default = default_key_path()
    return default if default.is_file() else None


def build_keyring(keyrings: Iterable[str], no_default_keys: bool, with_machine_key: bool = False) -> Keyring:
    """The keys of ``keyrings`` and the registry key (unless ``no_default_keys``); with
    ``with_machine_key`` also this machine's archiver key, an archive key (what signs
    releases, proofs' checkpoints and WACZ files made here)."""
    own = machine_key() if with_machine_key else None
    try:
        ring = Keyring.build([*keyrings, *([own] if own else [])], default_keys=not no_default_keys)
    except KeyringError as exc:
        raise ConfigError(str(exc)) from None
    if not len(ring):
        raise ConfigError("the keyring is empty: give --keyring FILE or drop --no-default-keys")
    return ring
