"""Crawl throughput, requests and memory: the whole job (fetch, verify, archive, WARC)
against a bare Scrapy spider that fetches the same bundle URLs and discards them, in the
same run, from the same mirror process, alternated, medians of the rounds; ``wget
--warc-file`` fetching the same URLs beside them.

    python bench/bench_crawl.py --records 6000 --rounds 3          # nginx: bundles, full, wget
    python bench/bench_crawl.py --records 10000 --server static --server serve --runs bundles,sitemap,full
    python bench/bench_crawl.py --virtual 10000 --virtual 100000

The corpus is the test kit's: N records minted and signed with a key derived from the
seed (checked not to be the built-in registry key, and given to the crawl with
``--keyring`` as a user would), plus the three real registry bundles. By default
(``--links pages``, issue 40's corpus) the minted bundles name no other record, as the
registry's do: only the record pages link cited and citing records, so the full crawl
reads a page and a bundle per record (two requests). ``--links bundles`` mints bundles
that name the records they cite and those citing them, as the test kit does by default:
about one request per record. Corpora are kept in ``--workdir`` by size and kind
(``corpus-N-links-pages``).
Three mirrors, each in its own process: ``nginx`` (the default; pith_testkit/nginx.py,
installed from the distribution's packages when missing) and ``static``, ``python -m
http.server``, both over the corpus laid out as plain files (bench/static_site.py: no
gzip, a redirect per directory URL; nginx sends ETag and Last-Modified, http.server
Last-Modified only), and ``serve``, the project's mirror.
A fair baseline (issue 48): the bare spider (bench/plain_spider.py) pays no cost of
transport the crawl avoids. It runs from a temporary folder outside the checkout, so
that Scrapy finds no project (it reports whether it saw one; the bench checks), with
``shared_settings()``: every Scrapy setting crawler/settings.py gives, read from it (so a
setting the crawl gains reaches the baseline too), but for those naming the crawl's own
components (``OWN``). Shared, as this tree has them: robots.txt obeyed
(``ROBOTSTXT_OBEY``, each host's asked once, by Scrapy's middleware in the baseline
and ours in the crawl), no cookies and no Referer (``COOKIES_ENABLED``,
``REFERER_ENABLED`` off; the cookie middleware, the telnet console and the remote
control not even loaded: ``DOWNLOADER_MIDDLEWARES_BASE``, ``EXTENSIONS_BASE``,
``TELNETCONSOLE_ENABLED``, ``REMOTE_CONTROL_ENABLED``), the user agent, the download
timeout, size limits, redirects and retries (``DOWNLOAD_TIMEOUT``,
``DOWNLOAD_MAXSIZE``, ``DOWNLOAD_WARNSIZE``, ``REDIRECT_MAX_TIMES``, ``RETRY_*``),
``CONCURRENT_ITEMS``, the AutoThrottle parameters; everything else Scrapy's defaults
for both (the asyncio reactor, the HTTP/1.1 handler, DNS cache and timeout, HTTP
compression, the memory-usage extension). Over both, the bench's ``SETTINGS``:
AutoThrottle off, 32 requests in flight (32 a host), LOG_LEVEL WARNING. The crawl's
process knobs, which change no request, the baseline gets too: the garbage
collector's threshold (``crawler.extensions.collector``, ``PITH_GC_THRESHOLD``), the
malloc arenas capped and the root logger at LOG_LEVEL (``pith_archiver.crawl.tuning``), and
from ``serve``, the one mirror that compresses, the JSON charset middleware
(crawler/downloading/json_charset.py, which spares Scrapy a charset detection on a
decompressed body). Not shared: what is the crawl's own work
(its scheduler and seen-set, downloader with the per-host cap enforced, middlewares,
pipelines, extensions). Ours keeps every other default (WARC on, the default verifier
workers, conditional requests on), and each of its crawls is a first crawl into an
empty archive with empty validators, in a new folder: nothing is deleted until the
bench exits (``fresh_folder``).
``--runs`` picks what runs beside it: ``samework`` is issue 64's anchor, the program a user
would write for the crawl's work without this project (bench/same_work_spider.py: one
Scrapy process, the bare spider's settings, its callback checking every hash and
signature with json + hashlib + pynacl, keeping the raw bytes content-addressed and
writing WARC/1.1 request and response records with warcio, gzip; at the end one Parquet
table, a signed attestation per bundle and a signed manifest), into a new folder each
round, the bundle path's and full crawl's rates read against it; ``bundles`` fetches exactly the bare spider's URLs
(seeds file, ``--no-follow``), ``sitemap`` is a first crawl from the mirror's sitemap,
``full`` the real job from one seed (links followed, record pages where the bundle does
not name its citing records), ``wget`` is ``wget --warc-file`` over the bare spider's
URLs (one connection, kept alive; installed with apt when missing). Every crawl must
archive every record, the bare spider and wget must receive every bundle, or the
bench stops.
``--virtual N`` crawls the test kit's ``serve --virtual N`` from one seed instead, for memory at scale.
``--verify-workers N`` (repeatable) runs ``bundles`` (and the virtual crawl) once per pool
size of the verifier (PITH_VERIFY_WORKERS; 0: in the crawl's thread).
Peak RSS is the sum over the process and all its descendants (for the crawl: its
verifier and WARC writer children), read from /proc every 50 ms (``ru_maxrss`` would
give the largest process only). That sum counts the pages the processes share (the
interpreter, libc, OpenSSL) once per process, so the peak PSS, which splits each shared
page between the processes that map it, is reported beside it, sampled every 250 ms.
``CPU s`` is each run's CPU, its children's included; ``server`` the CPU the mirror's
processes spent during it, on the same cores.
After the table, per mirror: the bundle path's and the full crawl's speed and the larger
of their peak RSS against the bare spider's; the bundle path's ceiling (its CPU and the
server's, spread over every core: the fastest that work could run, however well the
crawl overlapped it); wget's time and peak; then the machine.
"""

