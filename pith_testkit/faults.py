"""Fault injection, so crawler tests can prove they survive what real servers do:
latency, rate limiting, server errors, dropped connections, truncated or oversize
bodies, wrong content types, redirect loops and a tampered bundle; and what a hostile
source does: every record answered with one other record's valid bundle (swap),
every alias resolved to one other record (misresolve), every bundle forged, bundles
(or robots.txt) trickled a byte at a time.

A FaultPlan says what to inject; a FaultInjector applies one plan to a stream of
requests, drawing its random rates from the plan's seed, so a crawl with the same
requests in the same order injects the same faults. The answers it shapes are
FaultyResponses, which name their fault for the request log; ``pith_testkit.server``
is the mirror server that consults an injector.
"""

import asyncio
import random
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields

from storage.serving.http import SERVER, Request, Response, http_date, text_response

MiB = 1024 * 1024
JSON_TYPES = ("application/json", "application/ld+json")
CHUNK = 64 * 1024


@dataclass(frozen=True)
class FaultPlan:
    """What to inject. Request faults (latency, errors, 429s, drops, truncation,
    fail_first, wrong_content_type) apply to the requests whose path matches ``paths``
    (a regex searched in the decoded path; None = every path); the faults naming
    records (tamper, redirect_loop, oversize) apply to that record's documents."""

    latency_ms: float = 0
    error_rate: float = 0.0  # answer this share of requests with error_status
    error_status: int = 503
    rate_limit_every: int = 0  # every Nth request (past fail_first) gets 429 with Retry-After
    retry_after: int = 1  # seconds, on 429 and on fail_first's 503
    drop_rate: float = 0.0  # close this share of connections without answering
    truncate_rate: float = 0.0  # send half the body of this share, then close
    fail_first: int = 0  # the first N requests of each distinct path get 503
    wrong_content_type: bool = False  # JSON documents as text/html, everything else as octet-stream
    tamper: frozenset = frozenset()  # suffixes whose bundle has one canonical_sha256 digit changed
    redirect_loop: frozenset = frozenset()  # suffixes whose documents redirect back and forth forever
    oversize: frozenset = frozenset()  # suffixes whose bundle is an endless-looking huge body
    oversize_bytes: int = 64 * MiB
    swap_with: str | None = None  # every other record's documents are this record's (valid, signed)
    swap_documents: tuple = ("bundle", "state")  # which documents swap_with swaps
    misresolve: str | None = None  # every alias (short number, arXiv id, DOI) redirects to this record
    forge: bool = False  # every bundle tampered as ``tamper`` does: it no longer verifies
    trickle: float = 0.0  # seconds between the bytes of every answer of trickle_documents (head and body)
    trickle_documents: tuple = ("bundle",)  # which documents trickle trickles ("robots": robots.txt)
    paths: str | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("tamper", "redirect_loop", "oversize"):
            value = getattr(self, name)
            object.__setattr__(self, name, frozenset([value] if isinstance(value, str) else value))
        for name in ("error_rate", "drop_rate", "truncate_rate"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be between 0 and 1")
        if not 400 <= self.error_status <= 599:
            raise ValueError("error_status must be a 4xx or 5xx status")
        if (
            min(
                self.latency_ms,
                self.rate_limit_every,
                self.retry_after,
                self.fail_first,
                self.oversize_bytes,
                self.trickle,
            )
            < 0
        ):
            raise ValueError("counts, sizes and delays cannot be negative")
        if self.paths is not None:
            try:
                re.compile(self.paths)
            except re.error as exc:
                raise ValueError(f"paths is not a regular expression: {exc}") from None

    @property
    def active(self) -> bool:
        return self != FaultPlan(seed=self.seed, paths=self.paths)


@dataclass(eq=False)
class FaultyResponse(Response):
    """A Response an injected fault shaped."""

    fault: str | None = None  # "fail_first", "rate_limit", "error", "drop", "truncate", "tamper", ...
    stream: object = None  # async callable(writer) that writes a body of unknown length (oversize)


def faulted(response: Response, fault: str | None, **changes) -> FaultyResponse:
    """``response`` with ``changes``, marked as shaped by ``fault``."""
    return FaultyResponse(**{f.name: getattr(response, f.name) for f in fields(Response)} | changes, fault=fault)


@dataclass
class Decision:
    """What happens to one request before and after routing."""

    delay: float = 0.0  # seconds to wait before answering
    response: FaultyResponse | None = None  # answer this instead of routing
    drop: bool = False
    truncate: bool = False


NO_FAULT = Decision()


@dataclass
class FaultInjector:
    plan: FaultPlan = field(default_factory=FaultPlan)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.plan.seed)  # noqa: S311 - a seeded, reproducible fault plan, not secrets
        self._paths = re.compile(self.plan.paths) if self.plan.paths else None
        self._per_path: Counter[str] = Counter()
        self._counted = 0
        self._active = self.plan.active

    def _applies(self, request: Request) -> bool:
        return self._paths is None or self._paths.search(request.path) is not None

    def decide(self, request: Request) -> Decision:
        plan = self.plan
        if not self._active or not self._applies(request):
            return NO_FAULT
        decision = Decision(delay=plan.latency_ms / 1000)
        self._per_path[request.path] += 1
        retry = (("Retry-After", str(plan.retry_after)),)
        if self._per_path[request.path] <= plan.fail_first:
            decision.response = faulted(text_response(503, headers=retry), "fail_first")
            return decision
        self._counted += 1  # every Nth of the requests past fail_first: however they interleave, some are
        if plan.rate_limit_every and self._counted % plan.rate_limit_every == 0:
            decision.response = faulted(text_response(429, headers=retry), "rate_limit")
        elif plan.error_rate and self._rng.random() < plan.error_rate:
            decision.response = faulted(text_response(plan.error_status), "error")
        elif plan.drop_rate and self._rng.random() < plan.drop_rate:
            decision.drop = True
        elif plan.truncate_rate and self._rng.random() < plan.truncate_rate:
            decision.truncate = True
        return decision

    def swapped(self, response: Response) -> str | None:
        """The path of the record that answers for ``response``'s instead (plan.swap_with), or None."""
        swap = self.plan.swap_with
        if not swap or response.status != 200 or response.document not in self.plan.swap_documents:
            return None
        return None if response.record in (None, swap) else f"/pith/{swap}/{response.document}.json"

    def trickles(self, response: Response) -> bool:
        return bool(self.plan.trickle) and response.document in self.plan.trickle_documents

    def transform(self, request: Request, response: Response) -> Response:
        """Apply the faults that change a routed answer."""
        plan = self.plan
        if plan.misresolve and 300 <= response.status < 400 and request.path.startswith("/pith/"):
            location = (("Location", f"/pith/{plan.misresolve}"),)
            return faulted(text_response(302, f"see /pith/{plan.misresolve}", location), "misresolve")
        if not self._active or response.status != 200:
            return response
        if response.record in plan.redirect_loop:
            return faulted(_loop_redirect(request), "redirect_loop", record=response.record)
        if response.document == "bundle" and response.record in plan.oversize:
            return FaultyResponse(
                200,
                content_type=response.content_type,
                record=response.record,
                document="bundle",
                stream=oversize_body(plan.oversize_bytes),
                fault="oversize",
            )
        if response.document == "bundle" and (plan.forge or response.record in plan.tamper):
            response = faulted(response, "tamper", body=tamper_canonical_hash(response.body), _etag=None, _gzipped=None)
        if plan.wrong_content_type and self._applies(request):
            wrong = "text/html; charset=utf-8" if response.content_type in JSON_TYPES else "application/octet-stream"
            response = faulted(response, getattr(response, "fault", None) or "wrong_content_type", content_type=wrong)
        return response


