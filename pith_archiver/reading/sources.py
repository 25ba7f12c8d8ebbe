"""What ``verify`` reads: files, folders (a corpus, an archive, any tree of bundles),
http(s) URLs and s3:// objects and prefixes, and what it can tell is not a bundle
without checking it."""

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pith_archiver
from pith.links import MIRROR_LIST_TYPE
from pith.merge import STATE_TYPE
from pith.parse import DEFAULT_MAX_BYTES
from storage.archive import layout
from storage.archive.stores import StorageError, StoreRefused
from storage.publishing.release_check import RELEASE_FILE

from . import s3_sources

FEED_SUFFIX = ".jsonl"
READ_CHUNK = 1 << 20
FETCH_SECONDS = 30.0  # a document fetched by URL, from the name lookup to its last byte
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


def expand(targets: Iterable[str], s3_endpoint_url: str | None = None) -> list[Target]:
    """Files and URLs stay; a folder or s3:// prefix becomes every ``*.json`` (bundle)
    and ``*.jsonl`` (attestation feed) document below it, sorted; an archive's (one
    holding manifests/) its raw bundles and feeds, with the rest of its documents
    marked skipped. SourceError when an s3:// location cannot be listed, StoreRefused
    when its bucket does not exist or refuses the credentials."""
    out = []
    for target in targets:
        path = Path(target)
        if target.startswith(s3_sources.SCHEME):
            out.extend(_s3(target, s3_endpoint_url))
        elif target.startswith(("http://", "https://")) or not path.is_dir():
            out.append(Target(target))
        elif (path / layout.MANIFESTS).is_dir():
            prefix = os.path.join(str(path), "")
            out.extend(_below(((p, p[len(prefix) :]) for p in _documents(path)), archive=True))
        else:
            out.extend(Target(p) for p in _documents(path))
    return out


def _s3(uri: str, s3_endpoint_url: str | None) -> list[Target]:
    try:
        listed = s3_sources.documents(uri, s3_endpoint_url)
    except StoreRefused:
        raise
    except (StorageError, ValueError) as exc:
        raise SourceError(str(exc)) from None
    return [Target(uri)] if listed is None else list(_below(*listed))


def _documents(folder: Path) -> list[str]:
    """The paths of the ``.json`` and ``.jsonl`` files below ``folder``, sorted by their
    text (comparing Path objects costs more than reading a bundle). Walked with
    ``os.scandir``, whose entries know which are files: pathlib's ``rglob`` and an
    ``is_file`` a path took 0.23 s of 6,000 bundles before any could be verified. As
    ``rglob``, it does not descend into linked folders; a link is kept if it leads to a file."""
    found, folders = [], [str(folder)]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                elif os.path.splitext(entry.name)[1] in (".json", FEED_SUFFIX) and entry.is_file():
                    found.append(entry.path)
    return sorted(found)


def _below(found: Iterable[tuple[str, str]], archive: bool) -> Iterator[Target]:
    """The targets of the documents under a folder or prefix, each given as its source
    and its path below it; in an archive, only raw bundles and feeds are checked."""
    for source, relative in found:
        if archive and layout.is_repair_feed(relative):
            yield Target(source, skip="not a bundle (a repair feed, which audit checks)")
        elif not archive or (
            relative.startswith(f"{layout.RAW}/")
            and relative.endswith(".json")
            or relative.startswith(f"{layout.ATTESTATIONS}/")
            and relative.endswith(FEED_SUFFIX)
        ):
            yield Target(source)
        else:
            part = ARCHIVE_PARTS.get(relative.split("/")[0], "outside raw/ and attestations/")
            yield Target(source, skip=f"not a bundle ({part})")


def read(target: str, max_bytes: int = DEFAULT_MAX_BYTES, s3_endpoint_url: str | None = None) -> bytes:
    """The exact bytes of a file, URL or s3:// object, reading at most one byte past
    ``max_bytes`` so the size check can name an oversize document without loading all
    of it. A size known in advance is read as it is: asking for ``max_bytes + 1``
    allocates that much first, which costs a 13 KB bundle more than its signature checks."""
    try:
        if target.startswith(("http://", "https://")):
            return fetch(target, max_bytes, "application/json")
        if target.startswith(s3_sources.SCHEME):
            return s3_sources.read_at_most(target, max_bytes, s3_endpoint_url)
        with open(target, "rb", buffering=0) as handle:  # one read: a buffer would copy it
            size = os.fstat(handle.fileno()).st_size
            return handle.read() if size <= max_bytes else handle.read(max_bytes + 1)
    except (OSError, ValueError) as exc:
        raise SourceError(f"{target}: {exc}") from None
    except StorageError as exc:  # it names the object already
        raise SourceError(str(exc)) from None


@contextmanager
def opened(target: str, s3_endpoint_url: str | None = None) -> Iterator[Iterator[bytes]]:
    """The chunks of a file or s3:// object, streamed (a feed may be large); SourceError
    when it cannot be read, whenever that shows."""
    try:
        if target.startswith(s3_sources.SCHEME):
            yield s3_sources.chunks(target, s3_endpoint_url)
        else:
            with open(target, "rb") as handle:
                yield iter(partial(handle.read, READ_CHUNK), b"")
    except (OSError, StorageError) as exc:
        raise SourceError(str(exc)) from None


def fetch(url: str, max_bytes: int, accept: str, seconds: float = FETCH_SECONDS) -> bytes:
    """The body of ``url`` (up to one byte past ``max_bytes``) within ``seconds`` in
    all, however slowly the server answers; OSError (``NoAnswer``) when it did not
    answer in time or with a 2xx."""
    import urllib.request  # only for URLs: it costs a plain folder run a tenth of its start-up

    from storage.runtime.deadline_http import NoAnswer, exchange

    request = urllib.request.Request(url, headers={"User-Agent": user_agent(), "Accept": accept})  # noqa: S310 - callers pass http(s) URLs only
    answer = exchange(request, seconds, max_bytes)
    if not 200 <= answer.status < 300:
        raise NoAnswer(f"HTTP {answer.status}")
    return answer.body


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


def is_state(document: object) -> bool:
    """Whether a parsed document is a merged state served alone (a mirror's or the
    registry's ``state.json``), not a bundle: it is checked against its bundle, never
    judged as one."""
    return (
        isinstance(document, dict)
        and document.get("state_type") == STATE_TYPE
        and not {"bundle_signature", "bundle_type"} & document.keys()
    )


def bundle_beside(source: str) -> str:
    """Where the bundle of a state document lies, by the resolver layout
    (``.../<ID>/state.json`` beside ``.../<ID>/bundle.json``; ``X.state.json`` beside
    ``X.bundle.json``); "" when its name does not say."""
    path, mark, query = source.partition("?")
    return f"{path.removesuffix('state.json')}bundle.json{mark}{query}" if path.endswith("state.json") else ""


def not_a_bundle(document: object) -> str:
    """What a parsed document is when its top level is plainly not a bundle's (""
    when it may be one): only these are skipped; anything else bundle-like is judged."""
    if not isinstance(document, dict) or {"pith_number", "bundle_signature", "bundle_type"} & document.keys():
        return ""
    if "keys" in document:
        return "a keyring"
    if "key_id" in document and "public_key_b64" in document:
        return "a key document"
    if document.get("manifest_type") == MIRROR_LIST_TYPE:
        return "a mirror list"
    if "manifest_type" in document:
        return "an archive manifest"
    if "catalog_version" in document or "corpus" in document:
        return "a corpus index"
    return "no pith_number or bundle_signature"