import argparse
import atexit
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]  # the test kit (used from the checkout) and the benches

import system_packages  # noqa: E402
from bench_verify import compiled, machine  # noqa: E402
from scrapy.settings import default_settings  # noqa: E402
from warcio.archiveiterator import ArchiveIterator  # noqa: E402

from crawler import settings as crawl_settings  # noqa: E402
from pith.keyring import REGISTRY_KEY  # noqa: E402
from pith_testkit import nginx  # noqa: E402

SETTINGS = {  # over both crawlers' settings
    "AUTOTHROTTLE_ENABLED": False,
    "CONCURRENT_REQUESTS": 32,
    "CONCURRENT_REQUESTS_PER_DOMAIN": 32,
    "LOG_LEVEL": "WARNING",
}
OURS = dict(SETTINGS)  # our crawls': SETTINGS and --set
OWN = {  # the Scrapy settings of crawler/settings.py the baseline does not take: the crawl's own parts
    "BOT_NAME",  # the project's (the bench checks the baseline ran under none)
    "SPIDER_MODULES",
    "NEWSPIDER_MODULE",
    "ADDONS",
    "DOWNLOADER",
    "SCHEDULER",
    "DOWNLOADER_MIDDLEWARES",
    "ITEM_PIPELINES",
    "EXTENSIONS",
}
RUNS = ("samework", "bundles", "sitemap", "full", "wget")  # what --runs may name, beside the bare spider
LINKS = {  # the corpus kinds --links may name: where records name one another
    "pages": "record pages only (the bundles name no other record, as the registry's)",
    "bundles": "bundles (each names the records it cites and those citing it)",
}


def shared_settings(compressing: bool = False) -> dict:
    """The bare spider's settings: the crawl's Scrapy settings but ``OWN``, the
    garbage collector's threshold with the extension that sets it, then ``SETTINGS``;
    from a server ``compressing``, the JSON charset middleware (bench/plain_spider.py)."""
    shared = {
        name: value
        for name, value in vars(crawl_settings).items()
        if name.isupper() and hasattr(default_settings, name) and name not in OWN
    }
    collector = {"crawler.extensions.collector.CollectorThreshold": 0}
    knobs = {
        "EXTENSIONS": collector,
        "PITH_GC_THRESHOLD": crawl_settings.PITH_GC_THRESHOLD,
        "PLAIN_JSON_CHARSET": compressing,
    }
    return {**shared, **knobs, **SETTINGS}


