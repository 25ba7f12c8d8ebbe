"""What checking one document found: a ``Status`` and an immutable ``Verdict``, the one
shape the crawl, ``verify``, the peer sync, the audit and the archive's tables all read."""

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


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
