"""Everything a crawl needs, checked before its first request.

A scheduled crawl that cannot work must say so at once, in one line, with the
configuration exit status, and leave nothing half-written: so the keyring, the
resolver URLs, the signing key, the archive store and the frontier are each opened
here, and a crawl never starts without its verifier.
"""

from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

import click

from pith.keyring import ARCHIVE, Keyring
from pith.signing import Signer
from storage.archive.layout import WRITER_LEASE
from storage.archive.open_store import open_store
from storage.archive.s3_writes import CreateOnlyIgnored
from storage.archive.stores import ObjectStore, StorageError

from ..exit_status import ConfigError
from ..output import say

SINGLE_WRITER_HELP = (
    "Write to an S3-compatible store that ignores conditional writes (If-None-Match: *, e.g. rclone serve s3): "
    f"check each name before writing it and hold {WRITER_LEASE} in the prefix for the crawl. Only one writer "
    "may use that prefix."
)


def check_http_url(url: str, option: str, example: str = "https://pith.science") -> str:
    """An http(s) URL with a host."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is not a number raises
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{option} {url!r} is not an http(s) URL with a host (e.g. {example})")
    return url


def check_base_url(url: str, option: str) -> str:
    """A resolver or mirror base."""
    return check_http_url(url, option).rstrip("/")


def check_archive_keyring(keyrings: Iterable[str]) -> Keyring:
    """``--archive-keyring``: the other workers' archiver keys, readable (it may be empty)."""
    from ..keyrings import pinned_keys

    return pinned_keys(keyrings, default_keys=False, role=ARCHIVE, option="--archive-keyring")


def signing_key_file(path: str | None) -> Path:
    """Where the signing key of a crawl or a sync is: ``path`` (``--signing-key``), which must exist,
    since only the default key is made on first use (a mistyped path never becomes a
    new key), or the default. Checked before the archive is opened."""
    from storage.archive.signing_key import default_key_path

    if path and not Path(path).exists():
        raise ConfigError(
            f"--signing-key {path}: no such file; only the default key ({default_key_path()}) is made on first use: "
            f"check the path, or make a key there with: pith-archiver keys generate --signing-key {path}"
        )
    return Path(path) if path else default_key_path()


def check_signing_key(
    path: str | None, store: ObjectStore | None = None, add: bool = False, named: Keyring | None = None
) -> Signer:
    """The key that signs what a crawl or a sync commits (``signing_key_file``). A key that would
    start signing an archive other keys sign (a mistyped path, a new machine, a key file
    lost) is refused unless ``add`` (``--add-signing-key``) or ``named`` holds it (the
    ``--archive-keyring`` of a shared crawl's workers): audits pinning the old key would
    find its manifests unpinned. Nothing is made before the refusal."""
    from storage.archive.reader import signing_key_ids
    from storage.archive.signing_key import load_or_create

    where = signing_key_file(path)
    try:
        signer = Signer.load(where) if where.exists() else None
        signers = signing_key_ids(store) if store is not None else set()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"--signing-key {where}: not a usable signing key ({exc})") from None
    except StorageError as exc:
        raise ConfigError(f"--out: {exc}") from None
    known = signer is not None and (signer.key_id in signers or (named is not None and signer.key_id in named))
    if signers and not known and not add:
        this = f"{signer.key_id} ({where})" if signer else f"this machine's key, which does not exist yet ({where})"
        raise ConfigError(
            f"--out {store.uri if store else ''} is signed by {', '.join(sorted(signers))}, not by {this}: "
            "give --signing-key with the key that signs it, or pass --add-signing-key to sign it with this key "
            "too (readers then pin both)"
        )
    try:
        return signer or load_or_create(None)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"--signing-key {where}: not a usable signing key ({exc})") from None


def check_store(
    archive: str, endpoint_url: str | None, single_writer: bool = False, option: str = "--out"
) -> ObjectStore:
    """The archive's folder or bucket, which takes writes: probed, not assumed (an S3
    store's conditional writes too). A single writer's lease is let go when the command
    ends, however it ends."""
    if single_writer and not archive.startswith("s3://"):
        raise ConfigError(f"--s3-single-writer applies to s3:// locations, and {option} {archive} is not one")
    try:
        store = open_store(archive, endpoint_url, single_writer=single_writer)
        ctx = click.get_current_context(silent=True)
        if ctx is not None:
            ctx.call_on_close(store.release)
        store.probe()
    except ValueError as exc:
        raise ConfigError(f"{option} {archive}: {exc}") from None
    except CreateOnlyIgnored as exc:
        raise ConfigError(f"{option}: {exc}; if only one writer ever uses it, pass --s3-single-writer") from None
    except StorageError as exc:
        raise ConfigError(f"{option}: {exc}") from None
    if single_writer:
        say(
            f"notice: writing to {store.uri} as its single writer, holding {WRITER_LEASE}: no other writer may use it "
            "until this job ends",
            err=True,
        )
    return store


def check_frontier(url: str) -> None:
    from crawler.frontier import FrontierError, check_url, connect

    try:
        check_url(url)
        connect(url).close()
    except FrontierError as exc:
        raise ConfigError(f"--frontier: {exc}") from None
