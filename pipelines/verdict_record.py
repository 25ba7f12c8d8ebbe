"""What the WARC files say of each bundle the crawl judged: the fields of its
``bundle_verdict`` metadata record (docs/ARCHIVE.md), which the archive pipeline hands
to the WARC writer (``storage.capture.warc.WarcWriter.verdict``)."""

from typing import Any

from pith.verify import Verdict
from storage.capture.warc import software


def key_ids(bundle: dict[str, Any] | None) -> list[str]:
    """The key ids of every signature in a parsed bundle (none when it did not parse)."""
    if not isinstance(bundle, dict):
        return []
    signed = [
        bundle.get("bundle_signature"),
        *(e.get("signature") for e in bundle.get("events") or [] if isinstance(e, dict)),
    ]
    return sorted({s["key_id"] for s in signed if isinstance(s, dict) and isinstance(s.get("key_id"), str)})


def verdict_fields(verdict: Verdict, raw_sha256: str, raw_path: str | None) -> dict[str, Any]:
    """What a ``metadata`` record says of a fetched bundle: the verdict, the keys that
    signed it, and where the archive keeps its bytes (None: a version archived before)."""
    return {
        **verdict.as_dict(),
        "key_ids": key_ids(verdict.bundle),
        "raw_sha256": raw_sha256,
        "raw_path": raw_path,
        "verifier": software(),
    }