def differences(plain: dict) -> list[str]:
    """The bare spider's settings that are not Scrapy's defaults (or not Scrapy's), by name."""
    return sorted(name for name, value in plain.items() if getattr(default_settings, name, differences) != value)


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


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds one living process has spent so far."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_total(pid: int, measure) -> float:
    """``measure`` summed over a process and all its descendants, now."""
    total = 0.0
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
        if samples[0] % 5 == 1:  # reading smaps costs the kernel more than statm (the first sample too)
            peak_pss[0] = max(peak_pss[0], tree_total(pid, proportional_bytes))
        if trace is not None and time.time() - last[0] >= 1.0:
            last[0] = time.time()
            trace.append((last[0], peak[0]))

    elapsed, usage = watched(cmd, sample, 0.05, env, cwd)
    # the samples alone: ``ru_maxrss`` also counts the bench's own pages the child held
    # between its fork and its exec, more than a small program such as wget ever uses
    return elapsed, peak[0] // 2**20, peak_pss[0] // 2**20, usage.ru_utime + usage.ru_stime


def start_server(kind: str, corpus: Path, site: Path, virtual: int = 0) -> tuple[subprocess.Popen, str, Path]:
    """A mirror process: its URL and the keyring that verifies what it serves (with
    ``virtual``, ``site`` is where the test kit's ``serve --virtual`` writes that keyring)."""
    if kind == "nginx":
        server, [url] = nginx.start(
            [site], site.parent / f"nginx-{site.name}", system_packages.ensure("nginx", "nginx-light")
        )
        return server, url, corpus / "keyring.json"
    if kind == "static":
        port = nginx.free_port()
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


