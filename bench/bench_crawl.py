"""Crawl throughput, requests and memory: the whole job (fetch, verify, archive) against a
plain Scrapy spider that fetches the same bundle URLs and discards them, in the same
run, from the same mirror process, alternated, medians of the rounds.

    python bench/bench_crawl.py --records 10000 --rounds 3 [--server static --server serve]
    python bench/bench_crawl.py --virtual 10000 --virtual 100000

Three mirrors, each in its own process (the machine has 2 cores: one serves, one crawls):
``nginx`` (bench/nginx.py, installed from the distribution's packages when missing) and
``static``, ``python -m http.server``, both over the corpus laid out as plain files
(bench/static_site.py: no gzip, a redirect per directory URL; nginx sends ETag and
Last-Modified, http.server Last-Modified only), and ``serve``, the project's mirror.
Both crawlers use the same Scrapy settings (AutoThrottle
off, same concurrency, robots.txt on); ours keeps its other defaults (conditional
requests on, each run a first crawl with no validators). Ours runs three times:
``bundles`` fetches exactly the plain spider's URLs (seeds file, ``--no-follow``), ``sitemap`` is a first crawl
from the mirror's sitemap, ``full`` the real job from one seed (links followed, record
pages where the bundle does not name its citing records).
``--virtual N`` crawls the test kit's ``serve --virtual N`` from one seed instead, for memory at scale.
``--verify-workers N`` (repeatable) runs ``bundles`` (and the virtual crawl) once per pool
size of the verifier (PITH_VERIFY_WORKERS; 0: in the crawl's thread); ``--runs`` picks
which of ours run. Peak RSS is the sum over the crawl process and its verifier workers,
sampled every 50 ms (``ru_maxrss`` would give the largest process only). That sum counts
the pages the processes share (the interpreter, libc, OpenSSL) once per process, so the
peak PSS, which splits each shared page between the processes that map it, is reported
beside it, sampled every 250 ms.
"""

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]  # the test kit (used from the checkout) and the benches

import nginx  # noqa: E402  (bench/nginx.py)

SETTINGS = {
    "AUTOTHROTTLE_ENABLED": False,
    "CONCURRENT_REQUESTS": 32,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 32,
    "LOG_LEVEL": "WARNING",
    "ROBOTSTXT_OBEY": True,
    "TELNETCONSOLE_ENABLED": False,
}
# the baseline gets the one middleware that only removes Scrapy's charset sniffing of
# JSON (see crawler.middlewares.JsonCharsetMiddleware), so it is not slowed by it
PLAIN_SETTINGS = {**SETTINGS, "DOWNLOADER_MIDDLEWARES": {"crawler.middlewares.JsonCharsetMiddleware": 595}}


def tree(pid: int) -> list[int]:
    """A process and all its descendants, now."""
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        found.append(current)
        try:
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as handle:
                    stack += [int(child) for child in handle.read().split()]
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return found


def resident_bytes(pid: int) -> int:
    """Resident bytes of one process."""
    with open(f"/proc/{pid}/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def proportional_bytes(pid: int) -> int:
    """Proportional set size of one process, in bytes."""
    with open(f"/proc/{pid}/smaps_rollup") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("Pss:")) * 1024


def tree_total(pid: int, measure) -> int:
    """``measure`` summed over a process and all its descendants, now."""
    total = 0
    for member in tree(pid):
        try:
            total += measure(member)
        except (FileNotFoundError, ProcessLookupError, StopIteration):  # it has just exited
            continue
    return total


def watched(cmd, sample, every: float, env=None, cwd: Path = ROOT):
    """Run ``cmd`` to its end, calling ``sample(pid)`` every ``every`` seconds meanwhile
    from a thread; its wall seconds and resource usage. A failing command ends the bench."""
    started = time.perf_counter()
    child = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    done = threading.Event()

    def loop():
        while not done.wait(every):
            sample(child.pid)

    sampler = threading.Thread(target=loop, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    done.set()
    sampler.join()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd[:4]} failed: {child.stderr.read().decode()[-2000:]}")
    return elapsed, usage


