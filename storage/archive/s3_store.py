"""The S3 store: an archive in an S3-compatible bucket, every write conditional
(``If-None-Match: *``) and checksummed, once the store was seen to refuse a second
create-only put (``storage.archive.s3_writes``)."""

import base64
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from storage.archive.layout import WRITER_LEASE, check_path
from storage.archive.s3_writes import CreateOnlyIgnored, WritePromises, let_go, probe_writes, take_lease
from storage.archive.stores import (
    CHUNK,
    LocalPath,
    MiB,
    ObjectMissing,
    ObjectStore,
    StorageError,
    StoredObject,
    StoreRefused,
)

logger = logging.getLogger(__name__)


REACH_SECONDS = 5  # to connect to the endpoint, once, before a store's first operation
REFUSALS = {  # HeadBucket's answers that are the caller's to fix
    "404": "does not exist: create it first, or check the name",
    "NoSuchBucket": "does not exist: create it first, or check the name",
    "403": "refuses these credentials: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the profile)",
    "AccessDenied": "refuses these credentials: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the profile)",
}


class S3Store(ObjectStore):
    """An S3-compatible bucket (AWS, MinIO, Ceph, R2) under an optional key prefix.

    Credentials, region and endpoint come from boto3's standard chain (environment,
    config files, ``AWS_ENDPOINT_URL_S3``) unless ``endpoint_url`` is given. Every
    write through this client is conditional (``If-None-Match: *``, added to
    PutObject and CompleteMultipartUpload by an event hook, since the managed
    transfer does not accept it) and carries a SHA-256 checksum.

    Before its first write it checks that the store refuses a second create-only put
    (``s3_writes.probe_writes``); one that does not is refused (CreateOnlyIgnored)
    unless ``single_writer``: then each write first checks that its name is free, and
    the store holds the prefix's writer lease until ``release``.
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
        single_writer: bool = False,
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
        self._boto = boto3.session.Session().client("s3", endpoint_url=endpoint_url, config=config)
        self.endpoint_url = self._boto.meta.endpoint_url  # as resolved from the argument or the chain
        for operation in ("PutObject", "CompleteMultipartUpload"):
            self._boto.meta.events.register(f"before-parameter-build.s3.{operation}", _create_only)
        self._reached = threading.Lock()
        self._reachable = False
        self.single_writer = single_writer
        self._checking = threading.Lock()
        self.promises: WritePromises | None = None  # once the writes were checked
        self._lease: bytes | None = None
        self._transfer = TransferConfig(
            multipart_threshold=multipart_threshold,
            multipart_chunksize=multipart_chunksize,
            max_concurrency=max_concurrency,
        )

    @property
    def _client(self) -> Any:
        """The client, once the endpoint was seen to answer: an endpoint that refuses
        connections, or a name that does not resolve, fails the first operation at once,
        not after the retries with backoff meant for a store that answered before."""
        if not self._reachable:
            with self._reached:
                if not self._reachable:
                    self._reach()
                    self._reachable = True
        return self._boto

    def _reach(self) -> None:
        """Whether the endpoint answers at all: one attempt, a short connect."""
        import boto3
        from botocore.config import Config
        from botocore.exceptions import ConnectionError as NoConnection

        once = Config(retries={"mode": "standard", "max_attempts": 1}, connect_timeout=REACH_SECONDS)
        try:
            client = boto3.session.Session().client("s3", endpoint_url=self.endpoint_url, config=once)
            client.head_bucket(Bucket=self.bucket)
        except NoConnection as exc:
            raise StorageError(f"{self.uri}: {described(exc)} (at {self.endpoint_url})") from None
        except Exception:  # noqa: BLE001, S110 - it answered, or failed otherwise: the operation itself says how
            pass

    def _key(self, path: str) -> str:
        return f"{self.prefix}/{path}" if self.prefix else path

    def _error(self, action: str, path: str, exc: Exception) -> StorageError:
        return StorageError(f"{self.uri}: cannot {action} {path}: {described(exc)}")

    def _checked_writes(self) -> WritePromises:
        """What the store promises about writes, probed once, before the first write;
        CreateOnlyIgnored for a store that takes a second create-only put, unless this
        is its single writer, which then takes the prefix's lease."""
        from botocore.exceptions import BotoCoreError, ClientError

        with self._checking:
            if self.promises is not None:
                return self.promises
            try:
                promises = probe_writes(self._client, self.bucket, self._key)
                if not promises.create_only and not self.single_writer:
                    raise CreateOnlyIgnored(
                        f"{self.uri}: the store does not honour conditional writes (If-None-Match: *): a second "
                        "create-only put of one key replaced the first, so writers sharing this prefix could "
                        "overwrite each other"
                    )
                if self.single_writer:
                    self._lease = take_lease(
                        self._client, self.bucket, self._key(WRITER_LEASE), self.uri, promises.create_only
                    )
            except (BotoCoreError, ClientError) as exc:
                raise self._error("write", "a probe object", exc) from exc
            self.promises = promises
            return promises

    def release(self) -> None:
        """Let go of the writer lease, if this store holds it."""
        from botocore.exceptions import BotoCoreError, ClientError

        lease, self._lease = self._lease, None
        if lease is None:
            return
        try:
            let_go(self._client, self.bucket, self._key(WRITER_LEASE), lease)
        except (BotoCoreError, ClientError) as exc:
            logger.warning("%s: could not remove the writer lease %s: %s", self.uri, WRITER_LEASE, described(exc))

    def _taken(self, path: str) -> bool:
        """Whether ``path`` holds an object: a single writer's check before each write,
        where the store would not refuse a create-only put."""
        from botocore.exceptions import ClientError

        try:
            self._client.head_object(Bucket=self.bucket, Key=self._key(path))
            return True
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return False
            raise

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

        checked = self._checked_writes().create_only
        for attempt in range(self.CONFLICT_RETRIES):
            try:
                if not checked and self._taken(path):
                    return False
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
        """The bucket exists, the credentials are accepted (``probe_reads``) and the
        store refuses a second create-only put (``_checked_writes``: its probe object is
        removed; under object lock, a delete marker hides it)."""
        self.probe_reads()
        self._checked_writes()

    def probe_reads(self) -> None:
        """The bucket exists and the credentials are accepted (HeadBucket)."""
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        try:
            self._client.head_bucket(Bucket=self.bucket)
        except NoCredentialsError:
            raise StoreRefused(
                f"{self.uri}: no credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)"
            ) from None
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code"))
            why = REFUSALS.get(code)
            if why is None:
                raise StorageError(f"{self.uri}: bucket {self.bucket}: {exc} (at {self.endpoint_url})") from None
            raise StoreRefused(f"{self.uri}: bucket {self.bucket} {why} (at {self.endpoint_url})") from None
        except BotoCoreError as exc:
            raise StorageError(f"{self.uri}: {described(exc)} (at {self.endpoint_url})") from None


def described(exc: Exception) -> str:
    """botocore's error, and for an endpoint it could not connect to, why: botocore
    names the URL but leaves out a refused connection or a name that does not resolve."""
    import socket  # only for an error botocore raised: off the start-up of commands that only read

    from botocore.exceptions import ConnectionError as NoConnection

    if not isinstance(exc, NoConnection):
        return str(exc)
    error = getattr(exc, "kwargs", {}).get("error")
    root = error.__cause__ if error is not None and error.__cause__ is not None else error
    if isinstance(root, ConnectionRefusedError):
        return f"{exc}: connection refused"
    if isinstance(root, socket.gaierror):
        return f"{exc}: name does not resolve"
    if isinstance(root, TimeoutError) or "timeout" in type(exc).__name__.lower():
        return f"{exc}: timed out"
    return f"{exc}: {root}" if root is not None else str(exc)


def _create_only(params: dict[str, Any], **_: object) -> None:
    params.setdefault("IfNoneMatch", "*")
