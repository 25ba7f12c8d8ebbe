"""What a verifier process runs: parse a bundle's bytes, verify them and, when they
verify, prepare them for the archive writer (the protocol core and the writer's rows)
and, in an archive kept in a local folder, store them there: the crawl's thread then
neither writes nor hands over a bundle's bytes, whose file's system calls cost it
more than all the rest of archiving them (bench/RESULTS.md, "Raw objects stored where
they are verified").

Kept apart from ``crawler.verifying.verifier`` so that a worker process (``storage.runtime.child_process``
hosting ``crawler.verifying.verify_worker:serve_verifier``, alone or beside the crawl's WARC
writer) imports nothing of Scrapy and no pyarrow: it starts fast and stays small (no
multiprocessing, so no resource-tracker process beside it and no re-import of the
command line). Its socket's first message is its keyring and limits, as JSON.
"""

import socket
from dataclasses import asdict, replace
from typing import NamedTuple

import orjson

from pith.canonical import sha256_hex
from pith.graph import names_every_citer
from pith.keyring import Keyring, key_from_entry
from pith.parse import Limits, parse
from pith.reasons import Rejected
from pith.verdict import Status, Verdict
from pith.verify import key_ids, verify_document
from storage.archive import layout
from storage.archive.folder_store import LocalStore
from storage.archive.stores import ObjectInfo, Put, StorageError
from storage.runtime.child_process import framed, messages
from storage.writing.prepared import Prepared, prepare


class Checked(NamedTuple):
    """What checking a bundle's bytes found: the verdict, whether they parsed at all (the
    spider reads links only from a body that did), and their SHA-256, which names them
    in the archive. Worked out where they are checked (in a worker, off Scrapy's thread),
    with what the crawl would otherwise read from the parsed tree: a verified bundle's
    rows for the archive, its signers for the WARC files, whether it names its citers."""

    verdict: Verdict
    parsed: bool
    raw_sha256: str
    key_ids: tuple[str, ...] = ()  # of every signature in a bundle that parsed (pith.verify.key_ids)
    names_every_citer: bool = False  # pith.graph.names_every_citer: its record page names no other record
    prepared: Prepared | None = None  # a verified bundle, as the archive writer takes it
    stored: Put | StorageError | None = None  # where a worker stored its bytes (made or found), or why it could not


class BundleChecker:
    """A bundle's exact bytes, checked: the same in a worker as in the crawl's own thread."""

    def __init__(self, keyring: Keyring, limits: Limits):
        self.keyring = keyring
        self.limits = limits

    def __call__(self, raw: bytes) -> Checked:
        raw_sha256 = sha256_hex(raw)
        try:
            document = parse(raw, self.limits)
        except Rejected as rejected:
            return Checked(Verdict(Status.REJECTED, rejected.reason, rejected.path, rejected.detail), False, raw_sha256)
        data = document.data
        verdict = verify_document(data, self.keyring, document.exact)
        prepared = prepare(verdict, raw_sha256, len(raw)) if verdict.ok else None
        complete = isinstance(data, dict) and names_every_citer(data)
        return Checked(verdict, True, raw_sha256, key_ids(data), complete, prepared)

    def configuration(self, folder: str | None = None) -> bytes:
        """What a worker needs to build the same checker (``BundleChecker.configured``),
        and the archive ``folder`` it stores verified bytes in (None: it stores none)."""
        keys = [{**key.document(), "role": key.role} for key in self.keyring]
        return orjson.dumps({"keys": keys, "limits": asdict(self.limits), "folder": folder})

    @classmethod
    def configured(cls, configuration: bytes) -> "BundleChecker":
        settings = orjson.loads(configuration)
        return cls(Keyring(key_from_entry(entry) for entry in settings["keys"]), Limits(**settings["limits"]))


def store_verified(store: LocalStore, checked: Checked, raw: bytes) -> Checked:
    """A verified bundle's bytes stored at their content address, as the archive writer
    would store them (create-only: the same bytes found there are the same object).
    The writer lists the object only if the version is new to the archive."""
    if checked.prepared is None:
        return checked
    try:
        stored: Put | StorageError = store.create_bytes(layout.raw_bundle(checked.raw_sha256), raw)
    except StorageError as exc:
        stored = exc
    return checked._replace(stored=stored)


def _stored_parts(stored: Put | StorageError | None) -> list | str | None:
    if isinstance(stored, Put):
        return [stored.info.path, stored.info.sha256, stored.info.size, stored.made]
    return None if stored is None else str(stored)


def _stored(parts: list | str | None) -> Put | StorageError | None:
    if isinstance(parts, str):
        return StorageError(parts)
    if parts is None:
        return None
    path, sha256, size, made = parts
    return Put(ObjectInfo(path, sha256, size), bool(made))


def encode_verdict(checked: Checked) -> bytes:
    """What checking found, for the socket, as JSON (never pickle between the crawl and
    its workers: a process that unpickles runs whatever it is sent), without the verdict's
    parsed tree, which the crawl rebuilds from the bytes it holds when it needs it
    (``restore``). ``b""`` when it cannot be written: the crawl then judges the bundle itself."""
    verdict, prepared = replace(checked.verdict, bundle=None), checked.prepared
    try:
        return orjson.dumps(
            [
                checked.parsed,
                verdict,
                checked.raw_sha256,
                checked.key_ids,
                checked.names_every_citer,
                None if prepared is None else prepared.parts(),
                _stored_parts(checked.stored),
            ]
        )
    except orjson.JSONEncodeError:
        return b""


def decode(answer: bytes) -> Checked:
    parsed, fields, raw_sha256, signers, complete, prepared, stored = orjson.loads(answer)
    fields["inferred_types"] = tuple(fields["inferred_types"])
    fields["status"] = Status(fields["status"])
    verdict = Verdict(**fields)
    if prepared is not None:
        prepared = Prepared.from_parts(prepared, verdict, raw_sha256)
    return Checked(verdict, parsed, raw_sha256, tuple(signers), complete, prepared, _stored(stored))


def restore(checked: Checked, raw: bytes, limits: Limits, tree: bool = True) -> Checked:
    """In the crawl: the parsed tree a worker's verdict came without, as the worker had
    it, for a rejected bundle (its stats name what it rejected) or when the caller reads
    the ``tree`` of a verified one. A verified bundle read by the exact path is
    ``orjson.loads`` of its bytes; anything else is parsed again."""
    verdict = checked.verdict
    if checked.parsed and verdict.bundle is None and (tree or not verdict.ok):
        data = orjson.loads(raw) if verdict.ok and verdict.exact else parse(raw, limits).data
        return checked._replace(verdict=replace(verdict, bundle=data if isinstance(data, dict) else None))
    return checked


def serve_verifier(sock: socket.socket) -> None:
    """A worker's life: read its configuration, then bundles from ``sock``, answer each
    with its encoded verdict (once a verified one is stored), in order, until the crawl
    closes its end."""
    incoming = messages(sock.makefile("rb"))
    configuration = next(incoming, None)
    if configuration is None:  # the crawl closed before it began
        return
    checker = BundleChecker.configured(configuration)
    folder = orjson.loads(configuration)["folder"]
    store = None if folder is None else LocalStore(folder)
    for raw in incoming:
        checked = checker(raw)
        if store is not None:
            checked = store_verified(store, checked, raw)
        sock.sendall(framed(encode_verdict(checked)))