def _loop_redirect(request: Request) -> Response:
    """A two-step cycle: the path redirects to itself with ``?loop=1``, which redirects back."""
    path = request.raw_path
    location = path if "loop" in request.query else path + "?loop=1"
    return text_response(302, f"see {location}", (("Location", location),))


def tamper_canonical_hash(raw: bytes) -> bytes:
    """The bundle with the first hex digit of its top-level ``canonical_sha256`` changed:
    still valid JSON, but it no longer hashes the canonical record
    (verification fails with canonical_hash_mismatch)."""
    key = b'"canonical_sha256":"'
    at = raw.find(key)  # the record itself never holds this key, so the first hit is the bundle's
    if at < 0:
        raise ValueError("no canonical_sha256 to tamper with")
    digit = at + len(key)
    swapped = b"0" if raw[digit : digit + 1] != b"0" else b"1"
    return raw[:digit] + swapped + raw[digit + 1 :]


def endless_head(content_type: str | None) -> bytes:
    """The head of a body of unknown length: no Content-Length, it ends when the connection does."""
    lines = ["HTTP/1.1 200 OK", f"Server: {SERVER}", f"Date: {http_date(int(time.time()))}"]
    lines += [f"Content-Type: {content_type}"] if content_type else []
    return ("\r\n".join([*lines, "Connection: close"]) + "\r\n\r\n").encode("latin-1")


def oversize_body(size: int) -> Callable[[asyncio.StreamWriter], Awaitable[None]]:
    """An async writer of ``size`` bytes that start like a bundle, sent in chunks with
    flow control, so the server never holds the body in memory."""
    opening = b'{"bundle_type":"pith_open_graph_bundle","padding":"'

    async def write(writer: asyncio.StreamWriter) -> None:
        writer.write(opening[:size])
        remaining = size - min(size, len(opening))
        chunk = b"0" * CHUNK
        while remaining > 0:
            writer.write(chunk[:remaining])
            remaining -= min(remaining, CHUNK)
            await writer.drain()

    return write
