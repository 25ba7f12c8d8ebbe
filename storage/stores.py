"""Object stores: a local folder and S3-compatible buckets, both create-only.

An archive never changes an object once written. ``put_*`` creates the object, or
finds it already holding exactly these bytes (an idempotent retry, or a
content-addressed object someone else wrote) and succeeds; any other object under
that name raises ObjectExists. An object is visible under its name only once it is
whole (LocalStore links a finished temp file; S3 writes are atomic), so a
crash leaves temp files or unlisted objects, never a torn object under a final name.
"""

import base64
import ctypes
import hashlib
import itertools
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import unquote, urlparse

from .layout import TEMP_PREFIX, check_path

logger = logging.getLogger(__name__)

CHUNK = 1 << 20
LocalPath = str | os.PathLike[str]  # a file or folder on this machine
MiB = 1 << 20


class StorageError(Exception):
    """The store failed, after its own retries; nothing may be committed on top of it."""


class ObjectExists(StorageError):
    """A create-only put found another object under the name; ``existing`` is its digest."""

    def __init__(self, path: str, existing: "ObjectInfo"):
        super().__init__(f"{path} already exists with sha256 {existing.sha256} ({existing.size} bytes)")
        self.path = path
        self.existing = existing


class ObjectMissing(StorageError):
    """A read named an object the store does not hold."""


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """What a manifest says about an object: enough to re-check it byte for byte; for
    a table file also its table and row count. Writers and readers keep it typed:
    ``entry()`` and ``from_entry`` are the one conversion to and from a manifest's
    JSON entry."""

    path: str
    sha256: str
    size: int
    table: str | None = None
    rows: int | None = None

    def entry(self) -> dict:
        entry = {"path": self.path, "sha256": self.sha256, "size": self.size}
        if self.table is not None:
            entry.update(table=self.table, rows=self.rows)
        return entry

    @classmethod
    def from_entry(cls, entry: dict) -> "ObjectInfo":
        """An entry of a verified manifest (``storage.manifest.listed``)."""
        return cls(entry["path"], entry["sha256"], entry["size"], entry.get("table"), entry.get("rows"))


@dataclass(frozen=True)
class StoredObject:
    """One listing row: what the store itself reports, no content read."""

    path: str
    size: int
    modified: datetime


