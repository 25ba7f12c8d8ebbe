"""What recording the crawl in WARC files costs: the same crawl with WARCs (the
default) and with ``--no-warc``, alternated, medians of the rounds; then the WARC
bytes and records per bundle of the last round with WARCs.

    python bench/bench_warc.py --records 5000 --rounds 3

The mirror is ``serve --virtual N`` in a process of its own (nothing of the corpus on
disk), crawled from one seed as ``bench/bench_crawl.py`` crawls it (same settings,
AutoThrottle off, conditional requests on, each round a first crawl).
"""

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from bench_crawl import last_archive, ours, start_server  # noqa: E402  (bench/bench_crawl.py)


def warc_figures(archive: Path) -> dict:
    """Bytes and records of the WARC files and their indexes in an archive."""
    warcs = sorted((archive / "warc").glob("*.warc.gz"))
    counts = {}
    for path in warcs:
        with open(path, "rb") as stream:
            for record in ArchiveIterator(stream):
                counts[record.rec_type] = counts.get(record.rec_type, 0) + 1
    return {
        "files": len(warcs),
        "bytes": sum(path.stat().st_size for path in warcs),
        "index_bytes": sum(path.stat().st_size for path in (archive / "warc").glob("*.cdxj")),
        "records": counts,
        "archive_bytes": sum(p.stat().st_size for p in archive.rglob("*") if p.is_file()),
    }


def main() -> None:
    from pith_testkit.virtual import VirtualCatalog

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-warc-") as work:
        work = Path(work)
        server, url, keyring = start_server("serve", work, work / "virtual.keyring.json", args.records)
        seed = VirtualCatalog(11, 1).suffixes[0]
        results = {"warc": [], "no-warc": []}
        try:
            for _ in range(args.rounds):
                for label, extra in (("warc", []), ("no-warc", ["--no-warc"])):
                    results[label].append(ours(url, keyring, work, label, [seed, *extra], None))
        finally:
            server.terminate()
            server.wait()
        figures = warc_figures(last_archive(work, "warc"))
        without = sum(p.stat().st_size for p in last_archive(work, "no-warc").rglob("*") if p.is_file())
    for label, rounds in results.items():
        time = statistics.median(r["time"] for r in rounds)
        cpu = statistics.median(r["cpu"] for r in rounds)
        rss = statistics.median(r["rss"] for r in rounds)
        records = rounds[-1]["records"]
        print(
            f"{label:>8}: {records} bundles, {rounds[-1]['requests']} requests, median {time:.1f} s wall "
            f"({records / time:.0f} bundles/s), {cpu:.1f} s CPU, peak RSS {rss:.0f} MiB",
            flush=True,
        )
    records = results["warc"][-1]["records"]
    requests = results["warc"][-1]["requests"]
    total = sum(figures["records"].values())
    print(
        f"WARC: {figures['files']} files, {figures['bytes']} bytes ({figures['bytes'] / records:.0f} per bundle, "
        f"{figures['bytes'] / total:.0f} per record), {total} records {figures['records']} for {requests} requests; "
        f"CDXJ {figures['index_bytes']} bytes; archive {figures['archive_bytes']} bytes with WARCs, "
        f"{without} without",
        flush=True,
    )
    wall = [statistics.median(r["time"] for r in results[label]) for label in ("warc", "no-warc")]
    print(
        f"cost: {wall[0] - wall[1]:+.1f} s wall ({(wall[0] / wall[1] - 1) * 100:+.1f}%), "
        f"{(wall[0] - wall[1]) / total * 1e6:+.0f} us per WARC record"
    )


if __name__ == "__main__":
    main()
