"""What ``verify`` reads from S3: one object (``s3://bucket/key``: a bundle, a feed, a
release.json, a WACZ) or every document under a prefix (an archive's raw bundles and
feeds, as in a folder), with the endpoint and AWS variables (credentials, region,
``AWS_ENDPOINT_URL_S3``) the commands that read an archive take.

A prefix is told from an object as a folder is from a file: by what lies below it
(one listing request). Errors are StorageError, naming the bucket and the cause."""

from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import click

from storage.archive.layout import LayoutError, check_path
from storage.archive.open_store import open_store
from storage.archive.stores import ObjectStore, StorageError

SCHEME = "s3://"

endpoint_option = click.option(
    "--s3-endpoint-url", default=None, help="S3-compatible endpoint (MinIO, Ceph, R2...) for s3:// locations."
)


@lru_cache(maxsize=16)
def _bucket(bucket: str, endpoint_url: str | None) -> ObjectStore:
    """One client per bucket in a process (making a boto3 client costs more than a
    bundle), once the bucket was seen to exist and take the credentials (StoreRefused)."""
    store = open_store(f"{SCHEME}{bucket}", endpoint_url)
    store.probe_reads()
    return store


def _located(uri: str, endpoint_url: str | None) -> tuple[ObjectStore, str]:
    """The bucket's store and the key ``uri`` names in it."""
    bucket, _, key = uri[len(SCHEME) :].partition("/")
    if not bucket:
        raise StorageError(f"{uri}: no bucket named")
    return _bucket(bucket, endpoint_url), key


def documents(uri: str, endpoint_url: str | None) -> tuple[list[tuple[str, str]], bool] | None:
    """``(source, path below the prefix)`` of every ``*.json`` and ``*.jsonl`` object
    under the prefix ``uri``, by key, and whether the prefix holds an archive (an object
    under manifests/); None when nothing lies below it and ``uri`` names one object."""
    store, key = _located(uri, endpoint_url)
    prefix = f"{key.rstrip('/')}/" if key.rstrip("/") else ""
    below = [stored.path[len(prefix) :] for stored in store.list(prefix)]
    if not below and key and not key.endswith("/"):
        return None
    root = f"{uri[: len(uri) - len(key)].rstrip('/')}/{prefix}"
    found = sorted(path for path in below if path.endswith((".json", ".jsonl")))
    return [(root + path, path) for path in found], any(path.startswith("manifests/") for path in below)


def chunks(uri: str, endpoint_url: str | None) -> Iterator[bytes]:
    """The object's bytes, as they arrive."""
    store, key = _located(uri, endpoint_url)
    try:
        return store.read_chunks(check_path(key))
    except LayoutError as exc:
        raise StorageError(f"{uri}: {exc}") from None


def read_at_most(uri: str, max_bytes: int, endpoint_url: str | None) -> bytes:
    """The object's bytes, at most one byte past ``max_bytes`` (the size check names the rest)."""
    data = bytearray()
    for chunk in chunks(uri, endpoint_url):
        data += chunk
        if len(data) > max_bytes:
            return bytes(data[: max_bytes + 1])
    return bytes(data)


def folder(uri: str, endpoint_url: str | None) -> ObjectStore:
    """The prefix holding the object ``uri`` (a release.json's release), as a store."""
    _located(uri, endpoint_url)  # a bucket is named
    return open_store(uri.rsplit("/", 1)[0], endpoint_url)


@contextmanager
def downloaded(uri: str, endpoint_url: str | None) -> Iterator[Path]:
    """A local copy of the object, for readers that seek (a WACZ is a ZIP), removed after."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="pith-verify-") as work:
        copy = Path(work) / uri.rsplit("/", 1)[-1]
        with open(copy, "wb") as out:
            for chunk in chunks(uri, endpoint_url):
                out.write(chunk)
        yield copy
