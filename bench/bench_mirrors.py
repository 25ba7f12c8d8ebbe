"""Whole-registry time when politeness, not CPU, bounds the crawl: one source against
the resolver plus two mirrors (``--mirror``), every source held to the same per-host
politeness, in the same run, alternated, medians of the rounds.

    python bench/bench_mirrors.py --records 3000 --delay 0.02 --rounds 3

Three nginx servers (pith_testkit/nginx.py) serve one static copy of the corpus
(bench/static_site.py) on three ports. Politeness is the crawler's own, per host (a
Scrapy download slot per source): ``DOWNLOAD_DELAY`` seconds between requests to one
host (randomised 0.5-1.5x, as Scrapy does) and one request in flight per host, the way a
registry asks to be crawled. Each run is a first crawl of the bundles (seeds file,
``--no-follow``) into an empty archive. The projection to the whole registry divides
1.5 million records by the measured records per second.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import system_packages  # noqa: E402
from bench_crawl import corpus_of, ours  # noqa: E402

from pith_testkit import nginx  # noqa: E402

REGISTRY = 1_500_000


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--delay", type=float, default=0.02, help="DOWNLOAD_DELAY per host, seconds")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pith-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "XDG_CONFIG_HOME": str(workdir / "config")}
    corpus, site, suffixes = corpus_of(args.records, workdir)
    seeds = workdir / "seeds.txt"
    seeds.write_text("".join(f"{s}\n" for s in suffixes))
    polite = ["-s", f"DOWNLOAD_DELAY={args.delay}", "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=1"]
    bundles = ["--no-follow", "--seeds-file", str(seeds), *polite]
    server, urls = nginx.start([site] * 3, workdir / "nginx-mirrors", system_packages.ensure("nginx", "nginx-light"))
    runs: dict[str, list] = {"one source": [], "three sources": []}
    try:
        for _ in range(args.rounds):
            runs["one source"].append(ours(urls[0], corpus / "keyring.json", workdir, "one", bundles, env))
            spread = [*bundles, "--mirror", urls[1], "--mirror", urls[2]]
            runs["three sources"].append(ours(urls[0], corpus / "keyring.json", workdir, "three", spread, env))
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(workdir / "nginx-mirrors", ignore_errors=True)
    print(f"records {len(suffixes)}, DOWNLOAD_DELAY {args.delay} s and 1 request in flight per host")
    print(f"{'run':>14} {'times (s)':>22} {'rec/s':>7} {'speed-up':>8} {'req/rec':>7} {'whole registry':>15}")
    base = None
    for label, results in runs.items():
        seconds = statistics.median(r["time"] for r in results)
        records = statistics.median(r["records"] for r in results)
        rate = records / seconds
        base = base or rate
        times = " / ".join(f"{r['time']:.1f}" for r in results)
        per_record = statistics.median(r["requests"] for r in results) / max(records, 1)
        days = REGISTRY / rate / 86400
        print(f"{label:>14} {times:>22} {rate:>7.1f} {rate / base:>7.2f}x {per_record:>7.3f} {days:>11.1f} days")


if __name__ == "__main__":
    main()
