"""Storage attestations: an archive's signed statements that it stored a bundle
version, in Pith's own event format, chained into an append-only feed.

An attestation is an open graph event (``event_type`` ``storage_attestation``,
``target`` ``storage``) about the record whose bundle was stored, signed by the
archive's key exactly as the registry signs its events, so ``check_event`` verifies it
(with a key pinned in the archive role) and the deterministic merge files it under
``state.current.storage_attestations``.
Its ``prev_event`` names the same key's previous attestation (``null`` for the first
ever): dropping, reordering or inserting one breaks the chain (``chain_broken``),
within a feed and across the feeds of a key's runs.

A feed is JSON Lines: one attestation per line, each its canonical JSON.

A repair event (``event_type`` ``storage_repair``) is the archive's signed statement
that it wrote an object again from a peer's copy: the object's path, sha256 and size
(what its own manifest lists), the damage found, where the damaged copy was moved,
the peer and the time. It is made and checked as an attestation is, but it attests no
bundle version: no chain runs through repairs and no key's log holds them.
"""

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from .keyring import ARCHIVE, Keyring
from .parse import Limits, parse
from .reasons import Reason, Rejected
from .schema import need, need_equal, need_hex, need_timestamp
from .signed_event import check_event
from .signing import Signer

EVENT_TYPE = "storage_attestation"
TARGET = "storage"
SIGNER_TYPE = "archive"
LINE_LIMITS = Limits(max_bytes=1 << 20)  # one attestation: a few hundred bytes
HASHES = ("bundle_sha256", "canonical_sha256", "raw_sha256")
TEXTS = ("raw_path", "storage_uri", "run_id")


def new_attestation(
    signer: Signer,
    *,
    pith_number: str,
    archive: str,
    payload: dict[str, Any],
    prev_event: str | None,
    created_at: str,
    exact: bool = False,
) -> dict[str, Any]:
    """A signed attestation by ``signer`` (a pith.signing.Signer) for the archive named
    ``archive``. Signing is imported here: checking feeds (``verify``) never signs.
    ``exact``: the payload holds no float (pith.canonical)."""
    from .events import new_event
    from .signing import utc_now

    return new_event(
        signer,
        EVENT_TYPE,
        pith_number,
        TARGET,
        payload,
        created_at,
        utc_now(),
        prev_event=prev_event,
        signer_id=archive,
        signer_type=SIGNER_TYPE,
        exact=exact,
    )


REPAIR_EVENT_TYPE = "storage_repair"
REPAIR_TEXTS = ("path", "damage", "peer", "run_id")


def new_repair(
    signer: Signer, *, archive: str, subject: str, payload: dict[str, Any], created_at: str
) -> dict[str, Any]:
    """A signed repair event by the archive's key; ``subject``: the record whose bundle
    the object is ("" for any other object); ``payload``: ``path``, ``sha256``, ``size``,
    ``damage``, ``damaged_copy`` (None when none was left), ``peer``, ``run_id``."""
    from .events import new_event
    from .signing import utc_now

    return new_event(
        signer,
        REPAIR_EVENT_TYPE,
        subject,
        TARGET,
        payload,
        created_at,
        utc_now(),
        signer_id=archive,
        signer_type=SIGNER_TYPE,
        exact=True,
    )


def read_repair(line: bytes, keyring: Keyring, path: str) -> dict[str, Any]:
    """One line of a repair feed, parsed safely and checked (signed by a key pinned in
    the archive role); Rejected names what broke."""
    try:
        document = parse(line, LINE_LIMITS)
    except Rejected as exc:
        raise Rejected(exc.reason, f"{path}.{exc.path}" if exc.path else path, exc.detail) from None
    event = document.data
    if not isinstance(event, dict):
        raise Rejected(Reason.SCHEMA_VIOLATION, path, "a repair event is an object")
    prefix = f"{path}."
    need_equal(event, "event_type", REPAIR_EVENT_TYPE, prefix)
    payload = need(event, "payload", dict, prefix)
    for name in REPAIR_TEXTS:
        need(payload, name, str, f"{prefix}payload.")
    need_hex(payload, "sha256", f"{prefix}payload.")
    need(payload, "size", int, f"{prefix}payload.")
    if payload.get("damaged_copy") is not None:
        need(payload, "damaged_copy", str, f"{prefix}payload.")
    need_timestamp(event, "created_at", prefix)
    check_event(event, keyring, path, None, document.exact, role=ARCHIVE)
    return event


