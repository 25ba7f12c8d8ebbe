"""What ``verify`` reads: files, folders (a corpus, an archive, any tree of bundles) and
http(s) URLs, and what it can tell is not a bundle without checking it."""

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pith_archiver
from pith.parse import DEFAULT_MAX_BYTES
from storage.archive import layout
from storage.publishing.release_check import RELEASE_FILE

FEED_SUFFIX = ".jsonl"
WACZ_SUFFIX = ".wacz"
# What an archive keeps beside its raw bundles and attestation feeds, by top folder.
ARCHIVE_PARTS = {
    layout.MANIFESTS: "an archive manifest",
    layout.KEYS: "a key document",
    layout.QUARANTINE: "quarantined when archived",
}


class SourceError(Exception):
    """A path or URL that could not be read at all (not a verdict on its content)."""


@dataclass(frozen=True)
class Target:
    """One document to check; ``skip`` says why it is not one to check, when where it
    lies already tells (an archive's manifests, say)."""

    source: str
    skip: str = ""

    @property
    def is_feed(self) -> bool:
        return self.source.endswith(FEED_SUFFIX)

    @property
    def is_release(self) -> bool:
        return self.source.rsplit("/", 1)[-1] == RELEASE_FILE and not self.source.startswith(("http://", "https://"))

    @property
    def is_wacz(self) -> bool:
        return self.source.endswith(WACZ_SUFFIX) and not self.source.startswith(("http://", "https://"))


def expand(targets: Iterable[str]) -> list[Target]:
    """Files and URLs stay; a folder becomes every ``*.json`` (bundle) and ``*.jsonl``
    (attestation feed) file below it, sorted; an archive folder (one holding manifests/)
    its raw bundles and feeds, with the rest of its documents marked skipped."""
    out = []
    for target in targets:
        path = Path(target)
        if target.startswith(("http://", "https://")) or not path.is_dir():
            out.append(Target(target))
        elif (path / layout.MANIFESTS).is_dir():
            out.extend(_archive(path))
        else:
            out.extend(Target(str(p)) for p in _documents(path))
    return out


def _documents(folder: Path) -> list[Path]:
    """Sorted by their text (comparing Path objects costs more than reading a bundle)."""
    return sorted((p for p in folder.rglob("*.json*") if p.suffix in (".json", FEED_SUFFIX) and p.is_file()), key=str)


def _archive(root: Path) -> Iterator[Target]:
    for path in _documents(root):
        relative = path.relative_to(root).as_posix()
        if (
            relative.startswith(f"{layout.RAW}/")
            and path.suffix == ".json"
            or relative.startswith(f"{layout.ATTESTATIONS}/")
            and path.suffix == FEED_SUFFIX
        ):
            yield Target(str(path))
        else:
            part = ARCHIVE_PARTS.get(relative.split("/")[0], "outside raw/ and attestations/")
            yield Target(str(path), skip=f"not a bundle ({part})")


def read(target: str, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The exact bytes of a file or URL, reading at most one byte past ``max_bytes`` so
    the size check can name an oversize document without loading all of it. A size
    known in advance is read as it is: asking for ``max_bytes + 1`` allocates that
    much first, which costs a 13 KB bundle more than its signature checks."""
    try:
        if target.startswith(("http://", "https://")):
            import urllib.request  # only for URLs: it costs a plain folder run a tenth of its start-up

            request = urllib.request.Request(target, headers={"User-Agent": user_agent(), "Accept": "application/json"})  # noqa: S310 - http(s) only, checked above
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - http(s) only, checked above
                return _read_capped(response, response.length, max_bytes)
        with open(target, "rb", buffering=0) as handle:  # one read: a buffer would copy it
            return _read_capped(handle, os.fstat(handle.fileno()).st_size, max_bytes)
    except (OSError, ValueError) as exc:
        raise SourceError(f"{target}: {exc}") from None


def _read_capped(stream: BinaryIO, size: int | None, max_bytes: int) -> bytes:
    return stream.read() if size is not None and size <= max_bytes else stream.read(max_bytes + 1)


def user_agent() -> str:
    return f"pith-archiver/{pith_archiver.__version__} (+https://github.com/pith-archiver)"


def claims_bundle(source: str) -> bool:
    """Whether a file or URL says by its name or place that it is a bundle
    (``*.bundle.json``, ``bundle.json``, under an archive's raw/bundles/ or
    quarantine/): one that cannot be read as a bundle is then rejected, never skipped
    (an error page saved in place of a bundle is the classic failed download)."""
    path = source.split("?", 1)[0].replace("\\", "/")
    return path.endswith("bundle.json") or f"/{layout.RAW}/" in f"/{path}" or f"/{layout.QUARANTINE}/" in f"/{path}"


def not_json(raw: bytes) -> str:
    """The kind of a document that is plainly not JSON at all ("" when it may be):
    a web page, such as a record page fetched instead of its bundle."""
    return "text/html" if raw[:256].lstrip().startswith(b"<") else ""


def not_a_bundle(document: object) -> str:
    """What a parsed document is when its top level is plainly not a bundle's (""
    when it may be one): only these are skipped; anything else bundle-like is judged."""
    if not isinstance(document, dict) or {"pith_number", "bundle_signature", "bundle_type"} & document.keys():
        return ""
    if "keys" in document:
        return "a keyring"
    if "key_id" in document and "public_key_b64" in document:
        return "a key document"
    if "manifest_type" in document:
        return "an archive manifest"
    if "catalog_version" in document or "corpus" in document:
        return "a corpus index"
    return "no pith_number or bundle_signature"
