"""What the commands that read an archive (``serve``, ``export``) share: telling an
archive from a corpus folder, its options, and which manifest keys to trust."""

from pathlib import Path

import click

from pith.keyring import Keyring, KeyringError
from storage import layout
from storage.committed import reading_keyring
from storage.stores import ObjectStore, StorageError, open_store

TRUST_HELP = ("Manifests are trusted when signed by a --keyring key or, unless --no-archive-keys, by an "
              "archiver key the archive publishes under keys/: this reads your own archive; "
              "`pith-archiver audit` is the tool that checks its trust.")


def is_archive(target: str) -> bool:
    """An S3 prefix, or a folder holding a manifests/ folder."""
    return target.startswith(("s3://", "file://")) or (Path(target) / layout.MANIFESTS).is_dir()


def archive_options(func):
    func = click.option("--no-archive-keys", is_flag=True,
                        help="Trust only the --keyring keys, not the keys published in the archive.")(func)
    func = click.option("--keyring", "keyrings", multiple=True, type=click.Path(exists=True, dir_okay=False),
                        help='Trust manifests signed by the keys in this JSON file ({"keys": [...]}, or one '
                             "key document such as an archive's keys/<key_id>.json); repeatable.")(func)
    func = click.option("--s3-endpoint-url", default=None,
                        help="S3-compatible endpoint (MinIO, Ceph, R2...) for s3:// locations.")(func)
    return func


def open_location(uri: str, s3_endpoint_url: str | None) -> ObjectStore:
    """A folder or s3:// prefix as a store; the endpoint applies to s3:// only."""
    try:
        return open_store(uri, s3_endpoint_url if uri.startswith("s3://") else None)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


def open_archive(uri: str, s3_endpoint_url, keyrings, no_archive_keys) -> tuple[ObjectStore, Keyring]:
    """The archive's store and the keyring its manifests are read with."""
    store = open_location(uri, s3_endpoint_url)
    try:
        pinned = Keyring.build(keyrings, default_keys=False)
        keyring = reading_keyring(store, pinned, archive_keys=not no_archive_keys)
    except KeyringError as exc:
        raise click.UsageError(str(exc)) from None
    except StorageError as exc:
        raise click.ClickException(str(exc)) from None
    if not len(keyring):
        raise click.UsageError(f"no key to trust the manifests of {uri} with: give --keyring FILE"
                               + ("" if no_archive_keys else " (the archive publishes no keys under keys/)"))
    return store, keyring
