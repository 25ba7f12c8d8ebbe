"""Verify an open graph bundle: the seven checks of the format plus the merge.

``verify_bundle(raw, keyring)`` never raises on bad input: it returns a Verdict whose
``reason`` is a stable code from ``pith.reasons`` and whose ``path`` names what broke.

A bundle with event types whose merge rule is only inferred is still verified when
every hash and registry signature holds (the registry signed its state), with
``merge_confirmed`` false: the registry publishing a new kind of event must not stop
an archive from keeping its records.
"""

import base64
import binascii
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .canonical import canon_sha256
from .keyring import REGISTRY, SIGNATURE_MEMBERS, Keyring
from .merge import MERGE_VERSION, MergeResult, merge
from .numbers import SHORT_LENGTHS, key_fingerprints, number_from_suffix, pith_suffix, short_pith_number
from .parse import Limits, parse
from .reasons import Reason, Rejected

EVENT_UNHASHED = ("signature", "content_sha256", "event_id")
RECEIPT_MESSAGE = "canonical_sha256_bytes"
EVENT_MESSAGE = "open_graph_event_sha256_bytes"
BUNDLE_MESSAGE = "bundle_sha256_bytes"
SIGNATURE_STATUS = "signed_v1"
BUNDLE_SIGNATURE_MEMBERS = SIGNATURE_MEMBERS | {"bundle_sha256"}
BUNDLE_VERSIONS = ("1.0",)  # the bundle_version values this archiver knows how to check
# RFC 3339 in UTC, as every timestamp in the real bundles is written.
TIMESTAMP_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z")


class Status(StrEnum):
    """What became of a document: the ``status`` of a verdict, of a verifications row and
    of ``verify``'s output."""

    VERIFIED = "verified"
    REJECTED = "rejected"
    FAILED = "failed"  # the crawl could not fetch it: no bytes to judge (reason fetch_failed or too_large)
    UNREADABLE = "unreadable"  # verify: a file it could not read
    SKIPPED = "skipped"  # verify: a file it was not asked to judge (not a bundle, feed, note or release)


@dataclass(frozen=True)
class Verdict:
    """Immutable: what one check found. Components that add to it (the archive, the
    split-view pipeline) keep their findings beside it, never in it."""

    status: Status
    reason: str = ""  # a code from pith.reasons.REASONS when rejected
    path: str = ""
    detail: str = ""
    pith_number: str | None = None
    canonical_sha256: str | None = None
    bundle_sha256: str | None = None
    state_sha256: str | None = None
    bundle: dict[str, Any] | None = field(default=None, repr=False)  # the parsed document, once it parsed
    exact: bool = False  # pith.canonical.canon may take its fast path on ``bundle``
    merge_confirmed: bool = True  # false: some event types merged by a rule only inferred
    inferred_types: tuple[str, ...] = ()  # those event types, in first-seen order
    merge_inferred_match: bool | None = None  # the inferred rule recomputes exactly the signed state

    @property
    def ok(self) -> bool:
        return self.status == Status.VERIFIED

    def as_dict(self) -> dict[str, Any]:
        merge = (
            {}
            if self.merge_confirmed
            else {
                "merge_confirmed": False,
                "inferred_types": list(self.inferred_types),
                "merge_inferred_match": self.merge_inferred_match,
            }
        )
        return {
            "status": self.status,
            "reason": self.reason or None,
            "path": self.path or None,
            "detail": self.detail or None,
            "pith_number": self.pith_number,
            "canonical_sha256": self.canonical_sha256,
            "bundle_sha256": self.bundle_sha256,
            **merge,
        }


def verify_bundle(raw: bytes, keyring: Keyring, limits: Limits = Limits()) -> Verdict:
    """Parse and verify the exact bytes of a bundle."""
    try:
        document = parse(raw, limits)
    except Rejected as rejected:
        return Verdict(Status.REJECTED, rejected.reason, rejected.path, rejected.detail)
    return verify_document(document.data, keyring, document.exact)


def verify_document(bundle: Any, keyring: Keyring, exact: bool = False) -> Verdict:
    """Verify an already parsed bundle; ``exact`` as in pith.canonical.canon."""
    try:
        facts = bundle_facts(bundle, keyring, exact)
    except Rejected as rejected:
        number = bundle.get("pith_number") if isinstance(bundle, dict) else None
        return Verdict(
            Status.REJECTED,
            rejected.reason,
            rejected.path,
            rejected.detail,
            pith_number=number if isinstance(number, str) else None,
            bundle=bundle if isinstance(bundle, dict) else None,
        )
    return Verdict(Status.VERIFIED, bundle=bundle, exact=exact, **facts)


# --- schema helpers --------------------------------------------------------------


