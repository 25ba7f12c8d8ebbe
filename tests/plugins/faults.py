"""A fault-injecting HTTP proxy on loopback, in front of the S3 test server, and the
checks every fault test ends with: is the archive whole, and is anything lost?

The proxy is a real TCP server: boto3 talks to it as to any S3 endpoint, and it
forwards each request to moto over a fresh connection. Rules pick requests by method
and key path and, at a seeded rate or always, answer them with S3's own error
documents (500 InternalError, 503 SlowDown, 403 AccessDenied), reset the connection
before forwarding (the write never happened) or after (it happened, the answer was
lost), delay them, or hold them until the test lets go (``stall``: the moment to
SIGKILL a crawl in the middle of one particular write).

Typical use::

    def test_survives(fault_proxy, s3_bucket):
        proxy = fault_proxy(FaultRule("slow_down", rate=0.2), FaultRule("reset", rate=0.1))
        ...  # point the store or the crawl at proxy.url
        assert proxy.injected["slow_down"] > 0

- ``fault_proxy`` (function): a factory ``(*rules, seed=0) -> FaultProxy``, started,
  stopped after the test.
- ``audit_archive(store, archive_keyring, bundle_keyring)`` audits an archive after
  faults (``pith-archiver audit``'s checks) and reads its committed records;
  ``archiver_keyring(tmp_path)`` pins the key a test's crawls signed it with.
- ``figures``: ``figures.add(test, **counts)`` keeps what a test injected and survived;
  with ``PITH_FIGURES_FILE=path`` they are written there as JSON when the session ends
  (the numbers in docs/RELIABILITY.md).
"""

import json
import logging
import os
import random
import re
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.client import HTTPConnection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from pith.keyring import Keyring
from pith.signing import Signer
from storage.archive.manifest import committed_manifests
from storage.audit import Audit
from tests.plugins.tables import read_rows

logger = logging.getLogger(__name__)

S3_ERRORS = {  # kind: (status, S3 error code, message), as S3 itself words them
    "internal_error": (500, "InternalError", "We encountered an internal error. Please try again."),
    "slow_down": (503, "SlowDown", "Please reduce your request rate."),
    "access_denied": (403, "AccessDenied", "Access Denied"),
}
KINDS = (*S3_ERRORS, "reset", "reset_after", "slow", "stall")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "expect", "proxy-connection", "te", "upgrade"}
STALL_LIMIT = 120.0  # seconds a stalled request is held at most, should a test forget it


@dataclass(frozen=True)
class FaultRule:
    """Inject ``kind`` into this share of the requests matching ``methods`` and ``path``
    (a regex searched in the request path), at most ``limit`` times (0: no bound)."""

    kind: str
    rate: float = 1.0
    methods: tuple = ("GET", "HEAD", "PUT", "POST", "DELETE")
    path: str = ""
    query: str = ""  # a regex searched in the query string (a listing's prefix=...)
    delay: float = 0.3  # seconds, for "slow"
    limit: int = 0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; one of {', '.join(KINDS)}")
        if not 0 <= self.rate <= 1:
            raise ValueError("rate must be between 0 and 1")
        re.compile(self.path)
        re.compile(self.query)


@dataclass(frozen=True)
class ProxiedRequest:
    method: str
    path: str
    status: int  # 0 when no answer was relayed (reset, stall)
    fault: str | None


def s3_error(code: str, message: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
        f"<RequestId>pith-fault-proxy</RequestId><HostId>pith-fault-proxy</HostId></Error>"
    ).encode()


