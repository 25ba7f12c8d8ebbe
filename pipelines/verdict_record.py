"""What the WARC files say of each bundle the crawl judged: the fields of its
``bundle_verdict`` metadata record (docs/ARCHIVE.md), which the archive pipeline hands
to the WARC writer (``storage.capture.warc.WarcWriter.verdict``)."""

from typing import Any

from pith.verdict import Verdict
from storage.capture.warc import software


def verdict_fields(verdict: Verdict, raw_sha256: str, raw_path: str | None, key_ids: tuple[str, ...]) -> dict[str, Any]:
    """What a ``metadata`` record says of a fetched bundle: the verdict, the keys that
    signed it (``pith.verify.key_ids``), and where the archive keeps its bytes (None: a
    version archived before)."""
    return {
        **verdict.as_dict(),
        "key_ids": list(key_ids),
        "raw_sha256": raw_sha256,
        "raw_path": raw_path,
        "verifier": software(),
    }