def _need(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], path: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        want = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise Rejected(Reason.SCHEMA_VIOLATION, f"{path}{key}", f"expected {want}, found {type(value).__name__}")
    return value


def _need_hex(obj: dict[str, Any], key: str, path: str) -> str:
    value: str = _need(obj, key, str, path)
    if len(value) != 64 or value.strip("0123456789abcdef"):
        raise Rejected(Reason.SCHEMA_VIOLATION, f"{path}{key}", "expected 64 lowercase hex digits")
    return value


def _need_equal(obj: dict[str, Any], key: str, expected: object, path: str) -> None:
    if obj.get(key) != expected:
        raise Rejected(Reason.SCHEMA_VIOLATION, f"{path}{key}", f"expected {expected!r}, found {obj.get(key)!r}")


def _signature_block(obj: dict[str, Any], key: str, message: str, path: str) -> dict[str, Any]:
    sig: dict[str, Any] = _need(obj, key, dict, path)
    _need_equal(sig, "signed_message", message, f"{path}{key}.")
    _need_equal(sig, "signature_status", SIGNATURE_STATUS, f"{path}{key}.")
    return sig


# --- the checks ------------------------------------------------------------------


def bundle_facts(bundle: Any, keyring: Keyring, exact: bool = False) -> dict[str, Any]:
    if not isinstance(bundle, dict):
        raise Rejected(Reason.SCHEMA_VIOLATION, "", f"a bundle is an object, found {type(bundle).__name__}")
    _need_equal(bundle, "bundle_type", "pith_open_graph_bundle", "")
    _check_versions(bundle)
    number = _need(bundle, "pith_number", str, "")
    record = _need(bundle, "canonical_record", dict, "")
    canonical = _need_hex(bundle, "canonical_sha256", "")
    aliases = _need(bundle, "source_aliases", list, "")
    events = _need(bundle, "events", list, "")
    state = _need(bundle, "state", dict, "")
    submitted = _need(
        _need(record, "metadata", dict, "canonical_record."), "submitted_at", str, "canonical_record.metadata."
    )

    created_index = _check_record(bundle, record, canonical, events, state, exact)
    _check_numbers(bundle, number, canonical, submitted, aliases, state)
    _check_public_keys(bundle, keyring)
    receipt_path = f"events[{created_index}].payload."
    receipt = _signature_block(events[created_index]["payload"], "receipt", RECEIPT_MESSAGE, receipt_path)
    if receipt.get("canonical_sha256") != canonical:
        raise Rejected(
            Reason.CANONICAL_HASH_MISMATCH, f"{receipt_path}receipt.canonical_sha256", "the receipt signs another hash"
        )
    keyring.check_signature(
        receipt,
        bytes.fromhex(canonical),
        f"{receipt_path}receipt",
        Reason.RECEIPT_SIGNATURE_INVALID,
        role=REGISTRY,
        created_at=receipt.get("signed_at"),
    )
    for index, event in enumerate(events):
        check_event(event, keyring, f"events[{index}]", number, exact)
    merged = merge(number, aliases, events)
    state_sha256, body = _check_state(merged, state, exact)
    bundle_sha256 = _check_bundle_signature(bundle, keyring, exact)
    facts = {
        "pith_number": number,
        "canonical_sha256": canonical,
        "bundle_sha256": bundle_sha256,
        "state_sha256": state_sha256,
    }
    if merged.inferred:
        facts.update(
            merge_confirmed=False, inferred_types=tuple(merged.inferred), merge_inferred_match=merged.state == body
        )
    return facts


def _check_versions(bundle: dict[str, Any]) -> None:
    """A version this archiver does not know is named, never guessed at."""
    for key, known in (("bundle_version", BUNDLE_VERSIONS), ("merge_version", (MERGE_VERSION,))):
        value = _need(bundle, key, str, "")
        if value not in known:
            raise Rejected(
                Reason.UNSUPPORTED_VERSION,
                key,
                f"{key} {value[:64]!r}; this archiver knows {', '.join(map(repr, known))}: upgrade it",
            )


def _check_record(
    bundle: dict[str, Any],
    record: dict[str, Any],
    canonical: str,
    events: list[Any],
    state: dict[str, Any],
    exact: bool,
) -> int:
    if canon_sha256(record, exact) != canonical:
        raise Rejected(Reason.CANONICAL_HASH_MISMATCH, "canonical_sha256", "does not hash canonical_record")
    created = [i for i, e in enumerate(events) if isinstance(e, dict) and e.get("event_type") == "record_created"]
    if len(created) != 1:
        raise Rejected(Reason.SCHEMA_VIOLATION, "events", f"expected one record_created event, found {len(created)}")
    index = created[0]
    payload = _need(events[index], "payload", dict, f"events[{index}].")
    if payload.get("canonical_record") != record:
        raise Rejected(Reason.RECORD_MISMATCH, f"events[{index}].payload.canonical_record")
    if payload.get("canonical_sha256") != canonical:
        raise Rejected(Reason.CANONICAL_HASH_MISMATCH, f"events[{index}].payload.canonical_sha256")
    current = _need(state, "current", dict, "state.")
    if current.get("canonical_record") != record:
        raise Rejected(Reason.RECORD_MISMATCH, "state.current.canonical_record")
    return index


