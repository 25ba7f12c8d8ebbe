"""What the spider hands to the pipelines: exact bytes plus where and when they came from."""

from dataclasses import dataclass, field

from pith.reasons import Reason
from pith.split_view import Equivocation
from pith.verdict import Verdict
from storage.archive.stores import Put, StorageError
from storage.writing.prepared import Prepared


@dataclass
class BundleItem:
    """A fetched bundle: ``body`` is the exact response body, ``verdict`` what the
    spider's verifier (crawler.verifying.verifier) made of it."""

    url: str
    body: bytes = field(repr=False)  # a log line about the item must not carry (hostile) megabytes
    raw_sha256: str  # of ``body``, hashed where it was checked (off Scrapy's thread): its name in the archive
    fetched_at: str
    suffix: str | None  # the record the URL named, when it named one
    verdict: Verdict
    depth: int = 0
    cross_check: bool = False  # one of a record's copies fetched from every source (--cross-check)
    answers: bool = True  # the record's answer; False: a copy kept as evidence only (a bad mirror's, a cross-check's)
    equivocation: Equivocation | None = None  # set by the split-view pipeline: it forks from another source's copy
    key_ids: tuple[str, ...] = ()  # of its signatures (pith.verify.key_ids), for its WARC verdict record
    prepared: Prepared | None = field(default=None, repr=False)  # verified: its rows, prepared where it was checked
    stored: Put | StorageError | None = None  # verified: its bytes, stored where they were checked (or why not)


@dataclass
class StateCheckItem:
    """state.json compared with the state carried by the bundle it belongs to."""

    url: str
    fetched_at: str
    pith_number: str | None
    bundle_sha256: str
    matches: bool
    detail: str = ""
    reason: str = Reason.STATE_MISMATCH  # or WRONG_RECORD: another record's state.json


@dataclass
class FetchFailureItem:
    """A bundle that could not be fetched at all, after retries and fallbacks."""

    url: str
    fetched_at: str
    suffix: str | None
    reason: str  # Reason.FETCH_FAILED or Reason.TOO_LARGE
    detail: str
