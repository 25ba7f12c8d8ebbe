"""The deterministic merge ``pith-open-graph-merge-v1``: recompute a bundle's state
from its events.

Only ``record_created`` and ``graph_snapshot`` are confirmed on real bundles. Other
event types follow the rule the format doc infers (the list of the same name, same
entry shape); a merge that used such a rule says so through ``inferred``.
"""

from dataclasses import dataclass
from typing import Any

MERGE_VERSION = "pith-open-graph-merge-v1"
STATE_TYPE = "pith_open_graph_state"  # a merged state's state_type, in a bundle or served alone (state.json)
ENTRY_FIELDS = ("event_id", "target", "created_at", "signer", "payload")
CONFIRMED_TYPES = frozenset({"record_created", "graph_snapshot"})
LISTS = {
    "graph_snapshot": "graph_snapshots",
    "author_attestation": "author_attestations",
    "timestamp_anchor": "timestamp_anchors",
    "storage_attestation": "storage_attestations",
    "citation_signature": "citation_signatures",
    "replication_record": "replication_records",
    "correction": "corrections",
    "mirror_hint": "mirror_hints",
}


@dataclass
class MergeResult:
    state: dict[str, Any]  # without state_sha256
    inferred: list[Any]  # event types merged by an inferred rule, in first-seen order


def entry(event: dict[str, Any]) -> dict[str, Any]:
    return {field: event.get(field) for field in ENTRY_FIELDS}


def merge(pith_number: str, source_aliases: list[Any], events: list[Any]) -> MergeResult:
    """The state (without ``state_sha256``) that ``events``, all valid, merge into."""
    current: dict[str, object] = {"canonical_record": None, "source_aliases": source_aliases}
    lists: dict[str, list[dict[str, Any]]] = {name: [] for name in LISTS.values()}
    current.update(lists)
    inferred: list[str] = []
    for event in events:
        kind = event.get("event_type")
        if kind == "record_created":
            current["record_created"] = entry(event)
            current["canonical_record"] = event["payload"]["canonical_record"]
        elif kind in LISTS:
            lists[LISTS[kind]].append(entry(event))
        if kind not in CONFIRMED_TYPES and kind not in inferred:
            inferred.append(kind)
    state = {
        "state_type": STATE_TYPE,
        "state_version": "1.0",
        "pith_number": pith_number,
        "merge_version": MERGE_VERSION,
        "event_count": len(events),
        "valid_event_count": len(events),
        "invalid_event_count": 0,
        "equivocation_count": 0,
        "current": current,
        "equivocations": [],
        "invalid_events": [],
        "applied_event_ids": [event.get("event_id") for event in events],
    }
    return MergeResult(state, inferred)