def run(cmd, env=None, trace: list | None = None, cwd: Path = ROOT) -> tuple[float, int, int, float]:
    """Wall seconds, peak RSS and peak PSS (MiB, summed over the process and its
    children) and CPU seconds (the process's and its children's) of one child process;
    ``trace`` gets (epoch seconds, peak RSS so far in bytes) once a second."""
    peak, peak_pss, last, samples = [0], [0], [0.0], [0]

    def sample(pid: int) -> None:
        peak[0] = max(peak[0], tree_total(pid, resident_bytes))
        samples[0] += 1
        if samples[0] % 5 == 0:  # reading smaps costs the kernel more than statm
            peak_pss[0] = max(peak_pss[0], tree_total(pid, proportional_bytes))
        if trace is not None and time.time() - last[0] >= 1.0:
            last[0] = time.time()
            trace.append((last[0], peak[0]))

    elapsed, usage = watched(cmd, sample, 0.05, env, cwd)
    rss = max(peak[0] // 2**20, usage.ru_maxrss // 1024)
    return elapsed, rss, peak_pss[0] // 2**20, usage.ru_utime + usage.ru_stime


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(kind: str, corpus: Path, site: Path, virtual: int = 0) -> tuple[subprocess.Popen, str, Path]:
    """A mirror process: its URL and the keyring that verifies what it serves (with
    ``virtual``, ``site`` is where the test kit's ``serve --virtual`` writes that keyring)."""
    if kind == "nginx":
        server, [url] = nginx.start([site], site.parent / f"nginx-{site.name}")
        return server, url, corpus / "keyring.json"
    if kind == "static":
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(site), str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)
        return server, f"http://127.0.0.1:{port}", corpus / "keyring.json"
    virtual_args = ["--virtual", str(virtual), "--seed", "11", "--keyring-out", str(site)]
    program = ["pith_testkit", "serve", *virtual_args] if virtual else ["pith_archiver", "serve", str(corpus)]
    server = subprocess.Popen(
        [sys.executable, "-m", *program],
        cwd=ROOT,  # where the test kit is found: it is not installed
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    url = server.stdout.readline().strip()
    if virtual:
        server.stdout.readline()  # the keyring line
    return server, url, site if virtual else corpus / "keyring.json"


def ours(
    url: str, keyring: Path, workdir: Path, label: str, extra: list[str], env: dict, trace=None, tree: Path = ROOT
) -> dict:
    """One crawl by the code of ``tree`` (this one, or an older checkout to compare with)."""
    out, stats, cache = workdir / f"archive-{label}", workdir / f"stats-{label}.json", workdir / f"cache-{label}"
    shutil.rmtree(out, ignore_errors=True)
    # a first crawl each round, as the defaults run it (conditional requests on): its
    # validators start empty, in a cache of its own, not the last round's
    shutil.rmtree(cache, ignore_errors=True)
    env = {**(env or os.environ), "XDG_CACHE_HOME": str(cache)}
    if tree != ROOT:  # its own packages first, whatever the environment installed
        env["PYTHONPATH"] = str(tree)
    sets = [arg for name, value in SETTINGS.items() for arg in ("-s", f"{name}={value}")]
    elapsed, rss, pss, cpu = run(
        [
            sys.executable,
            "-m",
            "pith_archiver",
            "crawl",
            "--resolver",
            url,
            "--progress",
            "off" if trace is None else "log",
            "--keyring",
            str(keyring),
            "--out",
            str(out),
            "--stats-json",
            str(stats),
            *sets,
            *extra,
        ],
        env,
        trace,
        tree,
    )
    values = json.loads(stats.read_text())
    return {
        "time": elapsed,
        "rss": rss,
        "pss": pss,
        "cpu": cpu,
        "requests": values["downloader/request_count"],
        "records": values.get("pith/archived", 0),
        "per_record": values.get("pith/requests_per_record", 0),
    }


def plain(url: str, suffixes: list[str], workdir: Path) -> dict:
    urls = workdir / "urls.txt"
    urls.write_text("".join(f"{url}/pith/{s}/bundle.json\n" for s in suffixes))
    elapsed, rss, pss, cpu = run(
        [sys.executable, str(ROOT / "bench" / "plain_spider.py"), str(urls), json.dumps(PLAIN_SETTINGS)]
    )
    return {
        "time": elapsed,
        "rss": rss,
        "pss": pss,
        "cpu": cpu,
        "requests": len(suffixes) + 1,
        "records": len(suffixes),
        "per_record": 0,
    }


def corpus_of(records: int, workdir: Path) -> tuple[Path, Path, list[str]]:
    corpus, site = workdir / f"corpus-{records}", workdir / f"site-{records}"
    if not corpus.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pith_testkit",
                "corpus",
                "generate",
                "--records",
                str(records),
                "--out",
                str(corpus),
                "--seed",
                "11",
            ],
            check=True,
            cwd=ROOT,
        )
    if not site.exists():
        subprocess.run(
            [sys.executable, str(ROOT / "bench" / "static_site.py"), str(corpus), str(site)], check=True, cwd=ROOT
        )
    return corpus, site, sorted(p.name.split(".")[0] for p in (corpus / "bundles").glob("*.bundle.json"))


def pool_args(workers) -> list[str]:
    return [] if workers is None else ["--verify-workers", str(workers)]


def compare(
    records: int, servers: list[str], rounds: int, workdir: Path, env: dict, pools: list, kinds: list[str]
) -> None:
    corpus, site, suffixes = corpus_of(records, workdir)
    seeds = workdir / "seeds.txt"
    seeds.write_text("".join(f"{s}\n" for s in suffixes))
    crawls = {"sitemap": ["sitemap"], "full": [suffixes[0]]}
    for kind in servers:
        server, url, keyring = start_server(kind, corpus, site)
        runs = {"plain": []}
        try:
            for _ in range(rounds):  # alternated: load from other jobs falls on every run alike
                runs["plain"].append(plain(url, suffixes, workdir))
                for workers in pools if "bundles" in kinds else []:
                    label = "bundles" if workers is None else f"bundles-w{workers}"
                    runs.setdefault(label, []).append(
                        ours(
                            url,
                            keyring,
                            workdir,
                            label,
                            ["--no-follow", "--seeds-file", str(seeds), *pool_args(workers)],
                            env,
                        )
                    )
                for label in [kind for kind in kinds if kind in crawls]:
                    runs.setdefault(label, []).append(ours(url, keyring, workdir, label, crawls[label], env))
        finally:
            server.terminate()
            server.wait()
        report(kind, len(suffixes), runs)


