"""Where a crawl's CPU goes: seconds per thread of the crawl's process (Scrapy's thread
apart from the upload and commit threads) and per child process (the verifier worker,
the WARC child), beside the bare Scrapy spider's, against nginx serving the corpus.

    python bench/cpu_split.py --records 10000 [--set PITH_WARC=false] [--rounds 2]

On 2 cores the crawl is fast when Scrapy's thread is and when the whole stays under
the two cores: this shows both. Threads are read from /proc every 0.2 s until the
process exits (the last 0.2 s of a thread may go uncounted); the bare spider's
process is one thread doing everything.
"""

import argparse
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import bench_crawl  # noqa: E402  (bench/bench_crawl.py)
import system_packages  # noqa: E402

from pith_testkit import nginx  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_of(stat_path: str) -> tuple[str, float]:
    """A task's name and its user plus system CPU seconds, from its /proc stat."""
    with open(stat_path) as handle:
        data = handle.read()
    fields = data[data.rindex(")") + 2 :].split()
    return data[data.index("(") + 1 : data.rindex(")")], (int(fields[11]) + int(fields[12])) / TICK


def split(cmd: list[str], env: dict, cwd: Path = ROOT) -> tuple[float, dict[str, float]]:
    """Wall seconds and CPU seconds by part: ``main`` (the process's first thread),
    its other threads by name, and each child by its module."""
    last: dict[tuple[str, int], tuple[str, float]] = {}

    def sample(root: int) -> None:
        for pid in bench_crawl.tree(root):
            try:
                if pid == root:
                    for task in os.listdir(f"/proc/{pid}/task"):
                        name, cpu = cpu_of(f"/proc/{pid}/task/{task}/stat")
                        last[("thread", int(task))] = ("main" if int(task) == pid else name, cpu)
                else:
                    with open(f"/proc/{pid}/cmdline") as handle:
                        words = handle.read().split("\0")
                    module = words[words.index("-m") + 1] if "-m" in words else Path(words[1]).name
                    last[("child", pid)] = (module, cpu_of(f"/proc/{pid}/stat")[1])
            except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
                continue

    elapsed, _ = bench_crawl.watched(cmd, sample, 0.2, env, cwd)
    parts: dict[str, float] = defaultdict(float)
    for (kind, _), (name, cpu) in last.items():
        parts[name if kind == "child" or name == "main" else f"thread {name.rstrip('_0123456789')}"] += cpu
    return elapsed, dict(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "pith-bench"))
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    corpus, site, suffixes = bench_crawl.corpus_of(args.records, workdir)
    seeds = workdir / "seeds.txt"
    seeds.write_text("".join(f"{s}\n" for s in suffixes))
    server, (url,) = nginx.start([site], workdir / "nginx-cpu", system_packages.ensure("nginx", "nginx-light"))
    urls = bench_crawl.bundle_urls(url, suffixes, workdir)
    sets = [a for pair in args.set for a in ("-s", pair)]
    settings = [a for name, value in bench_crawl.SETTINGS.items() for a in ("-s", f"{name}={value}")]
    try:
        for round_ in range(args.rounds):
            with bench_crawl.bare_spider(urls, len(suffixes), workdir) as (cmd, env, cwd):
                show(round_, "bare spider", *split(cmd, env, cwd))
            run_dir = bench_crawl.fresh_folder(workdir, "cpu")  # a first crawl, as the bench's
            crawl = [
                *(sys.executable, "-m", "pith_archiver", "crawl", "--resolver", url, "--progress", "off"),
                *("--keyring", str(corpus / "keyring.json"), "--out", str(run_dir / "archive")),
                *("--no-follow", "--seeds-file", str(seeds), *settings, *sets),
            ]
            show(round_, "bundle path", *split(crawl, {**os.environ, "XDG_CACHE_HOME": str(run_dir / "cache")}))
    finally:
        server.terminate()
        server.wait()


def show(round_: int, label: str, wall: float, parts: dict[str, float]) -> None:
    shown = ", ".join(f"{name} {cpu:.1f}" for name, cpu in sorted(parts.items(), key=lambda p: -p[1]))
    print(f"round {round_ + 1} {label:12s} wall {wall:5.1f} s  CPU {sum(parts.values()):5.1f} s: {shown}", flush=True)


if __name__ == "__main__":
    main()
