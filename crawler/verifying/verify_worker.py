"""What a verifier process runs: parse a bundle's bytes and verify them (``pith`` only).

Kept apart from ``crawler.verifying.verifier`` so that a worker process (``storage.runtime.child_process``
hosting ``crawler.verifying.verify_worker:serve_verifier``, alone or beside the crawl's WARC
writer) imports the protocol core and nothing of Scrapy: it starts fast and stays
small (no multiprocessing, so no resource-tracker process beside it and no re-import
of the command line). Its socket's first message is its keyring and limits, as JSON.
"""

import os
import socket
from dataclasses import asdict, replace
from typing import NamedTuple

import orjson

from pith.canonical import sha256_hex
from pith.keyring import Keyring, key_from_entry
from pith.parse import Limits, parse
from pith.reasons import Rejected
from pith.verify import Status, Verdict, verify_document
from storage.runtime.child_process import framed, messages


def available_cores() -> int:
    """The cores this process may run on (its affinity, not the machine's count)."""
    counter = getattr(os, "process_cpu_count", None)
    if counter is not None:
        return counter() or 1
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class Checked(NamedTuple):
    """What checking a bundle's bytes found: the verdict, whether they parsed at all (the
    spider reads links only from a body that did), and their SHA-256, which names them
    in the archive (hashed where they are checked: in a worker, off Scrapy's thread)."""

    verdict: Verdict
    parsed: bool
    raw_sha256: str


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
        return Checked(verify_document(document.data, self.keyring, document.exact), True, raw_sha256)

    def configuration(self) -> bytes:
        """What a worker needs to build the same checker (``BundleChecker.configured``)."""
        keys = [{**key.document(), "role": key.role} for key in self.keyring]
        return orjson.dumps({"keys": keys, "limits": asdict(self.limits)})

    @classmethod
    def configured(cls, configuration: bytes) -> "BundleChecker":
        settings = orjson.loads(configuration)
        return cls(Keyring(key_from_entry(entry) for entry in settings["keys"]), Limits(**settings["limits"]))


def encode_verdict(checked: Checked) -> bytes:
    """What checking found, for the socket, as JSON (never pickle between the crawl and
    its workers: a process that unpickles runs whatever it is sent), without the verdict's
    parsed tree, which the crawl rebuilds from the bytes it holds (``restore``). ``b""``
    when it cannot be written: the crawl then judges the bundle itself."""
    try:
        return orjson.dumps([checked.parsed, replace(checked.verdict, bundle=None), checked.raw_sha256])
    except orjson.JSONEncodeError:
        return b""


def decode(answer: bytes) -> Checked:
    parsed, fields, raw_sha256 = orjson.loads(answer)
    fields["inferred_types"] = tuple(fields["inferred_types"])
    fields["status"] = Status(fields["status"])
    return Checked(Verdict(**fields), parsed, raw_sha256)


def restore(checked: Checked, raw: bytes, limits: Limits) -> Checked:
    """In the crawl: the parsed tree a worker's verdict came without, as the worker had
    it. A verified bundle read by the exact path is ``orjson.loads`` of its bytes (about
    a third of what unpickling the tree would cost); anything else is parsed again."""
    verdict = checked.verdict
    if checked.parsed and verdict.bundle is None:
        data = orjson.loads(raw) if verdict.ok and verdict.exact else parse(raw, limits).data
        return checked._replace(verdict=replace(verdict, bundle=data if isinstance(data, dict) else None))
    return checked


def serve_verifier(sock: socket.socket) -> None:
    """A worker's life: read its configuration, then bundles from ``sock``, answer each
    with its encoded verdict, in order, until the crawl closes its end."""
    incoming = messages(sock.makefile("rb"))
    configuration = next(incoming, None)
    if configuration is None:  # the crawl closed before it began
        return
    checker = BundleChecker.configured(configuration)
    for raw in incoming:
        sock.sendall(framed(encode_verdict(checker(raw))))