def fresh_folder(workdir: Path, label: str) -> Path:
    """A new, empty folder for one crawl's archive and cache, under ``runs-PID`` in
    ``workdir``, which goes when the bench exits. Nothing is deleted between rounds: on
    ext4 without a journal (this machine's disk), creating inodes within 5 to 35 seconds
    of deleting others makes the allocator read back each recently freed one
    (``recently_deleted``). A crawl started just after the last round's archive was
    removed spent 3.4 CPU seconds more in the kernel (6,003 records, 13 s against 11):
    a cost of the bench's cleanup, which the bare spider, writing nothing, never pays."""
    runs = workdir / f"runs-{os.getpid()}"
    if not runs.exists():
        runs.mkdir(parents=True)
        atexit.register(shutil.rmtree, runs, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{label}-", dir=runs))


def last_archive(workdir: Path, label: str) -> Path:
    """The archive of ``label``'s latest crawl in this bench (``fresh_folder``)."""
    return max((workdir / f"runs-{os.getpid()}").glob(f"{label}-*"), key=lambda p: p.stat().st_mtime) / "archive"


def ours(
    url: str, keyring: Path, workdir: Path, label: str, extra: list[str], env: dict, trace=None, tree: Path = ROOT
) -> dict:
    """One crawl by the code of ``tree`` (this one, or an older checkout to compare with)."""
    # a first crawl each round, as the defaults run it (conditional requests on): into
    # an empty archive, its validators empty, in a cache of its own, not the last round's
    run_dir = fresh_folder(workdir, label)
    out, stats, cache = run_dir / "archive", workdir / f"stats-{label}.json", run_dir / "cache"
    env = {**(env or os.environ), "XDG_CACHE_HOME": str(cache)}
    if tree != ROOT:  # its own packages first, whatever the environment installed
        env["PYTHONPATH"] = str(tree)
    sets = [arg for name, value in OURS.items() for arg in ("-s", f"{name}={value}")]
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


def bundle_urls(url: str, suffixes: list[str], workdir: Path) -> Path:
    """The file of the bundle URLs on the mirror at ``url``: what the bare spider and wget fetch."""
    urls = workdir / "urls.txt"
    urls.write_text("".join(f"{url}/pith/{s}/bundle.json\n" for s in suffixes))
    return urls


@contextmanager
def bare_spider(
    urls: Path,
    bodies: int,
    workdir: Path,
    compressing: bool = False,
    extra: dict | None = None,
    script: str = "plain_spider.py",
    args: tuple = (),
):
    """The bare spider's command, environment and working folder, for one run: a new
    temporary folder outside the checkout and no Scrapy project variables, so that
    Scrapy finds no project (no scrapy.cfg, no crawler.settings) and runs with
    ``shared_settings(compressing)`` alone (and ``extra``, the spider's own switches);
    ``script`` and its further ``args``: another spider run the same way (the same-work one).
    Afterwards the bench stops unless its report says so and that it received all
    ``bodies``; the report."""
    report = workdir / "plain-report.json"
    report.unlink(missing_ok=True)
    project_variables = ("SCRAPY_SETTINGS_MODULE", "SCRAPY_PROJECT")
    env = {name: value for name, value in os.environ.items() if name not in project_variables}
    # the crawl's process knobs and the JSON charset middleware; the benches' baselines
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{ROOT / 'bench'}"
    cmd = [
        sys.executable,
        str(ROOT / "bench" / script),
        str(urls),
        json.dumps({**shared_settings(compressing), **(extra or {})}),
        str(report),
        *map(str, args),
    ]
    outside = Path(tempfile.mkdtemp(prefix="pith-bare-spider-"))
    try:
        yield cmd, env, outside
    finally:
        shutil.rmtree(outside, ignore_errors=True)
    seen = json.loads(report.read_text())
    if seen["inside_project"] or seen["bot_name"] != default_settings.BOT_NAME:
        raise SystemExit(f"the bare spider ran under a Scrapy project's settings: {seen}")
    if seen["bodies"] != bodies:
        raise SystemExit(f"the bare spider received {seen['bodies']} bundles of {bodies}")


def plain(urls: Path, bodies: int, workdir: Path, compressing: bool) -> dict:
    """One run of the bare spider over ``urls``, on a server ``compressing`` or not."""
    with bare_spider(urls, bodies, workdir, compressing) as (cmd, env, cwd):
        elapsed, rss, pss, cpu = run(cmd, env, cwd=cwd)
    return {"time": elapsed, "rss": rss, "pss": pss, "cpu": cpu, "requests": bodies + 1, "records": bodies}


def same_work(urls: Path, bodies: int, workdir: Path, keyring: Path) -> dict:
    """One run of the same-work spider (bench/same_work_spider.py) over ``urls``: every
    bundle checked, stored, recorded in WARC, then the table, attestations and manifest,
    into a new folder; the bench stops unless it verified and stored every bundle."""
    out = fresh_folder(workdir, "samework") / "out"
    with bare_spider(urls, bodies, workdir, script="same_work_spider.py", args=(out, keyring)) as (cmd, env, cwd):
        elapsed, rss, pss, cpu = run(cmd, env, cwd=cwd)
    seen = json.loads((workdir / "plain-report.json").read_text())
    if seen["stored"] != bodies or not (out / "manifest.json").exists():
        raise SystemExit(f"the same-work spider stored {seen['stored']} bundles of {bodies}: {seen}")
    return {"time": elapsed, "rss": rss, "pss": pss, "cpu": cpu, "requests": bodies + 1, "records": bodies}


def wget(urls: Path, bodies: int, workdir: Path) -> dict:
    """One run of ``wget --warc-file`` over ``urls``: the bodies discarded, a gzipped WARC
    of every exchange written, as a user's other tool would record them."""
    binary = system_packages.ensure("wget", "wget")
    out = workdir / "wget"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cmd = [binary, "--quiet", "--input-file", str(urls), "--output-document", os.devnull, "--warc-file", "bundles"]
    elapsed, rss, pss, cpu = run(cmd, cwd=out)
    with open(out / "bundles.warc.gz", "rb") as warc:
        responses = sum(record.rec_type == "response" for record in ArchiveIterator(warc))
    if responses != bodies:
        raise SystemExit(f"wget recorded {responses} responses of {bodies}")
    return {"time": elapsed, "rss": rss, "pss": pss, "cpu": cpu, "requests": bodies, "records": bodies}


def minted_key(corpus: Path) -> str:
    """The id of the key the corpus's minted records are signed with, checked not to be the
    built-in registry key: the crawl trusts it from ``--keyring`` only, as a user's."""
    keys = json.loads((corpus / "keyring.json").read_text())["keys"]
    minted = [key for key in keys if key["public_key_b64"] != REGISTRY_KEY["public_key_b64"]]
    if len(minted) != 1:
        raise SystemExit(f"{corpus}: expected one key besides the built-in registry key, found {len(minted)}")
    return minted[0]["key_id"]


def archived_all(result: dict, records: int, label: str) -> dict:
    """``result``, once checked to have archived every record of the corpus."""
    if result["records"] != records:
        raise SystemExit(f"{label}: {result['records']} records archived of {records}")
    return result


def corpus_of(records: int, workdir: Path, links: str = "pages") -> tuple[Path, Path, list[str]]:
    corpus, site = workdir / f"corpus-{records}-links-{links}", workdir / f"site-{records}-links-{links}"
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
                "--links",
                links,
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
    records: int, links: str, servers: list[str], rounds: int, workdir: Path, env: dict, pools: list, kinds: list[str]
) -> None:
    corpus, site, suffixes = corpus_of(records, workdir, links)
    print(
        f"corpus: {records} records signed with {minted_key(corpus)} (not the built-in registry key)"
        f" and the {len(suffixes) - records} real ones, --keyring {corpus / 'keyring.json'};"
        f" links in the {LINKS[links]}",
        flush=True,
    )
    print(
        f"{'server':>7} {'records':>7} {'run':>10} {'times (s)':>20} {'rec/s':>8} {'ratio':>6} {'requests':>8}"
        f" {'req/rec':>7} {'MiB':>6} {'xRSS':>5} {'PSS':>6} {'xPSS':>5} {'CPU s':>6} {'server':>6}",
        flush=True,
    )
    seeds = workdir / "seeds.txt"
    seeds.write_text("".join(f"{s}\n" for s in suffixes))
    n = len(suffixes)
    crawls = {"sitemap": ["sitemap"], "full": [suffixes[0]]}
    for kind in servers:
        server, url, keyring = start_server(kind, corpus, site)
        urls = bundle_urls(url, suffixes, workdir)
        runs = {"plain": []}

        def served(measured):  # a run's result with the CPU the server spent meanwhile
            before = tree_total(server.pid, cpu_seconds)
            result = measured()
            return {**result, "server_cpu": tree_total(server.pid, cpu_seconds) - before}

        try:
            for _ in range(rounds):  # alternated: load from other jobs falls on every run alike
                runs["plain"].append(served(lambda: plain(urls, n, workdir, compressing=kind == "serve")))
                if "samework" in kinds:
                    runs.setdefault("samework", []).append(served(lambda: same_work(urls, n, workdir, keyring)))
                for workers in pools if "bundles" in kinds else []:
                    label = "bundles" if workers is None else f"bundles-w{workers}"
                    extra = ["--no-follow", "--seeds-file", str(seeds), *pool_args(workers)]
                    crawl = served(lambda: ours(url, keyring, workdir, label, extra, env))
                    runs.setdefault(label, []).append(archived_all(crawl, n, label))
                for label in [kind for kind in kinds if kind in crawls]:
                    crawl = served(lambda: ours(url, keyring, workdir, label, crawls[label], env))
                    runs.setdefault(label, []).append(archived_all(crawl, n, label))
                if "wget" in kinds:
                    runs.setdefault("wget", []).append(served(lambda: wget(urls, n, workdir)))
        finally:
            server.terminate()
            server.wait()
        report(kind, n, runs)


