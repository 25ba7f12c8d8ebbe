"""Crawl throughput and memory: the whole job (fetch, verify, archive) against a plain
Scrapy spider that fetches the same bundle URLs and discards them, in the same run,
from the same mirror process.

    python bench/bench_crawl.py --records 10000 [--records 1000 ...] [--s3]

The mirror runs in its own process (the machine has 2 cores: one serves, one crawls).
Both crawlers use the same Scrapy settings (AutoThrottle off, same concurrency) so the
difference is our per-bundle work. Ours runs twice: ``bundles`` fetches exactly the
plain spider's URLs (seeds file, no link following, no state.json), ``full`` is the
real job from one seed (record pages, bundles and state documents, links followed).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = {"AUTOTHROTTLE_ENABLED": False, "CONCURRENT_REQUESTS": 32, "CONCURRENT_REQUESTS_PER_DOMAIN": 32,
            "LOG_LEVEL": "WARNING", "ROBOTSTXT_OBEY": True, "TELNETCONSOLE_ENABLED": False}


def run(cmd, env=None) -> tuple[float, int]:
    """Wall seconds and peak RSS (MiB) of one child process."""
    started = time.perf_counter()
    child = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd[:4]} failed: {child.stderr.read().decode()[-2000:]}")
    return elapsed, usage.ru_maxrss // 1024


def start_mirror(corpus: Path):
    server = subprocess.Popen([sys.executable, "-m", "pith_archiver", "serve", str(corpus)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return server, server.stdout.readline().strip()


def bench(records: int, workdir: Path, s3_endpoint: str | None) -> dict:
    corpus = workdir / f"corpus-{records}"
    if not corpus.exists():
        subprocess.run([sys.executable, "-m", "pith_archiver", "corpus", "generate", "--records", str(records),
                        "--out", str(corpus), "--seed", "11"], check=True, cwd=ROOT)
    suffixes = sorted(p.name.split(".")[0] for p in (corpus / "bundles").glob("*.bundle.json"))
    server, url = start_mirror(corpus)
    try:
        urls = workdir / "urls.txt"
        urls.write_text("".join(f"{url}/pith/{s}/bundle.json\n" for s in suffixes))
        seeds = workdir / "seeds.txt"
        seeds.write_text("".join(f"{s}\n" for s in suffixes))
        env = {**os.environ, "XDG_CONFIG_HOME": str(workdir / "config")}
        sets = [arg for name, value in SETTINGS.items() for arg in ("-s", f"{name}={value}")]
        common = [sys.executable, "-m", "pith_archiver", "crawl", "--resolver", url, "--progress", "off",
                  "--keyring", str(corpus / "keyring.json"), *sets, "-s", "PITH_CONDITIONAL_REQUESTS=false"]
        results = {"records": len(suffixes)}
        for label, extra in (("bundles", ["--no-follow", "--seeds-file", str(seeds)]),
                             ("full", [suffixes[0]])):
            out = workdir / f"archive-{label}-{records}"
            shutil.rmtree(out, ignore_errors=True)
            target = f"s3://bench/{label}-{records}" if s3_endpoint else str(out)
            s3 = ["--s3-endpoint-url", s3_endpoint] if s3_endpoint else []
            results[f"ours_{label}"] = run([*common, "--out", target, *s3, *extra], env)
        # the baseline gets the one middleware that only removes Scrapy's charset sniffing
        # of JSON (see crawler.middlewares.JsonCharsetMiddleware), so it is not slowed by it
        plain_settings = {**SETTINGS, "DOWNLOADER_MIDDLEWARES": {"crawler.middlewares.JsonCharsetMiddleware": 595}}
        results["plain"] = run([sys.executable, str(ROOT / "bench" / "plain_spider.py"), str(urls),
                                json.dumps(plain_settings)])
        return results
    finally:
        server.terminate()
        server.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, action="append", help="corpus sizes (default 1000 and 10000)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep corpora here between runs")
    parser.add_argument("--s3-endpoint-url", default=None, help="archive into s3://bench/ on this endpoint")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pith-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"{'records':>8} {'plain b/s':>10} {'ours b/s':>9} {'ratio':>6} {'full rec/s':>10}"
          f" {'plain MiB':>9} {'ours MiB':>9} {'full MiB':>9}")
    for records in args.records or [1000, 10000]:
        r = bench(records, workdir, args.s3_endpoint_url)
        n = r["records"]
        plain, ours, full = n / r["plain"][0], n / r["ours_bundles"][0], n / r["ours_full"][0]
        print(f"{n:>8} {plain:>10.0f} {ours:>9.0f} {ours / plain:>6.2f} {full:>10.0f}"
              f" {r['plain'][1]:>9} {r['ours_bundles'][1]:>9} {r['ours_full'][1]:>9}", flush=True)


if __name__ == "__main__":
    main()