def _check_numbers(
    bundle: dict[str, Any], number: str, canonical: str, submitted: Any, aliases: Any, state: dict[str, Any]
) -> None:
    if not (submitted[:4].isascii() and submitted[:4].isdigit() and submitted[4:5] == "-"):  # ASCII digits only
        raise Rejected(Reason.SCHEMA_VIOLATION, "canonical_record.metadata.submitted_at", "expected an ISO date")
    suffix = pith_suffix(canonical)
    expected = number_from_suffix(suffix, submitted)
    if number != expected:
        raise Rejected(Reason.PITH_NUMBER_MISMATCH, "pith_number", f"expected {expected}")
    if bundle.get("short_pith_number") != short_pith_number(suffix):
        raise Rejected(Reason.PITH_NUMBER_MISMATCH, "short_pith_number", f"expected {short_pith_number(suffix)}")
    if state.get("pith_number") != number:
        raise Rejected(Reason.PITH_NUMBER_MISMATCH, "state.pith_number")
    for index, alias in enumerate(aliases):
        if not isinstance(alias, dict):
            raise Rejected(Reason.SCHEMA_VIOLATION, f"source_aliases[{index}]", "expected an object")
        kind = alias.get("alias_kind")
        if isinstance(kind, str) and kind.startswith("pith_short_"):
            length = int(kind[11:]) if kind[11:] in {str(n) for n in SHORT_LENGTHS} else None
            if length is None or alias.get("alias_value") != suffix[:length]:
                raise Rejected(
                    Reason.PITH_NUMBER_MISMATCH,
                    f"source_aliases[{index}].alias_value",
                    f"{kind} is not derived from the hash",
                )


def _check_public_keys(bundle: dict[str, Any], keyring: Keyring) -> None:
    for index, entry in enumerate(_need(bundle, "public_keys", list, "")):
        path = f"public_keys[{index}]."
        if not isinstance(entry, dict):
            raise Rejected(Reason.SCHEMA_VIOLATION, f"public_keys[{index}]", "expected an object")
        if entry.get("algorithm") != "ed25519":
            raise Rejected(Reason.UNSUPPORTED_ALGORITHM, f"{path}algorithm", f"{entry.get('algorithm')!r}")
        try:
            raw = base64.b64decode(_need(entry, "public_key_b64", str, path), validate=True)
        except (binascii.Error, ValueError):
            raise Rejected(Reason.KEY_FINGERPRINT_MISMATCH, f"{path}public_key_b64", "not base64") from None
        if len(raw) != 32:
            raise Rejected(Reason.KEY_FINGERPRINT_MISMATCH, f"{path}public_key_b64", "not a 32-byte key")
        for name, value in key_fingerprints(raw).items():
            if name in entry and entry[name] != value:
                raise Rejected(Reason.KEY_FINGERPRINT_MISMATCH, f"{path}{name}", "does not match public_key_b64")
        pinned = keyring.get(entry.get("key_id"))
        if pinned is not None and pinned.raw != raw:
            raise Rejected(
                Reason.KEY_FINGERPRINT_MISMATCH, f"{path}public_key_b64", f"differs from the pinned key {pinned.key_id}"
            )


def check_event(
    event: Any, keyring: Keyring, path: str, subject: str | None, exact: bool = False, role: str = REGISTRY
) -> str:
    """Check one signed event (hash, id, subject, signature by a key of ``role``);
    return its content hash. Shared by bundles and by storage attestation feeds."""
    if not isinstance(event, dict):
        raise Rejected(Reason.SCHEMA_VIOLATION, path, "an event is an object")
    prefix = f"{path}."
    _need(event, "event_type", str, prefix)
    _need(event, "payload", dict, prefix)
    signer = _need(event, "signer", dict, prefix)
    content_sha256 = _need_hex(event, "content_sha256", prefix)
    content = {k: v for k, v in event.items() if k not in EVENT_UNHASHED}
    if canon_sha256(content, exact) != content_sha256:
        raise Rejected(Reason.EVENT_HASH_MISMATCH, f"{prefix}content_sha256", "does not hash the event")
    if event.get("event_id") != "sha256:" + content_sha256:
        raise Rejected(Reason.EVENT_ID_MISMATCH, f"{prefix}event_id", "expected 'sha256:' + content_sha256")
    if subject is not None and event.get("subject_pith_number") != subject:
        raise Rejected(Reason.SUBJECT_MISMATCH, f"{prefix}subject_pith_number", f"expected {subject}")
    signature = _signature_block(event, "signature", EVENT_MESSAGE, prefix)
    if signer.get("key_id") != signature.get("key_id") or signer.get("public_key_fingerprint") != signature.get(
        "public_key_fingerprint"
    ):
        raise Rejected(Reason.KEY_FINGERPRINT_MISMATCH, f"{prefix}signer", "signer and signature name different keys")
    # outside the content hash: in a feed nothing else covers it
    keyring.check_signature(
        signature,
        bytes.fromhex(content_sha256),
        f"{prefix}signature",
        Reason.EVENT_SIGNATURE_INVALID,
        SIGNATURE_MEMBERS,
        role=role,
        created_at=event.get("created_at"),
    )
    return content_sha256