def report(kind: str, n: int, runs: dict) -> None:
    """One row per run (medians of its rounds), then the ratios the targets are read on."""
    med = {label: {key: statistics.median(r[key] for r in rs) for key in rs[0]} for label, rs in runs.items()}
    bare = med["plain"]
    speed = {label: m["records"] / m["time"] / (n / bare["time"]) for label, m in med.items()}
    per_record = {label: m["requests"] / max(m["records"], 1) for label, m in med.items()}
    for label, m in med.items():
        times = " / ".join(f"{r['time']:.1f}" for r in runs[label])
        print(
            f"{kind:>7} {n:>7} {label:>10} {times:>20} {m['records'] / m['time']:>8.0f} {speed[label]:>6.2f}"
            f" {m['requests']:>8.0f} {per_record[label]:>7.3f} {m['rss']:>6.0f}"
            f" {m['rss'] / bare['rss']:>5.2f} {m['pss']:>6.0f} {m['pss'] / bare['pss']:>5.2f} {m['cpu']:>6.1f}"
            f" {m['server_cpu']:>6.1f}",
            flush=True,
        )
    names = {"bundles": "bundle path", "full": "full crawl from one seed"}
    crawls = [label for label in names if label in med]
    summary = [f"{names[label]} {speed[label]:.2f}x ({per_record[label]:.2f} requests a record)" for label in crawls]
    if crawls:
        peak = max(med[label]["rss"] for label in crawls)
        summary.append(f"peak RSS summed over the tree {peak / bare['rss']:.2f}x ({peak:.0f} vs {bare['rss']:.0f} MiB)")
    if "bundles" in med:  # no run can be faster than its CPU, its server's included, spread over every core
        cores = len(os.sched_getaffinity(0))
        floor = (med["bundles"]["cpu"] + med["bundles"]["server_cpu"]) / cores
        summary.append(
            f"bundle path's CPU on {cores} cores at best {floor:.1f} s, so at most {bare['time'] / floor:.2f}x"
        )
    if "samework" in med:  # issue 64's anchor: the same work written plainly, in one process
        same = med["samework"]
        against = [f"{names[label]} {same['time'] / med[label]['time']:.2f}x" for label in crawls]
        peak = max((med[label]["rss"] for label in crawls), default=0)
        ceiling = ""
        if "bundles" in med:  # each alone on idle cores: the one process its CPU, the crawl its CPU spread
            cores = len(os.sched_getaffinity(0))
            floor = (med["bundles"]["cpu"] + med["bundles"]["server_cpu"]) / cores
            ceiling = f" (the CPU of both allows at most {same['cpu'] / floor:.2f}x)"
        summary.append(
            f"against the same-work spider ({same['time']:.1f} s, {same['cpu']:.1f} CPU s, {same['rss']:.0f} MiB):"
            f" {', '.join(against)} its rate{ceiling}; peak RSS {peak / same['rss']:.2f}x its"
        )
    if "wget" in med:
        summary.append(f"wget --warc-file {med['wget']['time']:.1f} s in {med['wget']['rss']:.0f} MiB")
    if summary:
        print(f"{kind:>7}: against the bare spider ({bare['time']:.1f} s): {'; '.join(summary)}", flush=True)


