"""One ``verify`` target to one record: a bundle's verdict, a feed's, a state
document's comparison with its bundle, or why it was skipped. Picklable, so worker
processes check targets with the keyring sent once."""

from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from pith.attestation import Chain, check_feed, split_lines
from pith.canonical import canon
from pith.keyring import Keyring
from pith.parse import Limits, parse
from pith.reasons import Reason, Rejected
from pith.verdict import Status
from pith.verify import verify_bundle
from storage.archive.folder_store import LocalStore
from storage.archive.stores import StorageError
from storage.publishing.release_check import verify_release

from . import s3_sources, sources


class TargetChecker:
    """Checks targets against one keyring under one set of parsing limits; s3:// ones
    through ``s3_endpoint_url`` (or the AWS variables)."""

    def __init__(self, keyring: Keyring, limits: Limits, s3_endpoint_url: str | None = None):
        self.keyring = keyring
        self.limits = limits
        self.s3_endpoint_url = s3_endpoint_url

    def __call__(self, target: sources.Target) -> dict:
        if target.skip:
            return skipped(target.source, target.skip)
        if target.is_feed:
            return self.feed(target.source)
        if target.is_release:
            return self.release(target.source)
        if target.is_wacz:
            return self.wacz(target.source)
        return self.bundle(target.source)

    def release(self, source: str) -> dict:
        """A dataset release's release.json and the files beside it (storage.publishing.release_check)."""
        try:
            if source.startswith(s3_sources.SCHEME):
                store = s3_sources.folder(source, self.s3_endpoint_url)
            else:
                store = LocalStore(Path(source).parent)
            document = verify_release(store, self.keyring)
        except StorageError as exc:
            return unreadable(source, exc)
        except Rejected as exc:
            return rejected(source, exc)
        return {
            "source": source,
            "status": Status.VERIFIED,
            "release_id": document.get("release_id"),
            "files": len(document["files"]),
        }

    def wacz(self, source: str) -> dict:
        """A WACZ package (storage.capture.wacz_check), then each bundle inside, as a bundle
        file is judged; ``inside`` carries their records, reported before the package's."""
        from storage.capture.wacz_check import bundles_in_wacz  # warcio: only for a WACZ

        inside = []
        try:
            with self._local(source) as path:
                for where, url, raw in bundles_in_wacz(path, self.keyring, self.limits.max_bytes):
                    verdict = verify_bundle(raw, self.keyring, self.limits)
                    inside.append({"source": f"{source}#{where}", "url": url, **verdict.as_dict()})
        except (OSError, StorageError) as exc:
            return unreadable(source, exc)
        except Rejected as exc:
            return rejected(source, exc)
        return {"source": source, "status": Status.VERIFIED, "bundles": len(inside), "inside": inside}

    def _local(self, source: str) -> AbstractContextManager[Path]:
        """A file, or a local copy of an s3:// object for the duration."""
        if source.startswith(s3_sources.SCHEME):
            return s3_sources.downloaded(source, self.s3_endpoint_url)
        return nullcontext(Path(source))

    def bundle(self, source: str) -> dict:
        try:
            raw = sources.read(source, self.limits.max_bytes, self.s3_endpoint_url)
        except sources.SourceError as exc:
            return unreadable(source, exc)
        claimed = sources.claims_bundle(source)
        kind = sources.not_json(raw)
        if kind and claimed:  # named or placed as a bundle: what it holds instead is a rejection
            detail = f"{kind} where a bundle was expected (an error page saved in its place?)"
            return rejected(source, Rejected(Reason.MALFORMED_JSON, "", detail))
        if kind:
            return skipped(source, f"not a bundle ({kind})")
        verdict = verify_bundle(raw, self.keyring, self.limits)
        if not verdict.ok and not claimed and sources.is_state(verdict.bundle):
            return self.state(source, verdict.bundle)
        kind = "" if verdict.ok or claimed else sources.not_a_bundle(verdict.bundle)
        if kind:
            return skipped(source, f"not a bundle ({kind})")
        return {"source": source, **verdict.as_dict()}

    def state(self, source: str, document: Any) -> dict:
        """A state document (``state.json``), never judged as a bundle: skipped and
        counted, once compared with the state carried by the bundle beside it, when
        that one can be read (``sources.bundle_beside``; the bundle is judged as a
        target of its own); one that differs is rejected (``state_mismatch``, or
        ``wrong_record`` when it is another record's)."""
        beside = sources.bundle_beside(source)
        try:
            raw = sources.read(beside, self.limits.max_bytes, self.s3_endpoint_url) if beside else None
            bundle = parse(raw, self.limits).data if raw is not None else None
        except (sources.SourceError, Rejected):
            bundle = None
        signed = bundle.get("state") if isinstance(bundle, dict) else None
        number = document.get("pith_number")
        facts = {"document": "state", "pith_number": number if isinstance(number, str) else None}
        if not isinstance(signed, dict):
            return {
                **skipped(source, "not a bundle (a state document; no bundle beside it to check it against)"),
                **facts,
            }
        if canon(document) == canon(signed):
            why = f"not a bundle (a state document, matching the state in {beside})"
            return {**skipped(source, why), **facts, "matches": True}
        reason = Reason.STATE_MISMATCH if number == signed.get("pith_number") else Reason.WRONG_RECORD
        found = Rejected(reason, "", f"a state document that differs from the state in {beside}")
        return {**rejected(source, found), **facts, "matches": False}

    def feed(self, source: str) -> dict:
        """Check one attestation feed, streaming; ``stretches`` carries its part of the
        chains, which only the feeds together can judge (see pith.attestation.Chain)."""
        chain = Chain()
        try:
            with sources.opened(source, self.s3_endpoint_url) as chunks:
                count = check_feed(source, split_lines(chunks), self.keyring, chain)
        except sources.SourceError as exc:
            return unreadable(source, exc)
        except Rejected as exc:
            return rejected(source, exc)
        return {"source": source, "status": Status.VERIFIED, "attestations": count, "stretches": chain.stretches}


def rejected(source: str, exc: Rejected) -> dict:
    return {"source": source, "status": Status.REJECTED, "reason": exc.reason, "path": exc.path, "detail": exc.detail}


def unreadable(source: str, exc: BaseException) -> dict:
    return {"source": source, "status": Status.UNREADABLE, "detail": str(exc)}


def skipped(source: str, why: str) -> dict:
    return {"source": source, "status": Status.SKIPPED, "detail": why}
