"""Named single mutations of a bundle, each with the reason code and path verification
must report: the error-coded corpus of issue 2, shared by the tests, the corpus
generator and the mirror's fault injection.

A mutation changes one thing. When the intended check sits behind hashes or signatures
the change would break first, ``tampered`` recomputes those and re-signs with a pinned
signer, so that exactly the intended check fails. Paths assume the registry's layout
(``record_created`` first, then a ``graph_snapshot``), as in fixtures/real/ and in
bundles minted by pith_testkit.mint. Parse-level faults live in RAW_MUTATIONS: they change
bytes, since a parsed dict cannot hold them.
"""

import base64
import copy
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Callable

from pith.canonical import canon_sha256
from pith.json_path import PATH_STEP
from pith.keyring import REGISTRY, key_from_entry
from pith.parse import DEFAULT_MAX_BYTES, DEFAULT_MAX_DEPTH
from pith.signed_event import EVENT_UNHASHED
from pith.signing import Signer
from pith_testkit.mint import seal, sign_bundle
from storage.serving.record import compact_json


def _fixed_key(key_id: str) -> Signer:
    """A deterministic key that no keyring pins, so tampered corpora are reproducible."""
    return Signer.from_seed(key_id, hashlib.sha256(f"pith-archiver tamper {key_id}".encode()).digest())


ADVERTISED = _fixed_key("advertised-unpinned-1")  # a forger's own key, listed in its bundle
IMPOSTOR = _fixed_key("impostor-1")  # signs under a pinned key_id it does not hold
ARCHIVER = _fixed_key("archiver-stolen-1")  # an archive key: pinned, but only for manifests and attestations
RETIRED = _fixed_key("registry-retired-1")  # a registry key pinned with a window that closed before 2026-05
FUTURE = _fixed_key("registry-future-1")  # a registry key pinned with a window that opens in 2030


def windowed_keys() -> list:
    """RETIRED and FUTURE pinned as registry keys with their validity windows."""
    return [
        key_from_entry({**RETIRED.public_document(), "not_after": "2026-01-01T00:00:00Z"}, REGISTRY),
        key_from_entry({**FUTURE.public_document(), "not_before": "2030-01-01T00:00:00Z"}, REGISTRY),
    ]


@dataclass(frozen=True)
class Mutation:
    """One change to a parsed bundle and the verdict it must draw."""

    reason: str
    path: str
    change: Callable[[dict], None]  # edits the bundle in place
    doc: str
    resign: bool = False  # re-hash and re-sign what the change touched
    signer: Signer | None = None  # re-sign with this key rather than the caller's

    def apply(self, bundle: dict) -> dict:
        out = copy.deepcopy(bundle)
        self.change(out)
        return out


@dataclass(frozen=True)
class RawMutation:
    """One change to the bytes of a bundle, caught by the parser before any check."""

    reason: str
    path: str
    change: Callable[[bytes], bytes]
    doc: str
    resign = False

    def apply(self, raw: bytes) -> bytes:
        return self.change(raw)


# --- paths ---------------------------------------------------------------------------


def locate(doc, path: str):
    """The container holding ``path`` (verdict syntax: ``events[1].signature``) and the
    key or index of the value in it."""
    steps = [int(index) if index else name for name, index in PATH_STEP.findall(path)]
    for step in steps[:-1]:
        doc = doc[step]
    return doc, steps[-1]


def _edit(path: str, how: Callable):
    def change(bundle):
        parent, key = locate(bundle, path)
        parent[key] = how(parent[key])

    return change


# --- value changes -------------------------------------------------------------------


def _other_hex(value: str) -> str:
    return value[:-1] + ("1" if value[-1] == "0" else "0")


def _other_b32(value: str) -> str:
    return value[:-1] + ("B" if value[-1] == "A" else "A")


def _flipped_b64(value: str) -> str:
    """Still base64 of 64 bytes, so the signature check itself fails, not its decoding."""
    sig = bytearray(base64.b64decode(value))
    sig[0] ^= 1
    return base64.b64encode(bytes(sig)).decode("ascii")


