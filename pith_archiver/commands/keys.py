"""``pith-archiver keys``: the archiver's own signing keys, and pinning the registry's."""

import json
import os
import re
from pathlib import Path

import click

from crawler.extensions.key_watch import announced_keys
from pith.keyring import REGISTRY, REGISTRY_KEY, Keyring, KeyringError, instant, key_from_entry
from pith.parse import parse
from pith.reasons import Reason, Rejected
from storage.archive.signing_key import new_signer

from ..exit_status import ConfigError
from ..option_checks import RenamedFrom
from ..output import echo, say, verbosity_options
from ..reading.sources import fetch

KEY_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")  # it names keys/<key_id>.json and a table partition


KEY_DOCUMENT_LIMIT = 1024 * 1024
FINGERPRINT = re.compile(r"^[0-9a-f]{32}$")


@click.group()
def keys() -> None:
    """The archiver's own Ed25519 signing keys, and pinning a rotated registry key."""


@keys.command()
@click.option(
    "--signing-key",
    "out",
    cls=RenamedFrom,
    old="--out",  # until the next release: --out names the archive in crawl and sync
    required=True,
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the private key file here (mode 0600); an existing file is never replaced.",
)
@click.option("--key-id", default=None, help="The key's id [default: pith-archiver-<host>-<fingerprint>].")
@verbosity_options
def generate(out: Path, key_id: str | None, verbosity: int) -> None:
    """Make a signing key for `crawl --signing-key FILE`.

    Prints its public key document (shaped like a bundle's public_keys entry, with
    "role": "archive": it may sign manifests and attestations, never registry records;
    each archive it signs publishes it as keys/<key_id>.json). Give that document to
    whoever verifies or audits the archive: `--keyring FILE` accepts it as it is.
    """
    if key_id is not None and not KEY_ID.match(key_id):
        raise click.BadParameter(
            "1-100 of letters, digits, '.', '_' and '-', starting with a letter or digit", param_hint="--key-id"
        )
    if out.exists():
        raise click.UsageError(f"{out} exists: a signing key is never replaced (give another --out)")
    signer = new_signer(key_id)
    try:
        signer.save(out)
    except OSError as exc:
        raise ConfigError(f"--out {out}: {exc.strerror or exc}") from None
    say(
        f"wrote signing key {signer.key_id} (fingerprint {signer.fingerprint}) to {out}: keep it secret, "
        "outside the archive",
        err=True,
    )
    echo(json.dumps(signer.archive_key_document(), indent=2))


def _timestamp(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and instant(value) is None:
        raise click.BadParameter("an RFC 3339 timestamp with a zone, e.g. 2026-12-01T00:00:00Z")
    return value


def _read_source(source: str) -> bytes:
    try:
        if source.startswith(("http://", "https://")):
            return fetch(source, KEY_DOCUMENT_LIMIT, "application/json")
        return Path(source).read_bytes()
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"{source}: {getattr(exc, 'reason', None) or getattr(exc, 'strerror', None) or exc}"
        ) from None


def _keyring_entries(path: Path) -> list[dict]:
    if not path.exists():
        return []
    try:
        doc = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--into {path}: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise ConfigError(f'--into {path}: expected {{"keys": [...]}}')
    if not all(isinstance(entry, dict) for entry in doc["keys"]):
        raise ConfigError(f"--into {path}: every key entry is an object")
    return doc["keys"]


def _write_keyring(path: Path, entry: dict) -> None:
    """Add or update ``entry`` (by key_id) in the keyring file, atomically."""
    entries = [e for e in _keyring_entries(path) if e.get("key_id") != entry["key_id"]] + [entry]
    temporary = path.with_name(path.name + ".tmp")
    try:
        temporary.write_text(json.dumps({"keys": entries}, indent=2) + "\n", "utf-8")
        os.replace(temporary, path)
    except OSError as exc:
        raise ConfigError(f"--into {path}: {exc.strerror or exc}") from None


