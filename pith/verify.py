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
from typing import Any

from .canonical import canon_sha256
from .json_path import first_difference
from .keyring import REGISTRY, SIGNATURE_MEMBERS, Keyring
from .merge import MERGE_VERSION, MergeResult, merge
from .numbers import SHORT_LENGTHS, key_fingerprints, number_from_suffix, pith_suffix, short_pith_number
from .parse import Limits, parse
from .reasons import Reason, Rejected
from .schema import need, need_equal, need_hex, need_timestamp, signature_block
from .signed_event import check_event
from .verdict import Status, Verdict

RECEIPT_MESSAGE = "canonical_sha256_bytes"
BUNDLE_MESSAGE = "bundle_sha256_bytes"
BUNDLE_SIGNATURE_MEMBERS = SIGNATURE_MEMBERS | {"bundle_sha256"}
BUNDLE_VERSIONS = ("1.0",)  # the bundle_version values this archiver knows how to check


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


def bundle_facts(bundle: Any, keyring: Keyring, exact: bool = False) -> dict[str, Any]:
    if not isinstance(bundle, dict):
        raise Rejected(Reason.SCHEMA_VIOLATION, "", f"a bundle is an object, found {type(bundle).__name__}")
    need_equal(bundle, "bundle_type", "pith_open_graph_bundle", "")
    _check_versions(bundle)
    number = need(bundle, "pith_number", str, "")
    record = need(bundle, "canonical_record", dict, "")
    canonical = need_hex(bundle, "canonical_sha256", "")
    aliases = need(bundle, "source_aliases", list, "")
    events = need(bundle, "events", list, "")
    state = need(bundle, "state", dict, "")
    submitted = need(
        need(record, "metadata", dict, "canonical_record."), "submitted_at", str, "canonical_record.metadata."
    )

    created_index = _check_record(bundle, record, canonical, events, state, exact)
    _check_numbers(bundle, number, canonical, submitted, aliases, state)
    _check_public_keys(bundle, keyring)
    receipt_path = f"events[{created_index}].payload."
    receipt = signature_block(events[created_index]["payload"], "receipt", RECEIPT_MESSAGE, receipt_path)
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
        value = need(bundle, key, str, "")
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
    payload = need(events[index], "payload", dict, f"events[{index}].")
    if payload.get("canonical_record") != record:
        raise Rejected(Reason.RECORD_MISMATCH, f"events[{index}].payload.canonical_record")
    if payload.get("canonical_sha256") != canonical:
        raise Rejected(Reason.CANONICAL_HASH_MISMATCH, f"events[{index}].payload.canonical_sha256")
    current = need(state, "current", dict, "state.")
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
    for index, entry in enumerate(need(bundle, "public_keys", list, "")):
        path = f"public_keys[{index}]."
        if not isinstance(entry, dict):
            raise Rejected(Reason.SCHEMA_VIOLATION, f"public_keys[{index}]", "expected an object")
        if entry.get("algorithm") != "ed25519":
            raise Rejected(Reason.UNSUPPORTED_ALGORITHM, f"{path}algorithm", f"{entry.get('algorithm')!r}")
        try:
            raw = base64.b64decode(need(entry, "public_key_b64", str, path), validate=True)
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


def _check_state(merged: MergeResult, state: dict[str, Any], exact: bool) -> tuple[str, dict[str, Any]]:
    """The state's hash, and the state without it. With an inferred merge rule the
    recomputation is not held against the signed state (the caller records whether
    they agree)."""
    state_sha256 = need_hex(state, "state_sha256", "state.")
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
    sig = signature_block(bundle, "bundle_signature", BUNDLE_MESSAGE, "")
    # signed_at is the one field no hash covers: hold it to a timestamp's form, so
    # anything passed on as verified carries no unsigned payload beyond a date.
    need_timestamp(sig, "signed_at", "bundle_signature.")
    claimed = need_hex(sig, "bundle_sha256", "bundle_signature.")
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


def key_ids(bundle: Any) -> tuple[str, ...]:
    """The key ids of every signature in a parsed bundle, sorted (none when it did not parse)."""
    if not isinstance(bundle, dict):
        return ()
    signed = [
        bundle.get("bundle_signature"),
        *(e.get("signature") for e in bundle.get("events") or [] if isinstance(e, dict)),
    ]
    return tuple(sorted({s["key_id"] for s in signed if isinstance(s, dict) and isinstance(s.get("key_id"), str)}))