def _next_year(number: str) -> str:
    prefix, year, suffix = number.split(":")
    return f"{prefix}:{int(year) + 1}:{suffix}"


def _swap_record_hashes(bundle):
    meta = bundle["canonical_record"]["metadata"]
    meta["title_canon_sha256"], meta["abstract_canon_sha256"] = (
        meta["abstract_canon_sha256"],
        meta["title_canon_sha256"],
    )


def _swap_public_key(bundle):
    """The pinned key_id, advertised with another key (consistent hex and fingerprints)."""
    entry = bundle["public_keys"][0]
    entry.update({k: v for k, v in IMPOSTOR.public_document().items() if k != "key_id"})


def _impostor_signs(block_path: str, digest_path: str):
    """Sign the digest at ``digest_path`` by IMPOSTOR into the signature block at
    ``block_path``, which keeps its pinned key_id and fingerprint."""

    def change(bundle):
        parent, key = locate(bundle, digest_path)
        _edit(f"{block_path}.signature_b64", lambda _: IMPOSTOR.sign_b64(parent[key]))(bundle)

    return change


def _drop_event(bundle):
    del bundle["events"][1]


def _reorder_events(bundle):
    bundle["events"].reverse()


def take_over(bundle: dict, signer: Signer) -> None:
    """Make ``signer`` the bundle's advertised key and receipt signer, and name it in every
    event's signer; ``tampered``/``wholly_resigned`` then re-sign events and bundle."""
    bundle["public_keys"] = [signer.public_document()]
    receipt = bundle["events"][0]["payload"]["receipt"]
    receipt.update(
        key_id=signer.key_id,
        public_key_fingerprint=signer.fingerprint,
        signature_b64=signer.sign_b64(receipt["canonical_sha256"]),
    )
    for event in bundle["events"]:
        event["signer"].update(key_id=signer.key_id, public_key_fingerprint=signer.fingerprint)


RECEIPT = "events[0].payload.receipt"

