"""A WACZ package as anyone checks it (``pith-archiver verify X.wacz``): a ZIP whose
members have safe names and sizes, a ``datapackage-digest.json`` that hashes
``datapackage.json`` and carries the archive key's Ed25519 signature over that hash
(``check_wacz_digest``), every resource ``datapackage.json`` lists at its sha256 and
size, and no member it does not list. Then the bundles inside: the WARC response
records of the verified bundle captures ``pages/pages.jsonl`` lists, handed out for
checking one at a time.

Nothing is extracted; members are read as streams, and a member whose declared size
is past what its compressed size can honestly hold (a zip bomb) is refused before it
is read. Imports warcio, not pyarrow: ``verify`` loads this only for a WACZ."""

import hashlib
import json
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from pith.keyring import ARCHIVE, SIGNATURE_MEMBERS, Keyring
from pith.reasons import Reason, Rejected
from storage.archive.layout import LayoutError, check_path

SIGNED_MESSAGE = "wacz_datapackage_sha256_bytes"
DATAPACKAGE = "datapackage.json"
DIGEST = "datapackage-digest.json"
PAGES = "pages/pages.jsonl"
METADATA_BYTES = 64 << 20  # datapackage.json, its digest, the page list: read whole
MAX_RATIO = 200  # deflate honestly packs JSON and CDXJ well under this; a bomb packs far over it
CHUNK = 1 << 20


def check_wacz_digest(digest: dict, datapackage: bytes, keyring: Keyring) -> None:
    """Rejected unless ``datapackage-digest.json`` hashes ``datapackage`` and the
    archive key's signature over that hash verifies under ``keyring`` (the reasons of
    a manifest: datapackage.json is the package's manifest)."""
    sha256 = hashlib.sha256(datapackage).hexdigest()
    if digest.get("hash") != f"sha256:{sha256}":
        raise Rejected(Reason.MANIFEST_HASH_MISMATCH, "hash", "does not hash datapackage.json")
    signature = digest.get("pith_signature")
    if not isinstance(signature, dict) or signature.get("signed_message") != SIGNED_MESSAGE:
        raise Rejected(Reason.SCHEMA_VIOLATION, "pith_signature", "missing")
    keyring.check_signature(
        signature,
        bytes.fromhex(sha256),
        "pith_signature",
        Reason.MANIFEST_SIGNATURE_INVALID,
        SIGNATURE_MEMBERS,
        role=ARCHIVE,
    )


def bundles_in_wacz(path: Path, keyring: Keyring, max_bytes: int) -> Iterator[tuple[str, str, bytes]]:
    """``(where, url, raw)`` for each bundle response inside the WACZ at ``path``
    (``where``: its WARC member and offset; ``raw``: at most one byte past
    ``max_bytes``), once the package holds; Rejected with what does not; OSError
    when the file cannot be opened at all. Once it is open, whatever stops the ZIP or
    WARC readers (a seek its offsets send out of the file, a method they do not know)
    is the package's fault: ``wacz_malformed``."""
    with open(path, "rb") as handle:
        try:
            with zipfile.ZipFile(handle) as package:
                members = _members(package)
                resources = _checked_resources(package, members, keyring)
                pages = {(page.get("url"), page.get("ts")) for page in _pages(package, members, resources)}
                for name in sorted(resources):
                    if name.startswith("archive/") and name.endswith((".warc.gz", ".warc")):
                        yield from _bundle_responses(package, name, pages, max_bytes)
        except (zipfile.BadZipFile, zlib.error, EOFError, ArchiveLoadFailed, NotImplementedError, OSError) as exc:
            raise Rejected(Reason.WACZ_MALFORMED, "", f"not a readable ZIP ({exc})") from None