def hash_file(local_path: LocalPath) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with open(local_path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


class ObjectStore(ABC):
    """The operations the archive needs, on paths relative to the archive root."""

    uri: str
    upload_threads = 8  # writes a run keeps under way at once

    def put_bytes(self, path: str, data: bytes) -> ObjectInfo:
        info = ObjectInfo(check_path(path), hashlib.sha256(data).hexdigest(), len(data))
        return info if self._create_bytes(path, data, info.sha256) else self._settle(info)

    def put_file(self, path: str, local_path: LocalPath) -> ObjectInfo:
        """Store a local file (large tables): streamed, multipart on S3."""
        info = ObjectInfo(check_path(path), *hash_file(local_path))
        return info if self._create_file(path, local_path, info.sha256) else self._settle(info)

    def _settle(self, info: ObjectInfo) -> ObjectInfo:
        existing = self.digest(info.path)
        if existing != info:
            raise ObjectExists(info.path, existing)
        logger.debug("%s already holds these bytes", info.path)
        return info

    def digest(self, path: str) -> ObjectInfo:
        """Hash an object as stored, streaming (what an audit re-checks)."""
        digest, size = hashlib.sha256(), 0
        for chunk in self.read_chunks(path):
            digest.update(chunk)
            size += len(chunk)
        return ObjectInfo(path, digest.hexdigest(), size)

    def get_bytes(self, path: str) -> bytes:
        return b"".join(self.read_chunks(path))

    @abstractmethod
    def _create_bytes(self, path: str, data: bytes, sha256: str) -> bool:
        """Create the object; False when the name is taken."""

    @abstractmethod
    def _create_file(self, path: str, local_path: LocalPath, sha256: str) -> bool:
        """Create the object from a file; False when the name is taken."""

    @abstractmethod
    def read_chunks(self, path: str, chunk_size: int = CHUNK) -> Iterator[bytes]:
        """Yield the object's bytes in chunks; ObjectMissing when absent."""

    @abstractmethod
    def list(self, prefix: str = "") -> Iterator[StoredObject]:
        """Yield StoredObject for every object whose path starts with ``prefix``."""

    @abstractmethod
    def delete(self, path: str) -> None:
        """Remove an object (an orphan); absent is fine."""

    @abstractmethod
    def replace_bytes(self, path: str, data: bytes) -> None:
        """Write the one kind of object that changes (a log's published checkpoint):
        readers see the old bytes or the new, never a part."""

    @abstractmethod
    def flush(self) -> None:
        """Make every object written so far durable (before a manifest names it)."""

    @abstractmethod
    def probe(self) -> None:
        """Raise StorageError now if this store cannot take writes: a run checks before
        its first request rather than failing at its first object."""


def _syncfs() -> Callable[[int], None] | None:
    """Linux's syncfs(2): every write to one filesystem made durable in one call (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    call = getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)
    if call is None:
        return None

    def syncfs(fd: int) -> None:
        if call(fd) != 0:
            number = ctypes.get_errno()
            raise OSError(number, os.strerror(number))

    return syncfs


SYNCFS = _syncfs()


def _sync(uri: str, path: str, sync: Callable[[int], None]) -> None:
    """``sync`` (fsync, or syncfs) on the file or folder at ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            sync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise StorageError(f"{uri}: cannot sync {path}: {exc.strerror or exc}") from exc


class LocalStore(ObjectStore):
    """A folder. Writes go to a temp file in the target folder, then are hard-linked
    to the final name, which fails rather than replace an object. They are made
    durable by ``flush``, before a manifest names them: one ``syncfs`` of the
    archive's filesystem on Linux, else an fsync of each file and folder written.

    A write is a handful of system calls, each of which gives up the GIL and takes it
    back from the crawl's thread: two upload threads keep up with a crawl, where four
    (or an fsync per file, which holds a thread and its queued bytes) cost the crawl
    a fifth of its speed (bench/RESULTS.md, "Second round: WARC off Scrapy's thread")."""

    upload_threads = 2

    def __init__(self, root: LocalPath) -> None:
        self.root = Path(root).absolute()
        self.uri = self.root.as_uri()
        self._unsynced_dirs: set[str] = set()
        self._unsynced_files: list[str] = []  # where the filesystem cannot be synced whole
        self._made: set[str] = set()  # folders known to exist
        self._names = itertools.count()
        self._lock = threading.Lock()

    def _target(self, path: str) -> Path:
        return self.root / check_path(path)

    def _create_bytes(self, path: str, data: bytes, sha256: str) -> bool:
        def write(fd: int) -> None:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]

        return self._create(path, write)

    def _create_file(self, path: str, local_path: LocalPath, sha256: str) -> bool:
        def copy(fd: int) -> None:
            with open(local_path, "rb") as source, open(fd, "wb", closefd=False) as out:
                shutil.copyfileobj(source, out, CHUNK)

        return self._create(path, copy)

    def _create(self, path: str, write: Callable[[int], None]) -> bool:
        target = f"{self.root}/{check_path(path)}"
        folder = target.rpartition("/")[0]
        try:
            if folder not in self._made:
                self._make(folder)
            fd, temp = self._temp(folder)
            try:
                try:
                    os.fchmod(fd, 0o644)
                    write(fd)
                finally:
                    os.close(fd)
                os.link(temp, target)
            except FileExistsError:
                return False
            finally:
                os.unlink(temp)
        except OSError as exc:
            raise StorageError(f"{self.uri}: cannot write {path}: {exc}") from exc
        with self._lock:
            self._unsynced_dirs.add(folder)
            if SYNCFS is None:
                self._unsynced_files.append(target)
        return True

    def _temp(self, folder: str) -> tuple[int, str]:
        while True:
            temp = f"{folder}/{TEMP_PREFIX}{os.getpid()}-{next(self._names)}"
            try:
                return os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), temp
            except FileExistsError:  # a killed run's leftover, of a process with the same id
                continue

    def _make(self, folder: str) -> None:
        """Create ``folder`` and its parents; each goes to the next flush (a new entry in its parent)."""
        os.makedirs(folder, exist_ok=True)
        root = str(self.root)
        with self._lock:
            while folder not in self._made and len(folder) > len(root):
                self._made.add(folder)
                folder = folder.rpartition("/")[0]
                self._unsynced_dirs.add(folder)

    def read_chunks(self, path: str, chunk_size: int = CHUNK) -> Iterator[bytes]:
        try:
            with open(self._target(path), "rb") as handle:
                while chunk := handle.read(chunk_size):
                    yield chunk
        except FileNotFoundError:
            raise ObjectMissing(f"{self.uri}: no object {path}") from None
        except OSError as exc:
            raise StorageError(f"{self.uri}: cannot read {path}: {exc}") from exc

    def list(self, prefix: str = "") -> Iterator[StoredObject]:
        top = self.root / prefix.rpartition("/")[0] if prefix else self.root
        for folder, dirs, files in os.walk(top):
            dirs.sort()
            for name in sorted(files):
                full = Path(folder, name)
                path = full.relative_to(self.root).as_posix()
                if not path.startswith(prefix):
                    continue
                try:
                    stat = full.stat()
                except FileNotFoundError:  # a temp file a concurrent write just removed
                    continue
                yield StoredObject(path, stat.st_size, datetime.fromtimestamp(stat.st_mtime, timezone.utc))

    def replace_bytes(self, path: str, data: bytes) -> None:
        target = f"{self.root}/{check_path(path)}"
        folder = target.rpartition("/")[0]
        try:
            self._make(folder)
            fd, temp = self._temp(folder)
            try:
                with open(fd, "wb") as handle:
                    os.fchmod(fd, 0o644)
                    handle.write(data)
                    handle.flush()
                    os.fsync(fd)
                os.replace(temp, target)
            finally:
                if os.path.exists(temp):
                    os.unlink(temp)
            _sync(self.uri, folder, os.fsync)
        except OSError as exc:
            raise StorageError(f"{self.uri}: cannot write {path}: {exc}") from exc

    def delete(self, path: str) -> None:
        try:
            self._target(path).unlink(missing_ok=True)
        except OSError as exc:
            raise StorageError(f"{self.uri}: cannot delete {path}: {exc}") from exc

    @property
    def unsynced_folders(self) -> frozenset[str]:
        """The folders whose new entries the next ``flush`` makes durable."""
        with self._lock:
            return frozenset(self._unsynced_dirs)

    def flush(self) -> None:
        with self._lock:
            folders, self._unsynced_dirs = self._unsynced_dirs, set()
            files, self._unsynced_files = self._unsynced_files, []
        if SYNCFS is not None:
            if folders:  # anything written since the last flush
                _sync(self.uri, str(self.root), SYNCFS)
            return
        for path in [*files, *sorted(folders, key=lambda d: d.count("/"), reverse=True)]:
            _sync(self.uri, path, os.fsync)

    def probe(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise StorageError(f"{self.root} is not a folder")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=self.root)
            os.close(fd)
            os.unlink(temp)
        except OSError as exc:
            raise StorageError(f"{self.root} is not a writable folder: {exc.strerror or exc}") from None