MUTATIONS: dict[str, Mutation] = {
    "events_not_a_list": Mutation(
        "schema_violation",
        "events",
        _edit("events", lambda events: {"items": events}),
        "events is an object where a list is expected",
    ),
    "bundle_type_changed": Mutation(
        "schema_violation",
        "bundle_type",
        _edit("bundle_type", lambda _: "pith_open_graph_state"),
        "bundle_type names another document type",
    ),
    "bundle_signed_at_not_a_timestamp": Mutation(
        "schema_violation",
        "bundle_signature.signed_at",
        _edit("bundle_signature.signed_at", lambda _: {"x": 1}),
        "the one unhashed field carries something other than a timestamp",
    ),
    "key_algorithm_changed": Mutation(
        "unsupported_algorithm",
        "public_keys[0].algorithm",
        _edit("public_keys[0].algorithm", lambda _: "rsa"),
        "the advertised key claims another algorithm",
    ),
    "title_hash_char_changed": Mutation(
        "canonical_hash_mismatch",
        "canonical_sha256",
        _edit("canonical_record.metadata.title_canon_sha256", _other_hex),
        "one hex digit of the record's title hash changed",
    ),
    "record_hashes_swapped": Mutation(
        "canonical_hash_mismatch",
        "canonical_sha256",
        _swap_record_hashes,
        "the title and abstract hashes of the record swapped",
    ),
    "event_record_changed": Mutation(
        "record_mismatch",
        "events[0].payload.canonical_record",
        _edit("events[0].payload.canonical_record.metadata.primary_cat", lambda _: "math.GM"),
        "the record_created event carries another record",
    ),
    "state_record_changed": Mutation(
        "record_mismatch",
        "state.current.canonical_record",
        _edit("state.current.canonical_record.metadata.title_canon_sha256", _other_hex),
        "the merged state carries another record",
    ),
    "pith_number_year_changed": Mutation(
        "pith_number_mismatch", "pith_number", _edit("pith_number", _next_year), "the Pith number names another year"
    ),
    "short_number_changed": Mutation(
        "pith_number_mismatch",
        "short_pith_number",
        _edit("short_pith_number", _other_b32),
        "the short Pith number is not the hash's prefix",
    ),
    "receipt_key_unpinned": Mutation(
        "unknown_key",
        f"{RECEIPT}.key_id",
        _edit(f"{RECEIPT}.key_id", lambda key_id: key_id + "-unpinned"),
        "the receipt names a key_id no keyring pins",
    ),
    "wholly_resigned_by_advertised_key": Mutation(
        "unknown_key",
        f"{RECEIPT}.key_id",
        lambda bundle: take_over(bundle, ADVERTISED),
        "receipt, events and bundle re-signed by a key the bundle advertises itself",
        resign=True,
        signer=ADVERTISED,
    ),
    "wholly_resigned_by_archive_key": Mutation(
        "wrong_key_role",
        f"{RECEIPT}.key_id",
        lambda bundle: take_over(bundle, ARCHIVER),
        "receipt, events and bundle re-signed by a pinned archive key (a stolen worker key): it may not "
        "sign registry records",
        resign=True,
        signer=ARCHIVER,
    ),
    "public_key_hex_changed": Mutation(
        "key_fingerprint_mismatch",
        "public_keys[0].public_key_hex",
        _edit("public_keys[0].public_key_hex", _other_hex),
        "public_key_hex is not public_key_b64",
    ),
    "public_key_swapped": Mutation(
        "key_fingerprint_mismatch",
        "public_keys[0].public_key_b64",
        _swap_public_key,
        "the pinned key_id advertised with another key",
    ),
    "receipt_fingerprint_changed": Mutation(
        "key_fingerprint_mismatch",
        f"{RECEIPT}.public_key_fingerprint",
        _edit(f"{RECEIPT}.public_key_fingerprint", _other_hex),
        "the receipt names another fingerprint",
    ),
    "receipt_signature_flipped": Mutation(
        "receipt_signature_invalid",
        f"{RECEIPT}.signature_b64",
        _edit(f"{RECEIPT}.signature_b64", _flipped_b64),
        "one bit of the receipt signature flipped",
    ),
    "receipt_signed_by_impostor": Mutation(
        "receipt_signature_invalid",
        f"{RECEIPT}.signature_b64",
        _impostor_signs(RECEIPT, f"{RECEIPT}.canonical_sha256"),
        "the receipt signed by another key under the pinned key_id",
    ),
    "event_created_at_changed": Mutation(
        "event_hash_mismatch",
        "events[1].content_sha256",
        _edit("events[1].created_at", lambda _: "1970-01-01T00:00:00Z"),
        "a hashed event field changed",
    ),
    "event_id_changed": Mutation(
        "event_id_mismatch",
        "events[1].event_id",
        _edit("events[1].event_id", _other_hex),
        "event_id is not sha256: + content_sha256",
    ),
    "event_signature_flipped": Mutation(
        "event_signature_invalid",
        "events[1].signature.signature_b64",
        _edit("events[1].signature.signature_b64", _flipped_b64),
        "one bit of an event signature flipped",
    ),
    "event_signed_by_impostor": Mutation(
        "event_signature_invalid",
        "events[1].signature.signature_b64",
        _impostor_signs("events[1].signature", "events[1].content_sha256"),
        "an event signed by another key under the pinned key_id",
    ),
    "subject_changed": Mutation(
        "subject_mismatch",
        "events[1].subject_pith_number",
        _edit("events[1].subject_pith_number", _next_year),
        "an event about another record, properly hashed and signed",
        resign=True,
    ),
    "event_dropped": Mutation(
        "state_mismatch",
        "state.applied_event_ids[1]",
        _drop_event,
        "the graph_snapshot event removed, the signed state kept",
    ),
    "events_reordered": Mutation(
        "state_mismatch",
        "state.applied_event_ids[0]",
        _reorder_events,
        "the events in reverse order, the signed state kept",
    ),
    "state_count_changed": Mutation(
        "state_hash_mismatch",
        "state.state_sha256",
        _edit("state.event_count", lambda n: n + 1),
        "a state field changed, state_sha256 kept",
    ),
    "state_count_resigned": Mutation(
        "state_mismatch",
        "state.event_count",
        _edit("state.event_count", lambda n: n + 1),
        "a state field changed, the state re-hashed and the bundle re-signed",
        resign=True,
    ),
    "bundle_version_bumped": Mutation(
        "unsupported_version",
        "bundle_version",
        _edit("bundle_version", lambda _: "2.0"),
        "a properly signed bundle of a version this archiver does not know",
        resign=True,
    ),
    "merge_version_bumped": Mutation(
        "unsupported_version",
        "merge_version",
        _edit("merge_version", lambda _: "pith-open-graph-merge-v2"),
        "a properly signed bundle merged by a rule this archiver does not know",
        resign=True,
    ),
    "resigned_by_retired_key": Mutation(
        "key_retired",
        f"{RECEIPT}.key_id",
        lambda bundle: take_over(bundle, RETIRED),
        "receipt, events and bundle signed by a pinned key after its window closed (rotated out)",
        resign=True,
        signer=RETIRED,
    ),
    "resigned_by_future_key": Mutation(
        "key_not_yet_valid",
        "bundle_signature.key_id",
        lambda bundle: take_over(bundle, FUTURE),
        "a bundle built before the pinned key's window opens",
        resign=True,
        signer=FUTURE,
    ),
    "built_at_changed": Mutation(
        "bundle_hash_mismatch",
        "bundle_signature.bundle_sha256",
        _edit("built_at", lambda _: "1970-01-01T00:00:00Z"),
        "a field only the bundle hash covers changed",
    ),
    "bundle_signature_flipped": Mutation(
        "bundle_signature_invalid",
        "bundle_signature.signature_b64",
        _edit("bundle_signature.signature_b64", _flipped_b64),
        "one bit of the bundle signature flipped",
    ),
    "bundle_signed_by_impostor": Mutation(
        "bundle_signature_invalid",
        "bundle_signature.signature_b64",
        _impostor_signs("bundle_signature", "bundle_signature.bundle_sha256"),
        "the bundle signed by another key under the pinned key_id",
    ),
}


