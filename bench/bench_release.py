"""A dataset release of an archive (``export --format release``) against a plain pyarrow
copy of the same tables (``pyarrow.dataset`` read of ``tables/<t>``, written again with
``write_dataset``): time, peak RSS and bytes written, alternated, medians of the rounds.

    python bench/bench_release.py ARCHIVE --keyring KEYRING [--rounds 3]

ARCHIVE is a crawled archive (for example the one ``bench/bench_crawl.py --virtual N``
or a crawl of ``serve --virtual N`` leaves); the archiver key that signed it must be
this machine's (``XDG_CONFIG_HOME``), as for any export. The plain copy does less
(no current version per record, no citations, no metadata, no hashes, every row of the
history), so it is the floor of what reading and writing the tables costs.
"""

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_crawl import run  # noqa: E402

PLAIN_COPY = """
import sys, pyarrow.dataset as ds
archive, out = sys.argv[1], sys.argv[2]
for table in ("records", "events", "aliases"):
    source = ds.dataset(f"{archive}/tables/{table}", format="parquet", partitioning="hive")
    ds.write_dataset(source, f"{out}/{table}", format="parquet", max_rows_per_group=65536)
"""


def size_of(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--keyring", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pith-bench-release-"))
    runs = {"plain pyarrow copy": [], "release": []}
    try:
        for round_ in range(args.rounds):
            out = workdir / f"plain-{round_}"
            wall, rss, _, cpu = run([sys.executable, "-c", PLAIN_COPY, str(args.archive), str(out)])
            runs["plain pyarrow copy"].append((wall, rss, cpu, size_of(out)))
            shutil.rmtree(out)
            out = workdir / f"release-{round_}"
            command = [sys.executable, "-m", "pith_archiver", "export", str(args.archive), "--format", "release"]
            wall, rss, _, cpu = run([*command, "--out", str(out), "--keyring", str(args.keyring), "-q"])
            runs["release"].append((wall, rss, cpu, size_of(out)))
            shutil.rmtree(out)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"{'run':>20} {'times (s)':>22} {'peak RSS MiB':>12} {'CPU s':>7} {'MB written':>10}")
    for label, results in runs.items():
        times = " / ".join(f"{r[0]:.1f}" for r in results)
        rss, cpu, written = (statistics.median(r[i] for r in results) for i in (1, 2, 3))
        print(f"{label:>20} {times:>22} {rss:>12.0f} {cpu:>7.1f} {written / 1e6:>10.1f}")


if __name__ == "__main__":
    main()
