"""This tree against an older one (``--before REF``, a git commit), alternated in the same
run, on the same corpus served by nginx: the crawl of every bundle URL (``bundles``:
seeds file, ``--no-follow``), the real job from one seed (``full``) and ``verify`` of
the corpus's bundles with one process. A change that only renames and restructures
must not slow any of them; medians of the rounds, times of every round shown.

    python bench/bench_trees.py --before e479d65 --records 10000 --rounds 3 [--set PITH_WARC=false]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from bench_crawl import corpus_of, ours, run, start_server  # noqa: E402
from bench_verify import compiled  # noqa: E402


def checkout(ref: str, workdir: Path) -> Path:
    """A detached worktree of ``ref`` (made once, reused)."""
    tree = workdir / f"tree-{ref}"
    if not tree.exists():
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), ref], cwd=ROOT, check=True)  # noqa: S607
    return tree


def verify_seconds(tree: Path, corpus: Path, env: dict) -> dict:
    command = [sys.executable, "-m", "pith_archiver", "verify", "-q", "--jobs", "1"]
    command += ["--keyring", str(corpus / "keyring.json"), str(corpus / "bundles")]
    elapsed, rss, pss, cpu = run(command, {**env, "PYTHONPATH": str(tree)}, cwd=tree)
    return {"time": elapsed, "rss": rss, "cpu": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the git commit to compare with")
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None, help="keep corpora and the old tree here")
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a setting for both trees' crawls"
    )
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="pith-bench-trees-"))
    workdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "XDG_CONFIG_HOME": str(workdir / "config")}
    trees = {"after": ROOT, "before": checkout(args.before, workdir)}
    print("both trees: " + "; ".join(sorted({compiled(tree) for tree in trees.values()})), flush=True)
    corpus, site, suffixes = corpus_of(args.records, workdir)
    seeds = workdir / "seeds.txt"
    seeds.write_text("".join(f"{s}\n" for s in suffixes))
    sets = [arg for pair in args.set for arg in ("-s", pair)]  # a setting an old tree lacks, Scrapy ignores
    jobs = {"bundles": ["--no-follow", "--seeds-file", str(seeds), *sets], "full": [suffixes[0], *sets]}
    server, url, keyring = start_server("nginx", corpus, site)
    results: dict[tuple[str, str], list[dict]] = {}
    try:
        for round_ in range(args.rounds):  # alternated, the order turned each round
            order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
            for job, extra in jobs.items():
                for name in order:
                    result = ours(url, keyring, workdir, f"{job}-{name}", extra, env, tree=trees[name])
                    results.setdefault((job, name), []).append(result)
            for name in order:
                results.setdefault(("verify", name), []).append(verify_seconds(trees[name], corpus, env))
    finally:
        server.terminate()
        server.wait()
    print(f"{'job':>8} {'tree':>7} {'times (s)':>22} {'median s':>9} {'after/before':>12} {'MiB':>5} {'CPU s':>6}")
    for (job, name), runs in results.items():
        median = statistics.median(r["time"] for r in runs)
        before = statistics.median(r["time"] for r in results[(job, "before")])
        times = " / ".join(f"{r['time']:.1f}" for r in runs)
        print(
            f"{job:>8} {name:>7} {times:>22} {median:>9.1f} {median / before:>12.3f}"
            f" {statistics.median(r['rss'] for r in runs):>5.0f} {statistics.median(r['cpu'] for r in runs):>6.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