# --- byte-level faults ---------------------------------------------------------------


def _first_version(replacement: bytes):
    """Put ``replacement`` where the record's source version number stands."""

    def change(raw):
        out, found = re.subn(rb'("version":)[0-9]+', rb"\g<1>" + replacement, raw, count=1)
        if not found:
            raise ValueError("no source version number to replace")
        return out

    return change


RAW_MUTATIONS: dict[str, RawMutation] = {
    "truncated": RawMutation("malformed_json", "", lambda raw: raw[: len(raw) // 2], "the second half cut off"),
    "invalid_utf8": RawMutation(
        "invalid_utf8", "", lambda raw: raw.replace(b'"', b'"\xff', 1), "a byte that is not UTF-8 inside the first key"
    ),
    "lone_surrogate": RawMutation(
        "invalid_unicode",
        "",
        lambda raw: raw.replace(b'"', b'"\\ud800', 1),
        "an escaped lone surrogate inside the first key",
    ),
    "nan_literal": RawMutation("non_finite_number", "", _first_version(b"NaN"), "NaN for a number"),
    "infinity_literal": RawMutation("non_finite_number", "", _first_version(b"-Infinity"), "-Infinity for a number"),
    "overflowing_number": RawMutation("non_finite_number", "", _first_version(b"1e400"), "a number past a double"),
    "duplicate_key": RawMutation(
        "duplicate_key",
        "pith_number",
        lambda raw: b'{"pith_number":null,' + raw[1:],
        "pith_number named twice at the top level",
    ),
    "too_deep": RawMutation(
        "too_deep",
        "",
        lambda raw: b"[" * DEFAULT_MAX_DEPTH + raw + b"]" * DEFAULT_MAX_DEPTH,
        "the bundle nested inside as many lists as the default depth limit",
    ),
    "padded": RawMutation(
        "not_compact",
        "",
        lambda raw: raw[:1] + b" " * (len(raw) + 8192) + raw[1:],
        "whitespace after the opening brace: twice the compact size",
    ),
    "too_large": RawMutation(
        "too_large", "", lambda raw: raw.ljust(DEFAULT_MAX_BYTES + 1), "trailing whitespace past the default size limit"
    ),
}


# --- applying them -------------------------------------------------------------------


def _resigned(bundle: dict, signer: Signer, keep_state: bool) -> dict:
    """Re-sign every event whose hash no longer holds, then re-hash the kept state or
    recompute it from the events, then re-sign the bundle, all by ``signer``."""
    signed_at = bundle["bundle_signature"]["signed_at"]
    for index, event in enumerate(bundle["events"]):
        content = {k: v for k, v in event.items() if k not in EVENT_UNHASHED}
        if event.get("content_sha256") != canon_sha256(content):
            content["signer"] = {
                **content["signer"],
                "key_id": signer.key_id,
                "public_key_fingerprint": signer.fingerprint,
            }
            bundle["events"][index] = signer.sign_event(content, signed_at)
    if not keep_state:
        return seal(bundle, signer, signed_at)
    state = bundle["state"]
    state["state_sha256"] = canon_sha256({k: v for k, v in state.items() if k != "state_sha256"})
    return sign_bundle(bundle, signer, signed_at)


# the event types a state lists but no real bundle holds yet: their merge rule is only inferred
NEW_EVENT_TYPES = (
    "author_attestation",
    "timestamp_anchor",
    "storage_attestation",
    "citation_signature",
    "replication_record",
    "correction",
)


def with_new_event(
    raw: bytes, signer: Signer, event_type: str = "storage_attestation", created_at: str | None = None
) -> bytes:
    """The bundle with one more properly signed event of ``event_type`` (any type: a
    new one, whose merge rule is only inferred), its state recomputed by the inferred
    rule and the bundle re-signed by ``signer``."""
    bundle = json.loads(raw)
    bundle["events"].append(
        {
            "event_type": event_type,
            "subject_pith_number": bundle["pith_number"],
            "target": "record",
            "payload": {"bundle_sha256": bundle["bundle_signature"]["bundle_sha256"], "note": f"a {event_type}"},
            "signer": {"signer_id": "pith.science", "signer_type": "pith_registry"},
            "created_at": created_at or bundle["built_at"],
            "supersedes": [],
            "prev_event": None,
            "schema_version": "1.0",
        }
    )
    return compact_json(_resigned(bundle, signer, keep_state=False))


def wholly_resigned(bundle: dict, signer: Signer) -> dict:
    """``bundle`` as ``signer`` would have issued it: its advertised key, receipt, events
    and bundle signature. It verifies exactly where ``signer`` is pinned."""
    out = copy.deepcopy(bundle)
    take_over(out, signer)
    return _resigned(out, signer, keep_state=False)


def tampered(raw: bytes, name: str, signer: Signer | None = None) -> bytes:
    """The bytes of bundle ``raw`` with mutation ``name`` applied; ``signer`` (pinned by
    the verifier) re-signs what a ``resign`` mutation touched."""
    if name in RAW_MUTATIONS:
        return RAW_MUTATIONS[name].apply(raw)
    mutation = MUTATIONS[name]
    original = json.loads(raw)
    bundle = mutation.apply(original)
    if mutation.resign:
        key = mutation.signer or signer
        if key is None:
            raise ValueError(f"mutation {name!r} re-signs the bundle: give a signer the verifier pins")
        bundle = _resigned(bundle, key, keep_state=bundle["state"] != original["state"])
    return compact_json(bundle)
