"""What grows in a crawl's memory: tracemalloc snapshots of the crawl process taken when
it has verified FIRST and then LAST bundles, diffed by source line (largest growth first).

    python bench/mem_growth.py --records 30000 --first 10000 --last 30000

Crawls ``serve --virtual RECORDS`` from one seed, in this process, with the project's
settings and those of bench_crawl.py. tracemalloc slows the crawl about twofold and
counts Python allocations only (not pyarrow's or SQLite's own); RSS is printed beside.
"""

import argparse
import os
import sys
import tempfile
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_crawl import SETTINGS, start_server  # noqa: E402


def rss_mib() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=30000)
    parser.add_argument("--first", type=int, default=10000)
    parser.add_argument("--last", type=int, default=30000)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess

    from crawler.spiders.pith import PithSpider
    from pith_archiver.crawl.run import project_settings
    from pith_testkit.virtual import VirtualCatalog

    workdir = Path(tempfile.mkdtemp(prefix="pith-mem-"))
    os.environ["XDG_CONFIG_HOME"] = str(workdir / "config")
    server, url, keyring = start_server("serve", workdir, workdir / "keyring.json", args.records)
    tracemalloc.start(1)
    process = CrawlerProcess(
        project_settings(
            {
                **SETTINGS,
                "PITH_ARCHIVE": str(workdir / "archive"),
                "PITH_KEYRINGS": [str(keyring)],
                "PITH_CONDITIONAL_REQUESTS": False,
                "PITH_PROGRESS": "off",
            }
        )
    )
    crawler = process.create_crawler(PithSpider)
    marks, snapshots = [args.first, args.last], []

    def scraped(item, response, spider):
        if marks and crawler.stats.get_value("pith/verified", 0) >= marks[0]:
            snapshots.append((marks.pop(0), tracemalloc.take_snapshot(), rss_mib()))
            print(
                f"{snapshots[-1][0]} verified: RSS {snapshots[-1][2]:.0f} MiB, traced "
                f"{tracemalloc.get_traced_memory()[0] / 2**20:.0f} MiB",
                flush=True,
            )

    crawler.signals.connect(scraped, signals.item_scraped)
    try:
        process.crawl(crawler, seeds=[VirtualCatalog(11, 1).suffixes[0]], resolver=url)
        process.start()
    finally:
        server.terminate()
        server.wait()
    (first, before, _), (last, after, _) = snapshots
    print(f"growth from {first} to {last} bundles verified, by line:")
    for stat in after.compare_to(before, "lineno")[: args.top]:
        print(f"  {stat.size_diff / 2**20:+8.2f} MiB {stat.count_diff:+9d} blocks  {stat.traceback}")


if __name__ == "__main__":
    main()
