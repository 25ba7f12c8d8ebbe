"""A weekly crawl against a registry that changes (issue 47): what each crawl costs the
registry (requests, counted in nginx's own access log and by the crawl) and how long it
takes.

One virtual registry of N records (the test kit's, 1% changed a week), exported week by
week as plain files and served by nginx, crawled from its sitemap into one archive with
the defaults users get (WARC on) but AutoThrottle off, as the other crawl benches: the
first crawl (week 0); a week with honest sitemap dates (week 1); today's full conditional
sweep of the same week (``--recheck-after 0``: every held record asked, dates ignored); a
week whose registry publishes ResourceSync Change Lists (week 2, ``--resourcesync``);
and a week whose changed records kept their old dates (week 3, ``--dates lying``, no
ResourceSync). Peak RSS is summed over every process a crawl starts.

With ``--honest-weeks N`` (issue 64) it runs N weeks in a row instead, each with honest
sitemap dates, and checks each week after the first against its budget: at most 1.05 x
the records changed + 2% of the records + the listing files + 10 requests, and at most
10% of the first week's time.

    python bench/bench_weekly.py --records 100000
    python bench/bench_weekly.py --records 100000 --honest-weeks 4
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
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import system_packages  # noqa: E402
from bench_crawl import run  # noqa: E402

from pith_testkit import nginx  # noqa: E402

# (what the run is, week exported, its dates, with ResourceSync, crawl options)
RUNS = (
    ("first run (week 0)", 0, "honest", False, ()),
    ("honest sitemap dates (week 1)", 1, "honest", False, ()),
    ("full conditional sweep (week 1)", 1, "honest", False, ("--recheck-after", "0")),
    ("honest Change Lists (week 2)", 2, "honest", True, ()),
    ("lying sitemap dates (week 3)", 3, "lying", False, ()),
)


def export(records: int, week: int, dates: str, resourcesync: bool, out: Path, base: str) -> float:
    """Week ``week`` written over the last (a week without ResourceSync publishes none)."""
    started = time.monotonic()
    shutil.rmtree(out / "site" / "resourcesync", ignore_errors=True)
    (out / "site" / ".well-known" / "resourcesync").unlink(missing_ok=True)
    command = [sys.executable, "-m", "pith_testkit", "corpus", "week", "--records", str(records), "--week", str(week)]
    command += ["--changed-per-week", "1%", "--dates", dates, "--out", str(out), "--base-url", base, "-q"]
    command += ["--resourcesync"] if resourcesync else []
    subprocess.run(command, check=True, cwd=ROOT)  # noqa: S603 - our own test kit
    return time.monotonic() - started


def crawl(base: str, registry: Path, work: Path, log: Path, *extra: str) -> dict:
    log.write_text("")
    stats = work / "stats.json"
    command = [sys.executable, "-m", "pith_archiver", "crawl", "--resolver", base, "sitemap"]
    command += ["--out", str(work / "archive"), "--keyring", str(registry / "keyring.json"), "--no-default-keys"]
    command += ["-q", "--stats-json", str(stats), "-s", "AUTOTHROTTLE_ENABLED=false", *extra]
    elapsed, rss, _, cpu = run(command, {**os.environ, "HOME": str(work), "XDG_CACHE_HOME": str(work / ".cache")})
    lines, counts = log.read_text().splitlines(), json.loads(stats.read_text())
    return {
        "requests": counts.get("downloader/request_count", 0),
        "in nginx's log": len(lines),
        "bundles 200": sum(1 for line in lines if line.endswith("/bundle.json 200")),
        "bundles 304": sum(1 for line in lines if line.endswith("/bundle.json 304")),
        "listing files": sum(1 for line in lines if "/pith/" not in line),
        "distrusted": counts.get("pith/lastmod_distrusted", 0),
        "seconds": round(elapsed, 1),
        "cpu": round(cpu, 1),
        "peak RSS MiB": rss,
    }


def within_budget(records: int, week: dict, first: dict) -> str:
    """A later honest week against issue 64's budget: requests and time."""
    changed = records // 100
    budget = int(1.05 * changed + 0.02 * records + week["listing files"] + 10)
    share = week["seconds"] / first["seconds"]
    met = week["requests"] <= budget and share <= 0.10
    return (
        f"budget: {week['requests']} requests of at most {budget} (1.05 x {changed} changed + 2% + "
        f"{week['listing files']} listing files + 10); {share:.1%} of the first week's time (at most 10%):"
        f" {'met' if met else 'NOT met'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--honest-weeks", type=int, default=0, help="N honest weeks in a row, checked against the budget"
    )
    args = parser.parse_args()
    runs = RUNS
    if args.honest_weeks:
        runs = tuple(
            (f"honest sitemap dates (week {week})", week, "honest", False, ()) for week in range(args.honest_weeks)
        )
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-weekly-"))
    registry, log = work / "registry", work / "access.log"
    (registry / "site").mkdir(parents=True, exist_ok=True)
    server, [base] = nginx.start(
        [registry / "site"], work / "nginx", system_packages.ensure("nginx", "nginx-light"), access_log=log
    )
    try:
        print(f"{args.records} records, 1% changed a week; nginx at {base}; work in {work}", flush=True)
        first = None
        for name, week, dates, resourcesync, extra in runs:
            written = export(args.records, week, dates, resourcesync, registry, base)
            figures = crawl(base, registry, work, log, *extra)
            print(f"| {name} | " + " | ".join(f"{v}" for v in figures.values()) + f" | export {written:.0f} s |")
            print("   " + ", ".join(f"{k} {v}" for k, v in figures.items()), flush=True)
            if args.honest_weeks and first is None:
                first = figures
            elif args.honest_weeks:
                print("   " + within_budget(args.records, figures, first), flush=True)
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
