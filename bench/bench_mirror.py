"""Bundle responses per second of the mirror on one core, against a named baseline.

The server under test runs in its own process pinned to CPU 0; the load generator
runs in another process pinned to CPU 1 and keeps N keep-alive connections busy,
each asking for a random bundle of the corpus, one request in flight per connection.
The baseline is the stdlib ``http.server.ThreadingHTTPServer`` (HTTP/1.1 keep-alive,
Nagle off) serving the same bundle files as static files, on the same core.

``--prototypes`` also measures the same ResolverSite and response encoding behind aiohttp's
low-level server and behind twisted.web (the question: can a well-kept HTTP server carry
``serve`` at 2,000 bundle responses/s on one core?). Servers are measured in turn,
``--rounds`` times, and the medians printed.

    python bench/bench_mirror.py --records 10000 --seconds 5 --connections 16
    python bench/bench_mirror.py --records 10000 --seconds 5 --connections 16 --prototypes --rounds 3
"""

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, unquote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the test kit: used from the checkout

from pith_testkit.corpus import generate_corpus  # noqa: E402
from storage.serving.http import Request, encode_response  # noqa: E402
from storage.serving.resolver import ResolverSite  # noqa: E402
from storage.serving.source import BUNDLES_DIR, CorpusDirectory  # noqa: E402

HERE = Path(__file__).resolve().parent
SERVER_CPU, CLIENT_CPU = 0, 1

BASELINE = """
import functools, sys
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
class Handler(SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"      # keep-alive, as the mirror
    disable_nagle_algorithm = True     # else Nagle + delayed ACKs cap it at ~25 responses/s per connection
    def log_message(self, *args): pass
class Server(ThreadingHTTPServer):
    def handle_error(self, *args): pass  # the load generator hangs up at the end of a run
server = Server(("127.0.0.1", 0), functools.partial(Handler, directory=sys.argv[1]))
print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
"""


# --- prototypes: the mirror's ResolverSite and response encoding behind well-kept servers ----
def to_request(method, target, version, headers):
    path, _, query = target.partition("?")
    params = {k: v[0] for k, v in parse_qs(query).items()} if query else {}
    return Request(method, target, unquote(path), params, version, headers)


def split_head(head: bytes):
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0][9:12])
    return status, [tuple(line.split(": ", 1)) for line in lines[1:] if line]