def _check_state(merged: MergeResult, state: dict[str, Any], exact: bool) -> tuple[str, dict[str, Any]]:
    """The state's hash, and the state without it. With an inferred merge rule the
    recomputation is not held against the signed state (the caller records whether
    they agree)."""
    state_sha256 = _need_hex(state, "state_sha256", "state.")
    body = {k: v for k, v in state.items() if k != "state_sha256"}
    if canon_sha256(body, exact) != state_sha256:
        raise Rejected(Reason.STATE_HASH_MISMATCH, "state.state_sha256", "does not hash the state")
    if not merged.inferred and merged.state != body:
        raise Rejected(
            Reason.STATE_MISMATCH,
            "state." + first_difference(merged.state, body),
            "differs from the state the merge recomputes",
        )
    return state_sha256, body


def _check_bundle_signature(bundle: dict[str, Any], keyring: Keyring, exact: bool) -> str:
    sig = _signature_block(bundle, "bundle_signature", BUNDLE_MESSAGE, "")
    # signed_at is the one field no hash covers: hold it to a timestamp's form, so
    # anything passed on as verified carries no unsigned payload beyond a date.
    if not TIMESTAMP_RE.fullmatch(_need(sig, "signed_at", str, "bundle_signature.")):
        raise Rejected(Reason.SCHEMA_VIOLATION, "bundle_signature.signed_at", "expected an RFC 3339 UTC timestamp")
    claimed = _need_hex(sig, "bundle_sha256", "bundle_signature.")
    body = {k: v for k, v in bundle.items() if k != "bundle_signature"}
    if canon_sha256(body, exact) != claimed:
        raise Rejected(Reason.BUNDLE_HASH_MISMATCH, "bundle_signature.bundle_sha256", "does not hash the bundle")
    # no hash covers bundle_signature: it may hold its own members and nothing else.
    # built_at, which the hash covers, is when the registry built and signed this version.
    keyring.check_signature(
        sig,
        bytes.fromhex(claimed),
        "bundle_signature",
        Reason.BUNDLE_SIGNATURE_INVALID,
        BUNDLE_SIGNATURE_MEMBERS,
        role=REGISTRY,
        signed_at=bundle.get("built_at"),
    )
    return claimed


def first_difference(expected: Any, found: Any, path: str = "") -> str:
    """Path of the first place two JSON values differ (for people reading a verdict)."""
    if isinstance(expected, dict) and isinstance(found, dict):
        for key in sorted(set(expected) | set(found)):
            if expected.get(key, _MISSING) != found.get(key, _MISSING):
                sub = f"{path}.{key}" if path else key
                return first_difference(expected.get(key), found.get(key), sub)
    elif isinstance(expected, list) and isinstance(found, list):
        for index, (a, b) in enumerate(zip(expected, found)):
            if a != b:
                return first_difference(a, b, f"{path}[{index}]")
        if len(expected) != len(found):
            return f"{path}[{min(len(expected), len(found))}]"
    return path


def key_ids(bundle: Any) -> tuple[str, ...]:
    """The key ids of every signature in a parsed bundle, sorted (none when it did not parse)."""
    if not isinstance(bundle, dict):
        return ()
    signed = [
        bundle.get("bundle_signature"),
        *(e.get("signature") for e in bundle.get("events") or [] if isinstance(e, dict)),
    ]
    return tuple(sorted({s["key_id"] for s in signed if isinstance(s, dict) and isinstance(s.get("key_id"), str)}))


_MISSING = object()
PATH_STEP = re.compile(r"([^.\[\]]+)|\[([0-9]+)\]")


def value_at(doc: Any, path: str) -> Any:
    """The value a verdict's ``path`` names in ``doc`` (``events[0].payload.receipt.key_id``);
    None when there is none."""
    for name, index in PATH_STEP.findall(path):
        try:
            doc = doc[int(index)] if index else doc[name]
        except (KeyError, IndexError, TypeError):
            return None
    return doc
