"""Everything a crawl needs, checked before its first request.

A scheduled run that cannot work must say so at once, in one line, with the
configuration exit status, and leave nothing half-written: so the keyring, the
resolver URLs, the signing key, the archive store and the frontier are each opened
here, and a crawl never starts without its verifier.
"""

from collections.abc import Iterable
from urllib.parse import urlsplit

from pith.keyring import ARCHIVE, Keyring, KeyringError
from pith.signing import Signer
from storage.archive.open_store import open_store
from storage.archive.stores import ObjectStore, StorageError

from .exit_status import ConfigError


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
    try:
        return Keyring.build(keyrings, default_keys=False, role=ARCHIVE)
    except KeyringError as exc:
        raise ConfigError(f"--archive-keyring: {exc}") from None


def check_signing_key(path: str | None) -> Signer:
    from storage.archive.signing_key import load_or_create

    try:
        return load_or_create(path)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"--signing-key {path}: not a usable signing key ({exc})") from None


def check_store(archive: str, endpoint_url: str | None) -> ObjectStore:
    """The archive's folder or bucket, which takes writes: probed, not assumed."""
    try:
        store = open_store(archive, endpoint_url)
        store.probe()
        return store
    except ValueError as exc:
        raise ConfigError(f"--out {archive}: {exc}") from None
    except StorageError as exc:
        raise ConfigError(f"--out: {exc}") from None


def check_frontier(url: str) -> None:
    from crawler.frontier import FrontierError, check_url, connect

    try:
        check_url(url)
        connect(url).close()
    except FrontierError as exc:
        raise ConfigError(f"--frontier: {exc}") from None
