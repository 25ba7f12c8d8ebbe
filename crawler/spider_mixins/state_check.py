"""Checking state.json against the state its bundle carries and signs, for the share
of records PITH_CHECK_STATE asks (a spider mixin of ``pith``)."""

import hashlib
import logging
from collections.abc import Callable, Iterator

import scrapy
from scrapy.http import Response
from twisted.python.failure import Failure

from pith.canonical import canon_sha256, sha256_hex
from pith.numbers import suffix_of
from pith.parse import Limits, parse
from pith.reasons import Reason, Rejected
from pith.signing import utc_now

from ..downloading.spread import SourcePool
from ..failures import describe, failed_request
from ..items import StateCheckItem
from ..links import ResolverUrls, base_of
from ..meta_keys import Meta
from ..stat_keys import Stat
from ..verifying.identity import names

logger = logging.getLogger(__name__)

PRIORITY = 30  # before more bundles: a record is finished before new ones are opened


def in_sample(suffix: str, share: float) -> bool:
    """Whether a record is in a ``share`` (0 to 1) of all records: the same records on
    every crawl, spread evenly over the suffixes."""
    return share >= 1 or int.from_bytes(hashlib.sha256(suffix.encode()).digest()[:4], "big") < share * 2**32


class StateCheck:
    """A mixin of the spider: what it needs of it is declared here."""

    check_state: float  # the share of records whose state.json is fetched (PITH_CHECK_STATE)
    resolver: ResolverUrls
    limits: Limits
    pool: SourcePool
    _stat: Callable[..., None]

    def state_requests(self, response: Response, suffix: str, bundle: dict | None) -> Iterator[scrapy.Request]:
        """The state.json request of a fetched bundle, when its record is in the
        PITH_CHECK_STATE sample: compared with the state the bundle carries and signs."""
        state = bundle.get("state") if isinstance(bundle, dict) else None
        if (
            isinstance(bundle, dict)
            and isinstance(state, dict)
            and self.check_state
            and in_sample(suffix, self.check_state)
        ):
            yield scrapy.Request(
                ResolverUrls(base_of(response.url), self.resolver.templates).url("state_url", suffix),
                callback=self.parse_state,
                errback=self.state_failed,
                priority=PRIORITY,
                dont_filter=True,
                meta={
                    Meta.EXPECTED_STATE: canon_sha256(state),
                    "pith_number": bundle.get("pith_number"),
                    "pith_bundle_sha256": sha256_hex(response.body),
                    Meta.CONDITIONAL: True,
                    "handle_httpstatus_list": [304],
                },
            )

    def parse_state(self, response: Response) -> Iterator[StateCheckItem]:
        meta = response.meta
        if response.status == 304:
            self._stat(Stat.NOT_MODIFIED)
            return
        reason = Reason.STATE_MISMATCH
        try:
            state = parse(response.body, self.limits).data
            matches, detail = canon_sha256(state) == meta[Meta.EXPECTED_STATE], ""
            served = state.get("pith_number") if isinstance(state, dict) else None
            if not names(served, suffix_of(str(meta.get("pith_number")))):
                reason, detail = Reason.WRONG_RECORD, f"state.json is not {meta.get('pith_number')}'s"
                self.pool.judged(response.url, Reason.WRONG_RECORD)
            elif not matches:
                detail = "state.json differs from the bundle's state"
        except Rejected as rejected:
            matches, detail = False, f"state.json unreadable: {rejected}"
        if not matches:
            self._stat(Stat.STATE_MISMATCH)
            logger.warning("%s: %s", response.url, detail)
        yield StateCheckItem(
            url=response.url,
            fetched_at=utc_now(),
            pith_number=meta.get("pith_number"),
            bundle_sha256=meta["pith_bundle_sha256"],
            matches=matches,
            detail=detail,
            reason=reason,
        )

    def state_failed(self, failure: Failure) -> Iterator[StateCheckItem]:
        self._stat(Stat.STATE_UNAVAILABLE)
        meta = failed_request(failure).meta
        yield StateCheckItem(
            url=failed_request(failure).url,
            fetched_at=utc_now(),
            pith_number=meta.get("pith_number"),
            bundle_sha256=meta["pith_bundle_sha256"],
            matches=False,
            detail=f"state.json unavailable: {describe(failure)}",
        )