def run_aiohttp(corpus):
    import asyncio

    from aiohttp import web

    source = CorpusDirectory(corpus)

    async def main():
        resolver = None

        async def handler(req):
            headers = {k.lower(): v for k, v in req.headers.items()}
            request = to_request(req.method, req.path_qs, f"HTTP/{req.version.major}.{req.version.minor}", headers)
            response = resolver.respond(request)
            head, body = encode_response(request, response, request.keep_alive)
            status, pairs = split_head(head)
            out = web.Response(status=status, body=body)
            for k, v in pairs:
                if k not in ("Content-Length", "Connection"):
                    out.headers[k] = v
            return out

        server = web.Server(handler, access_log=None)
        srv = await asyncio.get_running_loop().create_server(server, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        resolver = ResolverSite(source, f"http://127.0.0.1:{port}")
        print(f"http://127.0.0.1:{port}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def run_twisted(corpus):
    from twisted.internet import reactor
    from twisted.web import resource, server

    source = CorpusDirectory(corpus)
    holder = {}

    class Root(resource.Resource):
        isLeaf = True

        def render(self, req):
            headers = {
                k.decode("latin-1").lower(): b", ".join(v).decode("latin-1")
                for k, v in req.requestHeaders.getAllRawHeaders()
            }
            request = to_request(req.method.decode(), req.uri.decode("latin-1"), req.clientproto.decode(), headers)
            response = holder["r"].respond(request)
            head, body = encode_response(request, response, request.keep_alive)
            status, pairs = split_head(head)
            req.setResponseCode(status)
            for k, v in pairs:
                if k not in ("Content-Length", "Connection"):
                    req.responseHeaders.setRawHeaders(k, [v])
            req.setHeader(b"content-length", str(len(body)).encode())
            return body

    site = server.Site(Root())
    site.log = lambda *a: None
    port = reactor.listenTCP(0, site, interface="127.0.0.1").getHost().port
    holder["r"] = ResolverSite(source, f"http://127.0.0.1:{port}")
    print(f"http://127.0.0.1:{port}", flush=True)
    reactor.run()


PROTOTYPES = {"aiohttp": run_aiohttp, "twisted.web": run_twisted}


class Connection(asyncio.Protocol):
    """One keep-alive connection: send a GET, read the whole response, send the next."""

    def __init__(self, host: str, paths: list[bytes], tally: dict):
        self.host, self.paths, self.tally = host.encode(), paths, tally
        self.buffer = bytearray()
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport
        self._send()

    def _send(self):
        path = random.choice(self.paths)
        self.transport.write(b"GET %s HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n\r\n" % (path, self.host))

    def data_received(self, data):
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.buffer[: end + 2]).lower()  # with the last header's CRLF
        at = head.find(b"content-length:")
        length = int(head[at + 15 : head.find(b"\r\n", at)]) if at >= 0 else 0
        if len(self.buffer) < end + 4 + length:
            return
        self.tally["ok" if head.startswith(b"http/1.1 200") or head.startswith(b"http/1.0 200") else "bad"] += 1
        self.tally["bytes"] += length
        del self.buffer[: end + 4 + length]
        self._send()

    def connection_lost(self, exc):
        self.tally["lost"] += 1


async def load(url: str, paths: list[bytes], connections: int, warmup: float, seconds: float) -> dict:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    tally = {"ok": 0, "bad": 0, "bytes": 0, "lost": 0}
    loop = asyncio.get_running_loop()
    for _ in range(connections):
        await loop.create_connection(lambda: Connection(f"{host}:{port}", paths, tally), host, int(port))
    await asyncio.sleep(warmup)
    start = dict(tally)
    began = time.perf_counter()
    await asyncio.sleep(seconds)
    elapsed = time.perf_counter() - began
    return {key: tally[key] - start[key] for key in tally} | {"seconds": elapsed, "total": tally["ok"]}


def client_main(url: str, corpus: str, prefix: str, connections: int, warmup: float, seconds: float) -> None:
    """Runs in the load-generating process: prints one line,
    ``ok bad bytes lost seconds total`` (total: 200s including the warm-up)."""
    os.sched_setaffinity(0, {CLIENT_CPU})
    suffixes = CorpusDirectory(corpus).catalog.suffixes
    paths = [prefix.format(suffix=s).encode() for s in suffixes]
    result = asyncio.run(load(url, paths, connections, warmup, seconds))
    print(result["ok"], result["bad"], result["bytes"], result["lost"], result["seconds"], result["total"])


def start_server(command: list[str], pythonpath: str | None = None) -> tuple[subprocess.Popen, str]:
    env = os.environ | {"PYTHONPATH": pythonpath} if pythonpath else None
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, text=True, env=env, preexec_fn=lambda: os.sched_setaffinity(0, {SERVER_CPU})
    )
    return process, process.stdout.readline().strip()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(name: str, command: list[str], corpus: Path, prefix: str, args, pythonpath=None) -> tuple[float, float]:
    """Wall-clock bundle responses/s with one core for the server, and responses per
    second of server CPU time (the capacity of that core, whatever else the machine ran)."""
    server, url = start_server(command, pythonpath)
    try:
        cpu_before = cpu_seconds(server.pid)
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--client",
                url,
                "--corpus",
                str(corpus),
                "--prefix",
                prefix,
                "--connections",
                str(args.connections),
                "--seconds",
                str(args.seconds),
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        cpu = cpu_seconds(server.pid) - cpu_before
    finally:
        server.terminate()
        server.wait(timeout=30)
    ok, bad, size, lost, seconds, total = int(out[0]), int(out[1]), int(out[2]), int(out[3]), float(out[4]), int(out[5])
    rate, per_cpu = ok / seconds, total / cpu
    print(
        f"{name:<32} {rate:>8,.0f} bundle responses/s  {per_cpu:>8,.0f} per server CPU-second  "
        f"({ok} in {seconds:.1f} s, {size / seconds / 1e6:.0f} MB/s, {bad} non-200, {lost} connections lost)",
        flush=True,
    )
    return rate, per_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--corpus", type=Path, help="corpus directory (generated under bench/out/ if not given)")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--prototypes", action="store_true", help="also measure the aiohttp and twisted.web prototypes")
    parser.add_argument("--rounds", type=int, default=1, help="measure every server this many times, alternated")
    parser.add_argument(
        "--serve-from",
        type=Path,
        metavar="DIR",
        help="also measure the serve of another checkout (e.g. the commit before a change)",
    )
    parser.add_argument("--serve-prototype", choices=PROTOTYPES, help=argparse.SUPPRESS)
    parser.add_argument("--client", metavar="URL", help=argparse.SUPPRESS)
    parser.add_argument("--prefix", default="/pith/{suffix}/bundle.json", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_prototype:
        return PROTOTYPES[args.serve_prototype](str(args.corpus))
    if args.client:
        return client_main(args.client, str(args.corpus), args.prefix, args.connections, args.warmup, args.seconds)
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("needs two CPUs: one for the server, one for the load generator")
    corpus = args.corpus or HERE / "out" / f"corpus-{args.records}-seed{args.seed}"
    if not (corpus / BUNDLES_DIR).is_dir():
        began = time.perf_counter()
        generate_corpus(corpus, args.records, args.seed)
        print(f"generated {args.records} records in {time.perf_counter() - began:.1f} s into {corpus}")
    print(
        f"{os.cpu_count()} CPUs, {args.connections} keep-alive connections, {args.seconds} s per run, "
        f"random bundles of {args.records} records"
    )
    serve = [sys.executable, "-c", "from pith_archiver.cli import main; main()", "serve", str(corpus)]
    record = "/pith/{suffix}/bundle.json"
    servers = [("pith-archiver serve (1 core)", serve, record, None)]
    if args.serve_from:
        servers.append((f"serve from {args.serve_from.name}", serve, record, str(args.serve_from)))
    if args.prototypes:
        servers += [
            (
                f"prototype: {name}",
                [sys.executable, __file__, "--serve-prototype", name, "--corpus", str(corpus)],
                record,
                None,
            )
            for name in PROTOTYPES
        ]
    if not args.no_baseline:
        servers.append(
            (
                "baseline: ThreadingHTTPServer",
                [sys.executable, "-c", BASELINE, str(corpus / BUNDLES_DIR)],
                "/{suffix}.bundle.json",
                None,
            )
        )
    rates = {name: [] for name, *_ in servers}
    for _ in range(args.rounds):
        for name, command, prefix, pythonpath in servers:
            rates[name].append(measure(name, command, corpus, prefix, args, pythonpath))
    if args.rounds > 1:
        for name, values in rates.items():
            wall, per_cpu = (statistics.median(v) for v in zip(*values))
            print(
                f"median of {args.rounds}: {name:<32} {wall:>8,.0f} bundle responses/s  {per_cpu:>8,.0f} per CPU-second"
            )


if __name__ == "__main__":
    main()
