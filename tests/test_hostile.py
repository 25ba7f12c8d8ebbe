"""Hostile input from a resolver and from the command line, each bounded and named:
path tricks in record IDs (in seeds and in the links a resolver serves), a huge
Content-Length, gzip bombs, deeply nested JSON, a redirect to another host and a
mirror list naming another host. The resolver is a small stdlib HTTP server
written here, on a real loopback socket, that logs every request it gets.
"""

import gzip
import json
import re
import threading
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from pith_archiver import FIXTURES
from tests.plugins.cli import run_cli
from tests.plugins.crawling import run_cli_crawl
from tests.plugins.tables import read_rows

REAL = "RLLQL6357CWNZYHNBMCYD3UK5B"
BOMB_IN_BOMB, BOMB, HUGE, DEEP, AWAY, FAILING, ELSEWHERE, NEXT_DOOR = (letter * 26 for letter in "ABCDEFGH")
BOMB_FILE = Path(__file__).parent / "fuzz_corpus" / "http" / "gzip-in-gzip-32GiB-of-zeros.gz"
REQUEST_SHAPE = re.compile(
    r"^/(robots\.txt|pith-mirrors\.json|pith-signing-key\.json|pith/[A-Z2-7]{26}(/bundle\.json|/state\.json)?)$"
)
TRICKS = [  # links a hostile record page carries: none may become a request
    "/pith/../../../etc/passwd",
    "/pith/..%2F..%2Fkeyring.json/bundle.json",
    "/pith/%2e%2e/%2e%2e/etc/passwd",
    f"/pith/{REAL[:-1]}%2F",
    f"/pith/{REAL[:-1]}1",
    f"/pith/{REAL.lower()}",
    "pith:2019:../../../etc/passwd",
    f"/pith/{REAL[:-2]}\\..",
    "/pith/ＲＬＬＱＬ６３５７ＣＷＮＺＹＨＮＢＭＣＹＤ３ＵＫ５Ｂ",
    f"https://evil.invalid/pith/{ELSEWHERE}",
]


class Site:
    """A stdlib HTTP server answering ``routes`` (path -> (status, headers, body));
    anything else is 404. ``requests`` lists every request target, as sent."""

    def __init__(self, routes: dict):
        self.routes = routes
        self.requests: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Handler, self))
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Handler(BaseHTTPRequestHandler):
    def __init__(self, site, *args):
        self.site = site
        super().__init__(*args)

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.site.requests.append(self.path)
        status, headers, body = self.site.routes.get(self.path, (404, [], b"not here"))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        if not any(name == "Content-Length" for name, _ in headers):
            self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:  # the client gave up on a body it would not take: the point
            pass


@pytest.fixture
def sites():
    started = []

    def start(routes: dict) -> Site:
        started.append(Site(routes))
        return started[-1]

    yield start
    for site in started:
        site.close()


def bundle(suffix: str) -> str:
    return f"/pith/{suffix}/bundle.json"


def json_headers(*extra) -> list:
    return [("Content-Type", "application/json"), *extra]


def hostile_routes(elsewhere: Site) -> dict:
    raw = (FIXTURES / f"{REAL}.bundle.json").read_bytes()
    state = json.dumps(json.loads(raw)["state"], separators=(",", ":"), ensure_ascii=False).encode()
    page = "".join(f'<a href="{link}">{link}</a> ' for link in TRICKS)
    one_gib = gzip.compress(b"\0" * (1 << 24), compresslevel=9) * 64  # 64 gzip members of 16 MiB of zeros
    mirror_list = {"manifest_type": "pith_mirror_manifest", "mirrors": [{"base_url": elsewhere.url("localhost")}]}
    return {
        bundle(REAL): (200, json_headers(), raw),
        f"/pith/{REAL}/state.json": (200, json_headers(), state),
        f"/pith/{REAL}": (200, [("Content-Type", "text/html; charset=utf-8")], page.encode()),
        "/pith-mirrors.json": (200, json_headers(), json.dumps(mirror_list).encode()),
        bundle(BOMB_IN_BOMB): (200, json_headers(("Content-Encoding", "gzip, gzip")), BOMB_FILE.read_bytes()),
        bundle(BOMB): (200, json_headers(("Content-Encoding", "gzip")), one_gib),
        bundle(HUGE): (200, json_headers(("Content-Length", str(10**15))), b"{" * 4096),
        bundle(DEEP): (200, json_headers(), b"[" * 100_000 + b"]" * 100_000),
        bundle(AWAY): (302, [("Location", elsewhere.url("localhost") + bundle(AWAY))], b""),
        # the resolver's own host, another port: another service, not the crawl
        bundle(NEXT_DOOR): (302, [("Location", elsewhere.url() + bundle(NEXT_DOOR))], b""),
        bundle(FAILING): (500, [], b"down"),
    }


