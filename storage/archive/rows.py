"""Table rows from verified bundles and verdicts, one builder per table
(``storage.archive.tables`` has the schemas). A value of an unexpected type in a bundle
becomes its canonical JSON text, or null, never an error and never a dropped row."""

from datetime import datetime, timezone
from typing import Any

from pith.canonical import canon
from pith.split_view import Equivocation
from pith.verdict import Verdict
from storage.archive import layout


def verified_bundle(verdict: Verdict) -> dict[str, Any]:
    """The parsed bundle of a verified verdict (a rejected one may have none)."""
    if verdict.bundle is None:
        raise ValueError(f"a {verdict.status} verdict without its bundle")
    return verdict.bundle


def _text(value: object) -> str | None:
    """Strings as they are; other JSON values as canonical JSON text, never dropped."""
    if value is None or isinstance(value, str):
        return value
    return canon(value).decode("utf-8")


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63 else None


def _texts(value: object) -> list[str | None] | None:
    return [_text(v) for v in value] if isinstance(value, list) else None


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def timestamp(value: object) -> datetime | None:
    """An ISO 8601 UTC time from a bundle, or None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.astimezone(timezone.utc) if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("fetch times must be timezone-aware")
    return moment.astimezone(timezone.utc)


def _paper(bundle: dict[str, Any]) -> dict[str, Any]:
    """The paper block of the last graph_snapshot: the registry's latest metadata."""
    for event in reversed(bundle["events"]):
        if event.get("event_type") == "graph_snapshot":
            return _dict(_dict(_dict(event.get("payload")).get("graph_snapshot")).get("paper"))
    return {}


def record_row(
    verdict: Verdict,
    *,
    raw_sha256: str,
    url: str | None,
    fetched_at: datetime,
    run_id: str,
    accepted_as_current: bool = True,
) -> dict[str, Any]:
    """The ``records`` row of a verified bundle version."""
    bundle = verified_bundle(verdict)
    record = bundle["canonical_record"]
    metadata, source = record["metadata"], _dict(record.get("source"))
    paper = _paper(bundle)
    authors_text = _text(paper.get("authors_text"))
    return {
        "year": int(metadata["submitted_at"][:4]),
        "pith_number": verdict.pith_number,
        "short_pith_number": _text(bundle.get("short_pith_number")),
        "source_kind": _text(source.get("kind")),
        "source_id": _text(source.get("id")),
        "source_version": _integer(source.get("version")),
        "canonical_sha256": verdict.canonical_sha256,
        "bundle_sha256": verdict.bundle_sha256,
        "state_sha256": verdict.state_sha256,
        "raw_sha256": raw_sha256,
        "title": _text(paper.get("title")),
        "authors": authors_text.split(", ") if authors_text else [],
        "authors_text": authors_text,
        "primary_category": _text(metadata.get("primary_cat")),
        "cross_categories": _texts(metadata.get("cross_cats_sorted")),
        "license": _text(metadata.get("license")),
        "title_canon_sha256": _text(metadata.get("title_canon_sha256")),
        "abstract_canon_sha256": _text(metadata.get("abstract_canon_sha256")),
        "submitted_at": timestamp(metadata["submitted_at"]),
        "built_at": timestamp(bundle.get("built_at")),
        "event_count": len(bundle["events"]),
        "fetched_at": _utc(fetched_at),
        "source_url": url,
        "raw_path": layout.raw_bundle(raw_sha256),
        "accepted_as_current": accepted_as_current,
        "run_id": run_id,
        **merge_facts(verdict),
    }


def merge_facts(verdict: Verdict) -> dict[str, Any]:
    """The merge columns of a verified version (all null for anything else)."""
    if not verdict.ok:
        return {}
    return {
        "merge_confirmed": verdict.merge_confirmed,
        "merge_inferred_types": list(verdict.inferred_types) or None,
        "merge_inferred_match": verdict.merge_inferred_match,
    }


def event_rows(verdict: Verdict, *, run_id: str) -> list[dict[str, Any]]:
    """One ``events`` row per event of a verified bundle version."""
    rows = []
    for index, event in enumerate(verified_bundle(verdict)["events"]):
        signer, signature = _dict(event.get("signer")), _dict(event.get("signature"))
        rows.append(
            {
                "event_type": event["event_type"],
                "event_id": event["event_id"],
                "pith_number": verdict.pith_number,
                "bundle_sha256": verdict.bundle_sha256,
                "event_index": index,
                "target": _text(event.get("target")),
                "created_at": timestamp(event.get("created_at")),
                "signed_at": timestamp(signature.get("signed_at")),
                "signer_id": _text(signer.get("signer_id")),
                "signer_type": _text(signer.get("signer_type")),
                "key_id": _text(signature.get("key_id")),
                "prev_event": _text(event.get("prev_event")),
                "supersedes": _texts(event.get("supersedes")),
                "payload_json": canon(event["payload"], verdict.exact).decode("utf-8"),
                "run_id": run_id,
            }
        )
    return rows


def alias_rows(verdict: Verdict, *, run_id: str) -> list[dict[str, Any]]:
    """One ``aliases`` row per source alias of a verified bundle version."""
    return [
        {
            "alias_kind": _text(alias.get("alias_kind")),
            "pith_number": verdict.pith_number,
            "alias_value": _text(alias.get("alias_value")),
            "created_at": timestamp(alias.get("created_at")),
            "bundle_sha256": verdict.bundle_sha256,
            "run_id": run_id,
        }
        for alias in verified_bundle(verdict)["source_aliases"]
    ]


def attestation_row(event: dict[str, Any]) -> dict[str, Any]:
    """The ``attestations`` row of one storage attestation this archive signed."""
    payload = event["payload"]
    return {
        "key_id": event["signature"]["key_id"],
        "event_id": event["event_id"],
        "pith_number": event["subject_pith_number"],
        "bundle_sha256": payload["bundle_sha256"],
        "canonical_sha256": payload["canonical_sha256"],
        "raw_path": payload["raw_path"],
        "raw_sha256": payload["raw_sha256"],
        "size": payload["size"],
        "storage_uri": payload["storage_uri"],
        "stored_at": timestamp(payload["stored_at"]),
        "signed_at": timestamp(event["signature"]["signed_at"]),
        "prev_event": event["prev_event"],
        "run_id": payload["run_id"],
    }


def verification_row(
    verdict: Verdict,
    *,
    url: str,
    raw_sha256: str | None,
    size: int | None,
    raw_path: str | None,
    fetched_at: datetime,
    run_id: str,
    duplicate: bool = False,
    equivocation: Equivocation | None = None,
) -> dict[str, Any]:
    """The ``verifications`` row of any fetch: verified, rejected or failed;
    ``equivocation`` (a pith.split_view.Equivocation) names the copy it forks from."""
    fetched = _utc(fetched_at)
    return {
        "fetch_date": fetched.date().isoformat(),
        "url": url,
        "pith_number": verdict.pith_number,
        "status": verdict.status,
        "reason": verdict.reason or None,
        "detail_path": verdict.path or None,
        "detail": verdict.detail or None,
        "raw_sha256": raw_sha256,
        "size": size,
        "raw_path": raw_path,
        "bundle_sha256": verdict.bundle_sha256,
        "duplicate": duplicate,
        "other_url": equivocation and equivocation.other_url,
        "other_bundle_sha256": equivocation and equivocation.other_bundle_sha256,
        "fetched_at": fetched,
        "run_id": run_id,
        **merge_facts(verdict),
    }
