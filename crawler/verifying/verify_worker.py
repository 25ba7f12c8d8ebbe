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

import orjson

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


class BundleChecker:
    """The verdict on a bundle's exact bytes, and whether they parsed at all (the spider
    reads links only from a body that did): the same in a worker as in the crawl's
    own thread."""

    def __init__(self, keyring: Keyring, limits: Limits):
        self.keyring = keyring
        self.limits = limits

    def __call__(self, raw: bytes) -> tuple[Verdict, bool]:
        try:
            document = parse(raw, self.limits)
        except Rejected as rejected:
            return Verdict(Status.REJECTED, rejected.reason, rejected.path, rejected.detail), False
        return verify_document(document.data, self.keyring, document.exact), True

    def configuration(self) -> bytes:
        """What a worker needs to build the same checker (``BundleChecker.configured``)."""
        keys = [{**key.document(), "role": key.role} for key in self.keyring]
        return orjson.dumps({"keys": keys, "limits": asdict(self.limits)})

    @classmethod
    def configured(cls, configuration: bytes) -> "BundleChecker":
        settings = orjson.loads(configuration)
        return cls(Keyring(key_from_entry(entry) for entry in settings["keys"]), Limits(**settings["limits"]))


def encode_verdict(verdict: Verdict, parsed: bool) -> bytes:
    """A verdict for the socket, as JSON (never pickle between the crawl and its
    workers: a process that unpickles runs whatever it is sent), without its parsed tree, which the crawl
    rebuilds from the bytes it holds (``restore``). ``b""`` when it cannot be written:
    the crawl then judges the bundle itself."""
    try:
        return orjson.dumps([parsed, replace(verdict, bundle=None)])
    except orjson.JSONEncodeError:
        return b""


def decode(answer: bytes) -> tuple[Verdict, bool]:
    parsed, fields = orjson.loads(answer)
    fields["inferred_types"] = tuple(fields["inferred_types"])
    fields["status"] = Status(fields["status"])
    return Verdict(**fields), parsed


def restore(verdict: Verdict, parsed: bool, raw: bytes, limits: Limits) -> Verdict:
    """In the crawl: the parsed tree a worker's verdict came without, as the worker had
    it. A verified bundle read by the exact path is ``orjson.loads`` of its bytes (about
    a third of what unpickling the tree would cost); anything else is parsed again."""
    if parsed and verdict.bundle is None:
        data = orjson.loads(raw) if verdict.ok and verdict.exact else parse(raw, limits).data
        return replace(verdict, bundle=data if isinstance(data, dict) else None)
    return verdict


def serve_verifier(sock: socket.socket) -> None:
    """A worker's life: read its configuration, then bundles from ``sock``, answer each
    with its encoded verdict, in order, until the crawl closes its end."""
    incoming = messages(sock.makefile("rb"))
    configuration = next(incoming, None)
    if configuration is None:  # the crawl closed before it began
        return
    checker = BundleChecker.configured(configuration)
    for raw in incoming:
        sock.sendall(framed(encode_verdict(*checker(raw))))