def _members(package: zipfile.ZipFile) -> dict[str, zipfile.ZipInfo]:
    """Every member by name, once each has a safe name and an honest size."""
    members: dict[str, zipfile.ZipInfo] = {}
    for info in package.infolist():
        if info.is_dir():
            continue
        try:
            name = check_path(info.filename)
        except LayoutError:
            raise Rejected(Reason.WACZ_UNSAFE_MEMBER, info.filename, "a name that leaves the package") from None
        if name in members:
            raise Rejected(Reason.WACZ_UNSAFE_MEMBER, name, "named twice")
        if info.flag_bits & 0x1:
            raise Rejected(Reason.WACZ_UNSAFE_MEMBER, name, "encrypted")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise Rejected(
                Reason.WACZ_UNSAFE_MEMBER, name, f"packed by method {info.compress_type}, not stored or deflated"
            )
        if info.compress_type != zipfile.ZIP_STORED and info.file_size > MAX_RATIO * info.compress_size + CHUNK:
            raise Rejected(
                Reason.WACZ_UNSAFE_MEMBER,
                name,
                f"{info.file_size} bytes packed in {info.compress_size} (a zip bomb?)",
            )
        members[name] = info
    return members


def _read(package: zipfile.ZipFile, members: dict[str, zipfile.ZipInfo], name: str) -> bytes:
    info = members.get(name)
    if info is None:
        raise Rejected(Reason.WACZ_MALFORMED, name, "missing")
    if info.file_size > METADATA_BYTES:
        raise Rejected(Reason.WACZ_UNSAFE_MEMBER, name, f"{info.file_size} bytes, over {METADATA_BYTES}")
    return package.read(info)


def _json(raw: bytes, name: str) -> dict:
    try:
        document = json.loads(raw)
    except ValueError as exc:
        raise Rejected(Reason.WACZ_MALFORMED, name, f"not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise Rejected(Reason.WACZ_MALFORMED, name, "not a JSON object")
    return document


def _checked_resources(package: zipfile.ZipFile, members: dict[str, zipfile.ZipInfo], keyring: Keyring) -> set[str]:
    """The resources ``datapackage.json`` lists, each checked, once its signed digest holds."""
    digest = _json(_read(package, members, DIGEST), DIGEST)
    raw = _read(package, members, DATAPACKAGE)
    check_wacz_digest(digest, raw, keyring)
    resources = _json(raw, DATAPACKAGE).get("resources")
    if not isinstance(resources, list) or not all(isinstance(entry, dict) for entry in resources):
        raise Rejected(Reason.WACZ_MALFORMED, "resources", "expected a list of resources")
    listed: set[str] = set()
    for index, entry in enumerate(resources):
        name = entry.get("path")
        if not isinstance(name, str) or name not in members:
            raise Rejected(Reason.WACZ_RESOURCE_MISMATCH, f"resources[{index}]", f"{name}: not in the package")
        if (entry.get("hash"), entry.get("bytes")) != _hash(package, members[name]):
            raise Rejected(Reason.WACZ_RESOURCE_MISMATCH, f"resources[{index}]", f"{name} differs")
        listed.add(name)
    unlisted = sorted(set(members) - listed - {DATAPACKAGE, DIGEST})
    if unlisted:
        raise Rejected(Reason.WACZ_RESOURCE_MISMATCH, "resources", f"{unlisted[0]} is in the package, not listed")
    return listed


def _hash(package: zipfile.ZipFile, info: zipfile.ZipInfo) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with package.open(info) as member:
        while chunk := member.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return f"sha256:{digest.hexdigest()}", size


def _pages(package: zipfile.ZipFile, members: dict[str, zipfile.ZipInfo], resources: set[str]) -> list[dict]:
    """The page list's pages (its first line is the header)."""
    if PAGES not in resources:
        return []
    return [_json(line, PAGES) for line in _read(package, members, PAGES).splitlines()[1:] if line.strip()]


def _bundle_responses(
    package: zipfile.ZipFile, name: str, pages: set[tuple[object, object]], max_bytes: int
) -> Iterator[tuple[str, str, bytes]]:
    """The response records of ``name`` that capture a page's bundle (its URL, at its
    second), with their payloads."""
    with package.open(name) as member:
        records = ArchiveIterator(member)
        for record in records:
            if record.rec_type != "response" or record.http_headers is None:
                continue
            url = record.rec_headers.get_header("WARC-Target-URI")
            stamp = (record.rec_headers.get_header("WARC-Date") or "")[:19] + "Z"
            if record.http_headers.get_statuscode() == "200" and (url, stamp) in pages:
                raw = record.content_stream().read(max_bytes + 1)  # before get_record_offset, which skips the rest
                yield f"{name}@{records.get_record_offset()}", url, raw