class FaultProxy:
    """``start()`` listens on 127.0.0.1 (``url``); ``set_rules`` swaps the rules;
    ``injected`` counts faults by kind; ``log`` lists every request; ``stalled`` is set
    when a request is held, and ``release()`` drops every held one unanswered."""

    def __init__(self, upstream: str, *rules: FaultRule, seed: int = 0):
        self.upstream = urlsplit(upstream)
        self.injected: Counter = Counter()
        self.log: list[ProxiedRequest] = []
        self.stalled = threading.Event()
        self.stalled_paths: list[str] = []
        self._released = threading.Event()
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._fired: Counter = Counter()
        self.set_rules(*rules)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-fault-proxy", daemon=True)

    def start(self) -> "FaultProxy":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()

    def set_rules(self, *rules: FaultRule) -> None:
        with self._lock:
            self._rules = [(rule, re.compile(rule.path), re.compile(rule.query)) for rule in rules]
            self._fired.clear()

    def release(self) -> None:
        self._released.set()

    def choose(self, method: str, path: str, query: str = "") -> FaultRule | None:
        """The first rule that matches and fires for this request (seeded draws)."""
        with self._lock:
            for index, (rule, pattern, asked) in enumerate(self._rules):
                if method not in rule.methods or not pattern.search(path) or not asked.search(query):
                    continue
                if rule.limit and self._fired[index] >= rule.limit:
                    continue
                if rule.rate >= 1 or self._rng.random() < rule.rate:
                    self._fired[index] += 1
                    self.injected[rule.kind] += 1
                    return rule
        return None

    def record(self, method: str, path: str, status: int, fault: str | None) -> None:
        with self._lock:
            self.log.append(ProxiedRequest(method, path, status, fault))

    def forward(self, method: str, target: str, headers: list, body: bytes):
        """Send the request to the upstream server; (status, reason, headers, body)."""
        connection = HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=60)
        try:
            connection.request(
                method, target, body=body or None, headers={k: v for k, v in headers if k.lower() not in HOP_BY_HOP}
            )
            response = connection.getresponse()
            return response.status, response.reason, response.getheaders(), response.read()
        finally:
            connection.close()

    def hold(self, path: str) -> None:
        with self._lock:
            self.stalled_paths.append(path)
        self.stalled.set()
        self._released.wait(STALL_LIMIT)

    def _handler_class(self):
        proxy = self

        class Handler(_ProxyHandler):
            pass

        Handler.proxy = proxy
        return Handler


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and 100-continue, as boto3 expects
    proxy: FaultProxy

    def log_message(self, *args):
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self._chunked_body()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _chunked_body(self) -> bytes:
        """The chunked body decoded (trailers dropped: the forwarded request has a length)."""
        data = bytearray()
        while True:
            size = int(self.rfile.readline().split(b";")[0], 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(data)
            data += self.rfile.read(size)
            self.rfile.readline()

    def _reset(self) -> None:
        """Close with RST, as a crashed server or a middlebox does."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.rfile.close()
        self.connection.close()

    def _relay(self, status: int, reason: str, headers, body: bytes) -> None:
        self.send_response_only(status, reason)
        for name, value in headers:
            if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        if self.command == "HEAD":
            length = next((v for k, v in headers if k.lower() == "content-length"), "0")
        else:
            length = str(len(body))
        self.send_header("Content-Length", length)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _handle(self) -> None:
        proxy = self.proxy
        method, (path, query) = self.command, urlsplit(self.path)[2:4]
        body = self._body()
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            del self.headers["Transfer-Encoding"]
            self.headers["Content-Length"] = str(len(body))
        rule = proxy.choose(method, path, query)
        kind = rule.kind if rule else None
        if kind in S3_ERRORS:
            status, code, message = S3_ERRORS[kind]
            proxy.record(method, path, status, kind)
            return self._relay(status, code, [("Content-Type", "application/xml")], s3_error(code, message))
        if kind in ("reset", "stall"):
            proxy.record(method, path, 0, kind)
            if kind == "stall":
                proxy.hold(path)
            return self._reset()
        if kind == "slow":
            time.sleep(rule.delay)
        answer = proxy.forward(method, self.path, self.headers.items(), body)
        proxy.record(method, path, 0 if kind == "reset_after" else answer[0], kind)
        if kind == "reset_after":
            return self._reset()
        self._relay(*answer)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle


@pytest.fixture
def fault_proxy(s3_endpoint, s3_env):
    """``start(*rules, seed=0) -> FaultProxy`` in front of the S3 test server."""
    proxies = []

    def start(*rules: FaultRule, seed: int = 0) -> FaultProxy:
        proxies.append(FaultProxy(s3_endpoint, *rules, seed=seed).start())
        return proxies[-1]

    yield start
    for proxy in proxies:
        proxy.stop()


# --- after the faults: is the archive whole? -----------------------------------------


@dataclass
class ArchiveCheck:
    """What ``pith-archiver audit`` found (storage.audit), and the committed records."""

    discrepancies: list  # storage.audit.Discrepancy
    manifests: list[dict]  # the committed (verified) manifests
    records: list[tuple]  # (pith_number, bundle_sha256, run_id) of every committed records row

    @property
    def clean(self) -> bool:
        return not self.discrepancies

    def codes(self) -> set[str]:
        return {found.code for found in self.discrepancies}

    def paths(self, code: str) -> list[str]:
        return sorted(found.path for found in self.discrepancies if found.code == code)

    def numbers(self, runs=None) -> list[str]:
        """The committed records' Pith Numbers; only those of ``runs`` if given."""
        return [number for number, _, run in self.records if runs is None or run in runs]


def archiver_keyring(tmp_path) -> Keyring:
    """Pins the key a crawl run by ``run_cli_crawl(tmp_path, ...)`` made on first use."""
    return Keyring([Signer.load(tmp_path / "config" / "pith-archiver" / "signing-key.json").pinned()])


def audit_archive(store, archive_keyring, bundle_keyring) -> ArchiveCheck:
    """Run the archive audit (every manifest verified, every listed object re-hashed,
    every raw bundle verified again, orphans listed) and read every committed
    ``records`` row."""
    discrepancies = list(Audit(store, bundle_keyring, archive_keyring).run())
    manifests = list(committed_manifests(store, archive_keyring))
    columns = ["pith_number", "bundle_sha256", "run_id"]
    records = [
        tuple(row[name] for name in columns)
        for manifest in manifests
        for row in read_rows(store, "records", columns=columns, manifest=manifest)
    ]
    return ArchiveCheck(discrepancies, manifests, records)


# --- figures ----------------------------------------------------------------------------


class Figures:
    def __init__(self):
        self.rows: dict[str, dict] = {}

    def add(self, test: str, **counts) -> None:
        self.rows.setdefault(test, {}).update(counts)


@pytest.fixture(scope="session")
def figures():
    """Counts of what each fault test injected and survived (see the module docstring)."""
    collected = Figures()
    yield collected
    target = os.environ.get("PITH_FIGURES_FILE")
    if target and collected.rows:
        with open(target, "w", encoding="utf-8") as handle:
            json.dump(collected.rows, handle, indent=1, sort_keys=True, default=str)
        logger.info("wrote fault figures to %s", target)