def peaks_at(log: Path, trace: list, records: int):
    """Peak RSS up to the moment each of 1k, 10k, 20k, 50k, 100k, 300k and 1M records
    (those within ``records``) had been archived, from the crawl's progress lines (20k:
    after the first interim commit, which brings pyarrow into the crawl's process)."""
    archived = []
    for line in log.read_text().splitlines():
        match = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d).* archived (\d+)", line)
        if match:
            stamp = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S").timestamp()  # local time, as logged
            archived.append((stamp + 1, int(match[2])))  # the line's second, to its end
    for milestone in (1_000, 10_000, 20_000, 50_000, 100_000, 300_000, 1_000_000):
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
    parser.add_argument("--server", action="append", choices=["nginx", "static", "serve"], help="default: nginx")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--links",
        choices=list(LINKS),
        default="pages",
        help="where the corpus's records name one another: pages only, as the registry's (default), or bundles",
    )
    parser.add_argument("--virtual", type=int, action="append", default=[], help="serve --virtual N crawl sizes")
    parser.add_argument("--workdir", type=Path, default=None, help="keep corpora here between runs")
    parser.add_argument(
        "--verify-workers",
        type=int,
        action="append",
        default=[],
        help="verifier pool sizes to compare (default: the crawl's default)",
    )
    parser.add_argument(
        "--runs", default="bundles,full,wget", help=f"what runs beside the bare spider: {','.join(RUNS)}"
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a Scrapy or PITH_* setting for our crawls"
    )
    args = parser.parse_args()
    unknown = set(args.runs.split(",")) - set(RUNS)
    if unknown:
        parser.error(f"--runs: unknown {', '.join(sorted(unknown))}; choose among {','.join(RUNS)}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pith-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "XDG_CONFIG_HOME": str(workdir / "config")}
    OURS.update(pair.split("=", 1) for pair in args.set)
    host, started = machine(), datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    changed = [f"--verify-workers {w}" for w in args.verify_workers] + [f"-s {pair}" for pair in args.set]
    common = " ".join(f"{name}={value}" for name, value in SETTINGS.items())
    print(f"ours: {', '.join(changed) or 'the defaults'}; both crawlers: {common}; {compiled(ROOT)}", flush=True)
    print(f"the bare spider, from crawler/settings.py: {' '.join(differences(shared_settings()))}", flush=True)
    pools = args.verify_workers or [None]
    for records in args.records:
        compare(records, args.links, args.server or ["nginx"], args.rounds, workdir, env, pools, args.runs.split(","))
    for records in args.virtual:
        for workers in pools:
            scale(records, workdir, env, workers)
    print(f"machine: nproc {len(os.sched_getaffinity(0))}; {host}; started {started}", flush=True)


if __name__ == "__main__":
    main()