@pytest.mark.slow
def test_a_hostile_resolver_is_bounded_and_named(tmp_path, sites, figures):
    elsewhere = sites({bundle(s): (200, json_headers(), b"{}") for s in (AWAY, FAILING, NEXT_DOOR)})
    site = sites(hostile_routes(elsewhere))
    seeds = [REAL, BOMB_IN_BOMB, BOMB, HUGE, DEEP, AWAY, FAILING, NEXT_DOOR]
    result = run_cli_crawl(
        tmp_path,
        "--resolver",
        site.url(),
        "--out",
        str(tmp_path / "archive"),
        "-s",
        "RETRY_TIMES=1",
        "-s",
        "PITH_RETRY_BACKOFF_BASE=0.01",
        "--max-failures",
        "100",
        *seeds,
    )
    assert result.returncode == 1, result.stderr[-3000:]  # too_deep rejected; the failures are within the budget

    assert elsewhere.requests == []  # no redirect, mirror list or link took the crawl to another host
    assert [path for path in site.requests if not REQUEST_SHAPE.match(path)] == []  # no path trick became a request
    assert site.requests.count(bundle(HUGE)) == 1  # refused on its header, not retried
    assert bundle(ELSEWHERE) in site.requests  # a record named on another host is fetched here, if at all

    rows = read_rows(tmp_path / "archive", "verifications")
    outcome = {urlsplit(row["url"]).path.split("/")[2]: (row["status"], row["reason"]) for row in rows}
    assert outcome == {
        REAL: ("verified", None),
        DEEP: ("rejected", "too_deep"),
        BOMB_IN_BOMB: ("failed", "too_large"),
        BOMB: ("failed", "too_large"),
        HUGE: ("failed", "too_large"),
        AWAY: ("failed", "fetch_failed"),
        FAILING: ("failed", "fetch_failed"),
        ELSEWHERE: ("failed", "fetch_failed"),
        NEXT_DOOR: ("failed", "fetch_failed"),
    }
    assert (result.stat("verified"), result.stat("rejected/too_deep")) == (1, 1)
    assert (result.stat("bundle_failures/too_large"), result.stat("bundle_failures/fetch_failed")) == (3, 4)
    figures.add(
        "hostile:resolver",
        inputs=len(seeds) + len(TRICKS) + 1,
        bomb_bytes=BOMB_FILE.stat().st_size,
        bomb_inflates_to=32 << 30,
        requests=len(site.requests),
        requests_elsewhere=0,
    )


@pytest.mark.parametrize(
    "seed",
    [
        "../../etc/passwd",
        "pith:2019:../../../etc/passwd",
        f"{REAL[:-1]}%2F",
        f"{REAL[:-1]}1",
        REAL.lower(),
        "10.1234/../../../robots.txt",
        "https://doi.org/10.1234/./x",
        f"http://x/pith/..%2F{REAL}",
        "pith:RLLQL63/",
    ],
)
def test_path_tricks_in_seeds_are_usage_errors_before_any_request(seed, sites):
    site = sites({})
    outcome = run_cli("crawl", "--resolver", site.url(), "--out", "unused", seed)
    assert outcome.returncode == 2
    assert outcome.output.startswith("Error: seed: ") and outcome.output.count("\n") == 1
    assert site.requests == []