def _pin(path: Path, entry: dict) -> None:
    """Write ``entry`` into the keyring file once the file's keys and it make a keyring
    (a key_id pinned with other bytes or another role is refused, as Keyring.add does)."""
    try:
        Keyring([key_from_entry(known, REGISTRY) for known in _keyring_entries(path)]).add(
            key_from_entry(entry, REGISTRY)
        )
    except KeyringError as exc:
        raise ConfigError(f"--into {path}: {exc}; find out which is genuine first") from None
    _write_keyring(path, entry)


keyring_file_option = click.option(
    "--into",
    "keyring",
    cls=RenamedFrom,
    old="--keyring",  # until the next release: --keyring names the keys trusted everywhere else
    required=True,
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The keyring file to write (created if absent; give it to crawl, verify, audit, serve and export).",
)


@keys.command()
@click.argument("source")
@click.option(
    "--fingerprint",
    required=True,
    help="The key's fingerprint_sha256_hex (32 hex digits), as checked with the registry out of band.",
)
@keyring_file_option
@click.option("--not-before", callback=_timestamp, help="The key signs nothing built before this time.")
@click.option(
    "--not-after",
    callback=_timestamp,
    help="The key is retired from this time: anything created or built later is key_retired.",
)
@verbosity_options
def pin(
    source: str, fingerprint: str, keyring: Path, not_before: str | None, not_after: str | None, verbosity: int
) -> None:
    """Pin a registry key announced in SOURCE, once checked out of band.

    SOURCE is a key document: the resolver's /pith-signing-key.json (URL or file), or
    any file of key entries. Only the key whose fingerprint, computed from its bytes,
    is the one you checked with the registry is pinned: the network alone never
    decides what is trusted. Its rotates_at, if any, becomes its retirement time.
    """
    fingerprint = fingerprint.lower()
    if not FINGERPRINT.match(fingerprint):
        raise click.BadParameter("32 hex digits (fingerprint_sha256_hex)", param_hint="--fingerprint")
    body = _read_source(source)
    try:
        if len(body) > KEY_DOCUMENT_LIMIT:
            raise Rejected(Reason.TOO_LARGE, "", f"more than {KEY_DOCUMENT_LIMIT} bytes")
        entries = announced_keys(parse(body).data)
    except Rejected as rejected:
        raise ConfigError(f"{source}: not a key document ({rejected})") from None
    offered = []
    for entry in entries:
        try:
            key = key_from_entry(entry, REGISTRY)
        except KeyringError:
            continue
        offered.append(f"{key.key_id} {key.fingerprint}")
        if key.fingerprint == fingerprint:
            window = {name: value for name, value in (("not_before", not_before), ("not_after", not_after)) if value}
            _pin(keyring, {**key.document(), "role": REGISTRY, **window})  # rotates_at became not_after
            say(f"pinned {key.key_id} (fingerprint {key.fingerprint}) in {keyring}")
            return
    raise ConfigError(f"{source}: no key with fingerprint {fingerprint} (it offers: {', '.join(offered) or 'none'})")


@keys.command()
@click.argument("key_id")
@click.option(
    "--at", "at", required=True, callback=_timestamp, help="When the key was retired (the registry's rotation time)."
)
@keyring_file_option
@verbosity_options
def retire(key_id: str, at: str, keyring: Path, verbosity: int) -> None:
    """Give a pinned registry key its retirement time.

    What it signed before AT stays verified; an event created, or a bundle built, after
    AT under its signature is rejected as key_retired. KEY_ID is a key of the keyring
    file or the built-in registry key (pinned twice, the narrower window holds).
    """
    known = next((e for e in _keyring_entries(keyring) if e.get("key_id") == key_id), None)
    if known is None and key_id == REGISTRY_KEY["key_id"]:
        known = {**REGISTRY_KEY, "role": REGISTRY}
    if known is None:
        raise ConfigError(f"--into {keyring}: no key {key_id} there (nor is it the built-in registry key)")
    _pin(keyring, {**known, "not_after": at})
    say(f"{key_id} retires at {at} in {keyring}")