def report(kind: str, n: int, runs: dict) -> None:
    med = {label: {key: statistics.median(r[key] for r in rs) for key in rs[0]} for label, rs in runs.items()}
    base = n / med["plain"]["time"]
    for label, m in med.items():
        rate = m["records"] / m["time"]
        times = " / ".join(f"{r['time']:.1f}" for r in runs[label])
        print(
            f"{kind:>7} {n:>7} {label:>10} {times:>20} {rate:>8.0f} {rate / base:>6.2f} {m['requests']:>8.0f}"
            f" {m['requests'] / max(m['records'], 1):>7.3f} {m['rss']:>6.0f} {m['rss'] / med['plain']['rss']:>5.2f}"
            f" {m['pss']:>6.0f} {m['pss'] / med['plain']['pss']:>5.2f}"
            f" {m['cpu']:>6.1f}",
            flush=True,
        )


def peaks_at(log: Path, trace: list, records: int):
    """Peak RSS up to the moment each of 10k, 100k, 300k and 1M records (those within
    ``records``) had been archived, from the crawl's progress lines."""
    archived = []
    for line in log.read_text().splitlines():
        match = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d).* archived (\d+)", line)
        if match:
            stamp = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S").timestamp()  # local time, as logged
            archived.append((stamp + 1, int(match[2])))  # the line's second, to its end
    for milestone in (1_000, 10_000, 100_000, 300_000, 1_000_000):
        when = next((stamp for stamp, count in archived if count >= milestone), None)
        if milestone <= records and when is not None:
            yield milestone, max((peak for stamp, peak in trace if stamp <= when), default=0)


def scale(records: int, workdir: Path, env: dict, workers=None) -> None:
    """One crawl from one seed of ``serve --virtual N``: nothing of the corpus on disk."""
    from pith_testkit.virtual import VirtualCatalog

    server, url, keyring = start_server("serve", workdir, workdir / f"virtual-{records}.keyring.json", records)
    log, trace = workdir / f"virtual-{records}.log", []
    log.unlink(missing_ok=True)
    try:
        seed = VirtualCatalog(11, 1).suffixes[0]
        progress = ["--log-file", str(log), "-s", "PITH_PROGRESS_INTERVAL=5", "-s", "LOG_LEVEL=INFO"]
        m = ours(url, keyring, workdir, f"virtual-{records}", [seed, *pool_args(workers), *progress], env, trace)
    finally:
        server.terminate()
        server.wait()
    for milestone, peak in peaks_at(log, trace, records):
        print(f"virtual {records:>7}: peak RSS {peak / 2**20:.0f} MiB by {milestone} records archived", flush=True)
    print(
        f"virtual {records:>7} workers {workers}:"
        f" {m['records']:>8} archived in {m['time']:.0f} s ({m['cpu']:.0f} s CPU):"
        f" {m['records'] / m['time']:.0f} rec/s,"
        f" {m['per_record']:.3f} requests per record, peak RSS {m['rss']} MiB",
        flush=True,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, action="append", default=[], help="corpus sizes to compare on")
    parser.add_argument("--server", action="append", choices=["nginx", "static", "serve"], help="default: all three")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--virtual", type=int, action="append", default=[], help="serve --virtual N crawl sizes")
    parser.add_argument("--workdir", type=Path, default=None, help="keep corpora here between runs")
    parser.add_argument(
        "--verify-workers",
        type=int,
        action="append",
        default=[],
        help="verifier pool sizes to compare (default: the crawl's default)",
    )
    parser.add_argument("--runs", default="bundles,sitemap,full", help="which of ours run: bundles,sitemap,full")
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a Scrapy or PITH_* setting for our crawls"
    )
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pith-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "XDG_CONFIG_HOME": str(workdir / "config")}
    SETTINGS.update(pair.split("=", 1) for pair in args.set)
    if args.records:
        print(
            f"{'server':>7} {'records':>7} {'run':>10} {'times (s)':>20} {'rec/s':>8} {'ratio':>6} {'requests':>8}"
            f" {'req/rec':>7} {'MiB':>6} {'xRSS':>5} {'PSS':>6} {'xPSS':>5} {'CPU s':>6}"
        )
    pools = args.verify_workers or [None]
    for records in args.records:
        servers = args.server or ["nginx", "static", "serve"]
        compare(records, servers, args.rounds, workdir, env, pools, args.runs.split(","))
    for records in args.virtual:
        for workers in pools:
            scale(records, workdir, env, workers)


if __name__ == "__main__":
    main()
