"""Build open graph bundles exactly in the registry's format, signed by a given key.

The corpus generator uses it to mint test records, the tests use it to re-sign
tampered bundles (so a check deeper than the signatures can be reached).
"""

import copy

from pith.canonical import canon_sha256
from pith.events import new_event
from pith.links import REGISTRY_BASE, links_for
from pith.merge import MERGE_VERSION, merge
from pith.numbers import SHORT_LENGTHS, pith_number, pith_suffix, short_pith_number
from pith.signing import Signer


def mirror_hint(suffix: str, base: str = REGISTRY_BASE, name: str = "Pith Resolver", status: str = "primary") -> dict:
    links = links_for(suffix, base)
    return {
        "mirror_type": "https",
        "name": name,
        "base_url": base,
        "bundle_url": links["bundle"],
        "state_url": links["state"],
        "well_known_bundle_url": links["well_known_bundle"],
        "status": status,
    }


def record_event(
    signer: Signer,
    number: str,
    record: dict,
    canonical: str,
    created_at: str,
    signed_at: str,
    builder: str = "pith-number-builder-test",
) -> dict:
    source = record["source"]
    receipt = {
        "kind": "pith_receipt",
        "key_id": signer.key_id,
        "algorithm": "ed25519",
        "signed_at": signed_at,
        "signature_b64": signer.sign_b64(canonical),
        "signed_message": "canonical_sha256_bytes",
        "builder_version": builder,
        "receipt_version": "0.3",
        "canonical_sha256": canonical,
        "last_reissued_at": signed_at,
        "signature_status": "signed_v1",
        "first_computed_at": signed_at,
        "public_key_fingerprint": signer.fingerprint,
    }
    payload = {
        "canonical_record": record,
        "canonical_sha256": canonical,
        "receipt": receipt,
        "source_kind": source["kind"],
        "source_id": source["id"],
        "source_version": source["version"],
        "attestation_state": "computed",
    }
    return new_event(signer, "record_created", number, "record", payload, created_at, signed_at)


def seal(bundle: dict, signer: Signer, signed_at: str) -> dict:
    """Recompute the state and its hash from the events, then hash and sign the bundle."""
    body = {k: v for k, v in bundle.items() if k not in ("state", "bundle_signature")}
    state = merge(body["pith_number"], body["source_aliases"], body["events"]).state
    state["state_sha256"] = canon_sha256(state)
    body["state"] = state
    return sign_bundle(body, signer, signed_at)


def sign_bundle(bundle: dict, signer: Signer, signed_at: str) -> dict:
    """Hash and sign the bundle as it stands (any old bundle_signature replaced)."""
    body = {k: v for k, v in bundle.items() if k != "bundle_signature"}
    digest = canon_sha256(body)
    body["bundle_signature"] = {**signer.signature(digest, "bundle_sha256_bytes", signed_at), "bundle_sha256": digest}
    return body


def mint_bundle(
    signer: Signer,
    record: dict,
    aliases: list,
    extra_events: list,
    created_at: str,
    built_at: str,
    base: str = REGISTRY_BASE,
) -> dict:
    """A complete bundle for ``record``; ``extra_events`` are (type, target, payload) triples
    appended after ``record_created`` (usually one graph_snapshot)."""
    canonical = canon_sha256(record)
    number = pith_number(canonical, record["metadata"]["submitted_at"])
    suffix = pith_suffix(canonical)
    shorts = [
        {"alias_kind": f"pith_short_{n}", "alias_value": suffix[:n], "created_at": created_at}
        for n in sorted(SHORT_LENGTHS, key=str)
    ]
    events = [record_event(signer, number, record, canonical, created_at, built_at)]
    events += [
        new_event(signer, kind, number, target, payload, created_at, built_at) for kind, target, payload in extra_events
    ]
    source = record["source"]
    bundle = {
        "bundle_type": "pith_open_graph_bundle",
        "bundle_version": "1.0",
        "pith_number": number,
        "short_pith_number": short_pith_number(suffix),
        "canonical_record": record,
        "canonical_sha256": canonical,
        "source": {"kind": source["kind"], "id": source["id"], "version": source["version"]},
        "source_aliases": aliases + shorts,
        "events": events,
        "timestamp_proofs": [],
        "mirror_hints": [mirror_hint(suffix, base)],
        "public_keys": [signer.public_document()],
        "merge_version": MERGE_VERSION,
        "built_at": built_at,
        "links": links_for(suffix, base),
    }
    return seal(bundle, signer, built_at)


def with_snapshot(bundle: dict, signer: Signer, at: str) -> dict:
    """The append-only successor of ``bundle``, as a registry rebuilds a record: every
    event kept, a new graph snapshot (the last one's, with one more claim counted)
    appended, built and signed at ``at``."""
    last = next(event for event in reversed(bundle["events"]) if event["event_type"] == "graph_snapshot")
    snapshot = copy.deepcopy(last["payload"])
    snapshot["graph_snapshot"]["claims"]["count"] += 1
    event = new_event(signer, "graph_snapshot", bundle["pith_number"], "graph", snapshot, at, at)
    return seal({**bundle, "events": [*bundle["events"], event], "built_at": at}, signer, at)
