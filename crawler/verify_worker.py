"""What a verifier process runs: parse a bundle's bytes and verify them (``pith`` only).

Kept apart from ``crawler.verifier`` so that a worker process started with ``spawn``
imports the protocol core and nothing of Scrapy: it starts fast and stays small.
"""

import signal

from pith.keyring import Keyring
from pith.parse import Limits, parse
from pith.reasons import Rejected
from pith.verify import Verdict, verify_document


class Checker:
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
            return Verdict("rejected", rejected.reason, rejected.path, rejected.detail), False
        return verify_document(document.data, self.keyring, document.exact), True


_checker: Checker | None = None  # in a worker: set once when it starts


def start(checker: Checker) -> None:
    """A worker's initializer: the keyring arrives once, not with every bundle."""
    global _checker
    _checker = checker
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the crawl's to handle: it finishes what is under way


def check(raw: bytes) -> tuple[Verdict, bool]:
    return _checker(raw)