def check_attestation(event: object, keyring: Keyring, path: str, exact: bool = False) -> str:
    """Its shape, then every check of an open graph event; returns its content hash."""
    if not isinstance(event, dict):
        raise Rejected(Reason.SCHEMA_VIOLATION, path, "an attestation is an object")
    prefix = f"{path}."
    need_equal(event, "event_type", EVENT_TYPE, prefix)
    need_equal(event, "target", TARGET, prefix)
    need(event, "subject_pith_number", str, prefix)
    need_equal(need(event, "signer", dict, prefix), "signer_type", SIGNER_TYPE, f"{prefix}signer.")
    if event.get("prev_event") is not None:
        need(event, "prev_event", str, prefix)
    payload = need(event, "payload", dict, prefix)
    for name in HASHES:
        need_hex(payload, name, f"{prefix}payload.")
    for name in TEXTS:
        need(payload, name, str, f"{prefix}payload.")
    need(payload, "size", int, f"{prefix}payload.")
    need_timestamp(payload, "stored_at", f"{prefix}payload.")
    return check_event(event, keyring, path, None, exact, role=ARCHIVE)


def read_attestation(line: bytes, keyring: Keyring, path: str) -> dict[str, Any]:
    """One feed line, parsed safely and checked; Rejected names what broke."""
    try:
        document = parse(line, LINE_LIMITS)
    except Rejected as exc:
        raise Rejected(exc.reason, f"{path}.{exc.path}" if exc.path else path, exc.detail) from None
    check_attestation(document.data, keyring, path, document.exact)
    return cast(dict[str, Any], document.data)  # check_attestation accepted it: an object


@dataclass
class ChainStretch:
    """The part of one key's chain one feed holds, unbroken."""

    source: str  # the feed it is in
    key_id: str
    where: str  # its first attestation, e.g. lines[0]
    enters: str | None  # the prev_event its first attestation names
    leaves: str  # the event_id of its last attestation


class Chain:
    """The attestation chains through feeds read in any order (run ids only sort by
    the second), one chain per archiver key.

    Within a feed each attestation must name the key's one before it: ``follow``
    raises chain_broken at once. Each feed's part of a key's chain is a stretch, and
    ``breaks`` checks at the end that each key's stretches join into one chain."""

    def __init__(self) -> None:
        self._stretches: list[ChainStretch] = []
        self._open: dict[str, ChainStretch] = {}
        self._source = ""

    def feed(self, source: str) -> None:
        """Start reading the feed ``source``."""
        self._source, self._open = source, {}

    def follow(self, event: dict[str, Any], path: str) -> None:
        key_id = event["signature"]["key_id"]
        stretch = self._open.get(key_id)
        if stretch is None:
            stretch = ChainStretch(self._source, key_id, path, event.get("prev_event"), event["event_id"])
            self._stretches.append(stretch)
            self._open[key_id] = stretch
            return
        expected, stretch.leaves = stretch.leaves, event["event_id"]
        if event.get("prev_event") != expected:  # reported once: the chain goes on from here
            raise Rejected(Reason.CHAIN_BROKEN, f"{path}.prev_event", f"expected {expected}")

    def lose_track(self) -> None:
        """An unreadable attestation sat here: the next one starts a new stretch."""
        self._open = {}

    def forget(self, source: str) -> None:
        """Leave the feed ``source`` out of ``breaks``."""
        self._stretches = [s for s in self._stretches if s.source != source]
        self._open = {}

    @property
    def stretches(self) -> list[ChainStretch]:
        return list(self._stretches)

    def join(self, stretches: list[ChainStretch]) -> None:
        """Take in the stretches another Chain read (a feed checked in another process)."""
        self._stretches.extend(stretches)

    def breaks(self, rooted: bool = True) -> list[tuple[ChainStretch, str]]:
        """Each stretch that does not join its key's chain, with why. ``rooted``: every
        feed of the key is here, so its chain starts at null; otherwise one stretch per
        key may continue from a feed not given."""
        found = []
        for key_id in dict.fromkeys(s.key_id for s in self._stretches):
            stretches = [s for s in self._stretches if s.key_id == key_id]
            ends = {s.leaves for s in stretches}
            continued, starts = set(), 0
            for stretch in stretches:
                joins = stretch.enters is not None and stretch.enters in ends
                if joins and stretch.enters in continued:
                    found.append((stretch, f"{stretch.enters} is continued twice: the chain forks"))
                elif not joins and stretch.enters is not None and rooted:
                    found.append((stretch, f"names {stretch.enters}, which ends no feed of {key_id}"))
                elif not joins:
                    starts += 1
                    if starts > 1:
                        found.append((stretch, f"a second chain of {key_id} starts here"))
                continued.add(stretch.enters)
        return found


def check_feed(source: str, lines: Iterable[bytes], keyring: Keyring, chain: Chain) -> int:
    """Check each line of the feed ``source`` and the chain through them; returns how
    many attestations there are, or raises Rejected at the first fault."""
    chain.feed(source)
    count = 0
    try:
        for index, line in enumerate(lines):
            where = f"lines[{index}]"
            chain.follow(read_attestation(line, keyring, where), where)
            count += 1
    except Rejected:
        chain.forget(source)  # judged already: its part must not be judged again when feeds join
        raise
    return count


def split_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The lines (without their newline) of a byte stream given in chunks."""
    rest = b""
    for chunk in chunks:
        *lines, rest = (rest + chunk).split(b"\n")
        yield from lines
    if rest:
        yield rest
