"""Bundles as documents: their serving form, and the human-facing facts (title,
authors, dates, aliases) read out of a parsed one, tolerating bundles that lack them:
a page is still served for a record whose snapshot is missing, it just says less."""

import json
from dataclasses import dataclass

from pith.graph import latest_snapshot


def compact_json(doc: object) -> bytes:
    """``doc`` as the registry serves its documents: compact, keys in their own order, UTF-8."""
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@dataclass(frozen=True)
class RecordView:
    pith_number: str
    short_pith_number: str
    canonical_sha256: str
    canonical_record: dict
    title: str
    authors_text: str
    source: dict
    categories: list
    aliases: list  # (kind, value) pairs
    first_computed_at: str
    key_id: str

    @classmethod
    def from_bundle(cls, bundle: dict) -> "RecordView":
        record = bundle.get("canonical_record") or {}
        metadata = record.get("metadata") or {}
        paper = latest_snapshot(bundle).get("paper") or {}
        receipt = next(
            (
                (e.get("payload") or {}).get("receipt") or {}
                for e in bundle.get("events") or []
                if isinstance(e, dict) and e.get("event_type") == "record_created"
            ),
            {},
        )
        return cls(
            pith_number=bundle.get("pith_number", ""),
            short_pith_number=bundle.get("short_pith_number", ""),
            canonical_sha256=bundle.get("canonical_sha256", ""),
            canonical_record=record,
            title=paper.get("title", ""),
            authors_text=paper.get("authors_text", ""),
            source=record.get("source") or {},
            categories=[metadata.get("primary_cat", "")] + list(metadata.get("cross_cats_sorted") or []),
            aliases=[
                (a.get("alias_kind", ""), a.get("alias_value", ""))
                for a in bundle.get("source_aliases") or []
                if isinstance(a, dict)
            ],
            first_computed_at=receipt.get("first_computed_at", ""),
            key_id=receipt.get("key_id", ""),
        )

    @property
    def submitted_date(self) -> str:
        return str((self.canonical_record.get("metadata") or {}).get("submitted_at", ""))[:10]

    @property
    def authors(self) -> list[str]:
        return [name.strip() for name in self.authors_text.split(",") if name.strip()]