class S3Store(ObjectStore):
    """An S3-compatible bucket (AWS, MinIO, Ceph, R2) under an optional key prefix.

    Credentials, region and endpoint come from boto3's standard chain (environment,
    config files, ``AWS_ENDPOINT_URL_S3``) unless ``endpoint_url`` is given. Every
    write through this client is conditional (``If-None-Match: *``, added to
    PutObject and CompleteMultipartUpload by an event hook, since the managed
    transfer does not accept it) and carries a SHA-256 checksum.
    """

    CONFLICT_RETRIES = 5  # 409 ConditionalRequestConflict: a concurrent write, retry

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        max_attempts: int = 10,
        multipart_threshold: int = 16 * MiB,
        multipart_chunksize: int = 16 * MiB,
        max_concurrency: int = 4,
    ) -> None:
        import boto3
        from boto3.s3.transfer import TransferConfig
        from botocore.config import Config

        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.uri = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        config = Config(
            retries={"mode": "adaptive", "max_attempts": max_attempts}, max_pool_connections=32
        )  # upload pool threads x multipart parts
        self._client = boto3.session.Session().client("s3", endpoint_url=endpoint_url, config=config)
        self.endpoint_url = self._client.meta.endpoint_url  # as resolved from the argument or the chain
        for operation in ("PutObject", "CompleteMultipartUpload"):
            self._client.meta.events.register(f"before-parameter-build.s3.{operation}", _create_only)
        self._transfer = TransferConfig(
            multipart_threshold=multipart_threshold,
            multipart_chunksize=multipart_chunksize,
            max_concurrency=max_concurrency,
        )

    def _key(self, path: str) -> str:
        return f"{self.prefix}/{path}" if self.prefix else path

    def _error(self, action: str, path: str, exc: Exception) -> StorageError:
        return StorageError(f"{self.uri}: cannot {action} {path}: {exc}")

    def _create_bytes(self, path: str, data: bytes, sha256: str) -> bool:
        checksum = base64.b64encode(bytes.fromhex(sha256)).decode("ascii")
        return self._conditional(
            path,
            lambda: self._client.put_object(
                Bucket=self.bucket,
                Key=self._key(path),
                Body=data,
                IfNoneMatch="*",
                ChecksumAlgorithm="SHA256",
                ChecksumSHA256=checksum,
            ),
        )

    def _create_file(self, path: str, local_path: LocalPath, sha256: str) -> bool:
        def upload() -> None:  # upload_fileobj, unlike upload_file, lets the 412 ClientError through
            with open(local_path, "rb") as source:
                self._client.upload_fileobj(
                    source,
                    self.bucket,
                    self._key(path),
                    Config=self._transfer,
                    ExtraArgs={"ChecksumAlgorithm": "SHA256"},
                )

        return self._conditional(path, upload)

    def _conditional(self, path: str, write: Callable[[], object]) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError

        for attempt in range(self.CONFLICT_RETRIES):
            try:
                write()
                return True
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code")
                if code == "PreconditionFailed":
                    return False
                if code != "ConditionalRequestConflict":
                    raise self._error("write", path, exc) from exc
                logger.info("%s: concurrent write of %s, retrying", self.uri, path)
                time.sleep(0.05 * 2**attempt)
            except BotoCoreError as exc:
                raise self._error("write", path, exc) from exc
        raise StorageError(f"{self.uri}: writes of {path} kept conflicting")

    def read_chunks(self, path: str, chunk_size: int = CHUNK) -> Iterator[bytes]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            body = self._client.get_object(Bucket=self.bucket, Key=self._key(check_path(path)))["Body"]
            yield from body.iter_chunks(chunk_size)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise ObjectMissing(f"{self.uri}: no object {path}") from None
            raise self._error("read", path, exc) from exc
        except BotoCoreError as exc:
            raise self._error("read", path, exc) from exc

    def list(self, prefix: str = "") -> Iterator[StoredObject]:
        from botocore.exceptions import BotoCoreError, ClientError

        root = f"{self.prefix}/" if self.prefix else ""
        try:
            for page in self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=root + prefix
            ):
                for item in page.get("Contents", ()):
                    yield StoredObject(item["Key"][len(root) :], item["Size"], item["LastModified"])
        except (BotoCoreError, ClientError) as exc:
            raise self._error("list", prefix or "/", exc) from exc

    def replace_bytes(self, path: str, data: bytes) -> None:
        """Through a client of its own: the store's client makes every write create-only."""
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            client = boto3.session.Session().client(
                "s3", endpoint_url=self.endpoint_url, config=self._client.meta.config
            )
            client.put_object(
                Bucket=self.bucket, Key=self._key(check_path(path)), Body=data, ChecksumAlgorithm="SHA256"
            )
        except (BotoCoreError, ClientError) as exc:
            raise self._error("write", path, exc) from exc

    def delete(self, path: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.delete_object(Bucket=self.bucket, Key=self._key(check_path(path)))
        except (BotoCoreError, ClientError) as exc:
            raise self._error("delete", path, exc) from exc

    def flush(self) -> None:
        """Nothing to do: S3 acknowledges a write once it is durable."""

    def probe(self) -> None:
        """The bucket exists and the credentials are accepted (HeadBucket; no write is
        made, since a bucket under object lock could not delete a probe object)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code"))
            why = {
                "404": "does not exist",
                "NoSuchBucket": "does not exist",
                "403": "refuses these credentials",
                "AccessDenied": "refuses these credentials",
            }.get(code, exc)
            raise StorageError(f"{self.uri}: bucket {self.bucket} {why} (at {self.endpoint_url})") from None
        except BotoCoreError as exc:
            raise StorageError(f"{self.uri}: {exc} (at {self.endpoint_url})") from None


def _create_only(params: dict, **_: object) -> None:
    params.setdefault("IfNoneMatch", "*")


def open_store(uri: str, endpoint_url: str | None = None, **options: int) -> ObjectStore:
    """``s3://bucket/prefix``, ``file:///path`` or a plain folder path."""
    if uri.startswith("s3://"):
        bucket, _, prefix = uri[5:].partition("/")
        if not bucket:
            raise ValueError(f"no bucket in {uri!r}")
        return S3Store(bucket, prefix, endpoint_url=endpoint_url, **options)
    if endpoint_url or options:
        raise ValueError("endpoint and S3 options apply to s3:// archives only")
    if uri.startswith("file://"):
        return LocalStore(unquote(urlparse(uri).path))
    if "://" in uri:
        raise ValueError(f"unsupported archive URI {uri!r}: use a folder, file:// or s3://")
    return LocalStore(uri)
