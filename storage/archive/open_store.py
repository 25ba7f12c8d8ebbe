"""Which object store an archive's URI names: the one module that knows every backend,
so the interface (``storage.archive.stores``) imports none of them."""

from urllib.parse import unquote, urlparse

from storage.archive.folder_store import LocalStore
from storage.archive.s3_store import S3Store
from storage.archive.stores import ObjectStore


def open_store(
    uri: str, endpoint_url: str | None = None, *, single_writer: bool = False, **options: int
) -> ObjectStore:
    """``s3://bucket/prefix``, ``file:///path`` or a plain folder path; ``single_writer``
    lets an S3 store that ignores create-only puts take writes (``S3Store``)."""
    if uri.startswith("s3://"):
        bucket, _, prefix = uri[5:].partition("/")
        if not bucket:
            raise ValueError(f"no bucket in {uri!r}")
        return S3Store(bucket, prefix, endpoint_url=endpoint_url, single_writer=single_writer, **options)
    if endpoint_url or options or single_writer:
        raise ValueError("endpoint and S3 options apply to s3:// archives only")
    if uri.startswith("file://"):
        return LocalStore(unquote(urlparse(uri).path))
    if "://" in uri:
        raise ValueError(f"unsupported archive URI {uri!r}: use a folder, file:// or s3://")
    return LocalStore(uri)
