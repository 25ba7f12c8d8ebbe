"""What Scrapy's item path costs by itself, per bundle: the bare spider of bench_crawl.py
against the same spider yielding each body as an item through pipelines that pass it on
(``PLAIN_ITEM_PIPELINES``, three as the crawl has, the last a coroutine), alternated
rounds over the same nginx and corpus, medians.

    python bench/item_path.py [--records 6000] [--rounds 5] [--pipelines 3] [--workdir DIR]

The crawl carries every bundle's verdict as an item through its pipelines; this says
how much of the crawl's extra CPU that hop alone can explain.
"""

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_crawl  # noqa: E402  (bench/bench_crawl.py)


def spider(urls: Path, bodies: int, workdir: Path, pipelines: int) -> dict:
    """One run of the bare spider, its items through ``pipelines`` stages (0: no items)."""
    with bench_crawl.bare_spider(urls, bodies, workdir, extra={"PLAIN_ITEM_PIPELINES": pipelines}) as (cmd, env, cwd):
        elapsed, _, _, cpu = bench_crawl.run(cmd, env, cwd=cwd)
    return {"time": elapsed, "cpu": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=6000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pipelines", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the corpus here between runs")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pith-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    _, site, suffixes = bench_crawl.corpus_of(args.records, workdir)
    server, url, _ = bench_crawl.start_server("nginx", workdir, site)
    runs: dict[int, list[dict]] = {0: [], args.pipelines: []}
    try:
        urls = bench_crawl.bundle_urls(url, suffixes, workdir)
        for _ in range(args.rounds):  # alternated: the machine's drift falls on both alike
            for pipelines in runs:
                runs[pipelines].append(spider(urls, len(suffixes), workdir, pipelines))
    finally:
        server.terminate()
        server.wait()
    med = {p: {k: statistics.median(r[k] for r in rs) for k in ("time", "cpu")} for p, rs in runs.items()}
    bare, items = med[0], med[args.pipelines]
    per_item = (items["cpu"] - bare["cpu"]) / len(suffixes) * 1e6
    print(
        f"{len(suffixes)} bundles, medians of {args.rounds}: no items {bare['time']:.2f} s ({bare['cpu']:.2f} CPU s);"
        f" an item each through {args.pipelines} pipelines {items['time']:.2f} s ({items['cpu']:.2f} CPU s):"
        f" {per_item:,.0f} µs of CPU an item, {items['time'] / bare['time']:.3f}x the time"
    )


if __name__ == "__main__":
    main()
