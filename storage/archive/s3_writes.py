"""What an S3-compatible store promises about writes, checked rather than assumed.

The archive's append-only promise rests on create-only puts (``If-None-Match: *``),
which AWS, MinIO, R2 and moto honour and some S3-compatible servers ignore (rclone's
``serve s3`` takes a second create-only put of a key and overwrites the first). So,
before its first write to a prefix, a store puts one probe object twice, create-only,
and removes it: a store that took the second put is refused, unless its single writer
says so (``single_writer``). That writer checks before each write that the name is
free and holds a lease object in the prefix for its run, which another writer that
asks for one finds there.

The same probe sees whether a ranged read answers with the checksum of the whole
object (rclone does): readers whose SDK checks such a checksum (pyarrow's) then fail
with "Response checksums mismatch" unless told to check only where an operation
requires it, which the crawl's printed commands then say.
"""

import base64
import hashlib
import json
import os
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from storage.archive.layout import TEMP_PREFIX, WRITER_LEASE
from storage.archive.stores import StorageError


class CreateOnlyIgnored(StorageError):
    """The store took a second create-only put of one key: writers sharing its prefix
    could overwrite each other's objects without a word."""


class LeaseHeld(StorageError):
    """Another writer holds the prefix's lease (or one killed before it let go)."""


@dataclass(frozen=True)
class WritePromises:
    """What the probe found."""

    create_only: bool  # a second create-only put of a key was refused (412)
    whole_checksum_on_ranges: bool  # a ranged read carried the whole object's checksum


def _code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code"))


def _checksum(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode("ascii")


def probe_writes(client: Any, bucket: str, key_of: Any) -> WritePromises:
    """Put one probe object, read a byte of it back, put it again, create-only, and
    remove it: four requests. ``client`` makes every put create-only (``S3Store``'s hook)."""
    from botocore.exceptions import ClientError, FlexibleChecksumError

    key = key_of(f"{TEMP_PREFIX}probe-{secrets.token_hex(8)}")
    first = b"pith-archiver probe: create-only puts\n"
    client.put_object(Bucket=bucket, Key=key, Body=first, ChecksumAlgorithm="SHA256", ChecksumSHA256=_checksum(first))
    try:
        try:  # as the archive's objects are: with a SHA-256 checksum
            ranged = client.get_object(Bucket=bucket, Key=key, Range="bytes=0-0", ChecksumMode="ENABLED")
            part = ranged["Body"].read()
            told = ranged["ResponseMetadata"]["HTTPHeaders"].get("x-amz-checksum-sha256")
            whole = told is not None and told != _checksum(part)
        except FlexibleChecksumError:  # botocore checked the range against the whole object's checksum
            whole = True
        try:
            client.put_object(Bucket=bucket, Key=key, Body=b"a second put\n", IfNoneMatch="*")
            create_only = False
        except ClientError as exc:
            if _code(exc) not in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise
            create_only = True
    finally:
        client.delete_object(Bucket=bucket, Key=key)
    return WritePromises(create_only, whole)


def lease_document() -> bytes:
    """Who holds the lease: the host, the process, since when, and a token of its own."""
    import socket

    holder = {
        "holder": f"{socket.gethostname()}.{os.getpid()}",
        "since": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "token": secrets.token_hex(16),
        "why": "pith-archiver --s3-single-writer: only one writer may use this prefix while this object exists",
    }
    return json.dumps(holder, sort_keys=True).encode() + b"\n"


def take_lease(client: Any, bucket: str, key: str, uri: str, create_only: bool) -> bytes:
    """Create the lease object, or LeaseHeld naming its holder. On a store that
    honours create-only puts the put itself decides; on one that does not, the name
    is checked first and the lease read back after (two writers starting within the
    same instant are not told apart: the store gives no way to)."""
    from botocore.exceptions import ClientError

    mine = lease_document()
    try:
        if not create_only:
            held = _read(client, bucket, key)
            if held is not None:
                raise _held(uri, held)
        client.put_object(Bucket=bucket, Key=key, Body=mine, IfNoneMatch="*")
    except ClientError as exc:
        if _code(exc) not in ("PreconditionFailed", "ConditionalRequestConflict"):
            raise
        raise _held(uri, _read(client, bucket, key) or b"{}") from None
    found = _read(client, bucket, key)
    if found != mine:
        raise _held(uri, found or b"{}")
    return mine


def let_go(client: Any, bucket: str, key: str, mine: bytes) -> None:
    """Remove the lease, if it is still this writer's."""
    if _read(client, bucket, key) == mine:
        client.delete_object(Bucket=bucket, Key=key)


def _read(client: Any, bucket: str, key: str) -> bytes | None:
    from botocore.exceptions import ClientError

    try:
        return bytes(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    except ClientError as exc:
        if _code(exc) in ("NoSuchKey", "404"):
            return None
        raise


def _held(uri: str, document: bytes) -> LeaseHeld:
    try:
        holder = json.loads(document)
    except ValueError:
        holder = {}
    who = f"{holder.get('holder', 'another writer')} since {holder.get('since', 'an unknown time')}"
    return LeaseHeld(
        f"{uri}: its writer lease {WRITER_LEASE} is held by {who}; only one writer may use this prefix: "
        f"if that writer no longer runs (it was killed), delete {uri}/{WRITER_LEASE} and run again"
    )
