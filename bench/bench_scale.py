"""Scaling out: one crawl shared by several worker processes through a Redis frontier.

    python bench/bench_scale.py --records 1000 --records 10000 [--workers 1 --workers 2] [--s3]

For each corpus size, the whole job (bundles, record pages where they add records, links
followed from one seed, verified and archived) runs as: one process with no frontier,
then 1, 2, ... workers sharing a frontier in a fresh redis-server, all writing into
one archive (a local folder, and with --s3 a bucket on a moto server too). The mirror,
Redis and moto each run in their own process, on the same machine as the workers. The
mirror keeps the whole corpus rendered (--mirror-cache) and an unreported crawl warms
it, so that it takes little of the CPU the workers share, as a remote registry would.

Per run: wall time from the first worker's start to the last one's exit (it includes
each worker's start-up and the PITH_FRONTIER_IDLE_CLOSE wait at the end), records
archived per second, the peak RSS of the largest worker (os.wait4), the CPU seconds
used by the workers, the mirror, Redis and moto, and Redis's peak memory. Every run is
checked: the workers together archived each record of the corpus exactly once.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench_crawl import SETTINGS  # noqa: E402
from bench_mirror import cpu_seconds  # noqa: E402

from pith_testkit.corpus import generate_corpus  # noqa: E402
from storage.serving.source import BUNDLES_DIR  # noqa: E402
from tests.plugins.cli import signing_key as own_key  # noqa: E402
from tests.plugins.redis import start_redis  # noqa: E402
from tests.plugins.s3 import _free_port  # noqa: E402

FRONTIER = {"PITH_FRONTIER_IDLE_CLOSE": 1, "PITH_FRONTIER_POLL": 0.25, "PITH_CONDITIONAL_REQUESTS": False}
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "NO_PROXY": "127.0.0.1",
}


def start_moto(workdir: Path) -> tuple[subprocess.Popen, str]:
    """The tests' S3-compatible server (moto in server mode) with a ``bench`` bucket."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=(workdir / "moto.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    for _ in range(300):
        try:
            urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"{url}/moto-api/", timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    import boto3

    boto3.client(
        "s3", endpoint_url=url, aws_access_key_id="bench", aws_secret_access_key="bench-secret", region_name="us-east-1"
    ).create_bucket(Bucket="bench")
    return server, url


def start_mirror(corpus: Path, cache_size: int) -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen(
        [sys.executable, "-m", "pith_archiver", "serve", str(corpus), "--cache-size", str(cache_size)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    return server, server.stdout.readline().strip()


def crawl_command(
    url: str, corpus: Path, seed: str, target: str, name: str, workdir: Path, frontier: str | None, s3: str | None
) -> list[str]:
    settings = {**SETTINGS, **(FRONTIER if frontier else {"PITH_CONDITIONAL_REQUESTS": False})}
    command = [
        sys.executable,
        "-m",
        "pith_archiver",
        "crawl",
        "--resolver",
        url,
        "--progress",
        "off",
        "--keyring",
        str(corpus / "keyring.json"),
        "--out",
        target,
        "--worker",
        name,
        "--signing-key",
        str(own_key(workdir / f"{name}.key")),
        "--stats-json",
        str(workdir / f"{name}.json"),
        *[arg for item in settings.items() for arg in ("-s", f"{item[0]}={item[1]}")],
        seed,
    ]
    if frontier:
        command += ["--frontier", frontier]
    if s3:
        command += ["--s3-endpoint-url", s3]
    return command


def run_workers(commands: list[list[str]], env: dict) -> tuple[float, list[int], float]:
    """Start every command at once; wall seconds to the last exit, peak RSS (MiB) and
    the CPU seconds of each."""
    started = time.perf_counter()
    children = [
        subprocess.Popen(c, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for c in commands
    ]
    rss, cpu = [], 0.0
    for child in children:
        _, status, usage = os.wait4(child.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"a worker failed: {child.stderr.read().decode()[-3000:]}")
        rss.append(usage.ru_maxrss // 1024)
        cpu += usage.ru_utime + usage.ru_stime
    return time.perf_counter() - started, rss, cpu


def bench_one(
    corpus: Path,
    url: str,
    seed: str,
    records: int,
    workers: int,
    frontier: bool,
    s3: str | None,
    workdir: Path,
    mirror_pid: int,
    moto_pid: int | None,
) -> dict:
    label = f"{workers}w-{'redis' if frontier else 'alone'}-{'s3' if s3 else 'local'}-{records}"
    run_dir = workdir / label
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    target = f"s3://bench/{label}" if s3 else str(run_dir / "archive")
    redis_server, redis_url = start_redis(run_dir) if frontier else (None, None)
    env = {**os.environ, "XDG_CONFIG_HOME": str(run_dir / "config"), **(S3_ENV if s3 else {})}
    names = [f"w{i}" for i in range(workers)]
    commands = [
        crawl_command(url, corpus, seed, target, name, run_dir, redis_url and f"{redis_url}/0", s3) for name in names
    ]
    watched = {
        "mirror": mirror_pid,
        **({"redis": redis_server.pid} if redis_server else {}),
        **({"moto": moto_pid} if s3 else {}),
    }
    before = {name: cpu_seconds(pid) for name, pid in watched.items()}
    try:
        wall, rss, worker_cpu = run_workers(commands, env)
        cpu = {name: cpu_seconds(pid) - before[name] for name, pid in watched.items()}
        redis_peak = redis.Redis.from_url(redis_url).info("memory")["used_memory_peak"] if redis_server else 0
    finally:
        if redis_server:
            redis_server.kill()
            redis_server.wait()
    stats = [json.loads((run_dir / f"{name}.json").read_text()) for name in names]
    archived = [s.get("pith/archived", 0) for s in stats]
    if sum(archived) != records or sum(s.get("pith/records_found", 0) for s in stats) != records:
        raise SystemExit(f"{label}: archived {archived} of {records} records")
    shutil.rmtree(run_dir / "archive", ignore_errors=True)
    return {
        "label": label,
        "records": records,
        "workers": workers,
        "frontier": frontier,
        "s3": bool(s3),
        "wall": wall,
        "rate": records / wall,
        "rss": max(rss),
        "archived": archived,
        "cpu_workers": worker_cpu,
        **{f"cpu_{k}": v for k, v in cpu.items()},
        "redis_peak_mib": redis_peak / 2**20,
    }


def corpus_of(records: int) -> Path:
    corpus = HERE / "out" / f"corpus-{records}-seed1"
    if not (corpus / BUNDLES_DIR).is_dir():
        generate_corpus(corpus, records, 1)
    return corpus


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, action="append", help="corpus sizes (default 1000 and 10000)")
    parser.add_argument("--workers", type=int, action="append", help="worker counts (default 1 and 2)")
    parser.add_argument("--s3", action="store_true", help="also archive into a bucket on a moto server")
    parser.add_argument(
        "--rounds", type=int, default=1, help="repeat every configuration, interleaved (medians at the end)"
    )
    parser.add_argument("--no-alone", action="store_true", help="skip the single process without a frontier")
    parser.add_argument(
        "--mirror-cache",
        type=int,
        default=0,
        help="documents the mirror keeps rendered (default: the whole corpus, so that after the "
        "warm-up it costs little CPU, as a remote registry would cost none)",
    )
    parser.add_argument(
        "--no-warmup",
        action="store_true",
        help="skip the unreported first crawl (it only matters while the mirror's cache holds the corpus)",
    )
    parser.add_argument("--json", type=Path, help="append every result here as a JSON line")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="pith-scale-"))
    moto, s3_url = start_moto(workdir) if args.s3 else (None, None)
    print(
        f"{'run':<24} {'wall s':>7} {'rec/s':>6} {'x 1w':>5} {'RSS MiB':>7} {'CPU s: workers':>14} "
        f"{'mirror':>6} {'redis':>5} {'moto':>5} {'redis MiB':>9} {'load':>5}  archived per worker",
        flush=True,
    )
    rates: dict[str, list[float]] = {}
    try:
        for records in args.records or [1000, 10000]:
            corpus = corpus_of(records)
            suffixes = sorted(p.name.split(".")[0] for p in (corpus / BUNDLES_DIR).glob("*.bundle.json"))
            server, url = start_mirror(corpus, args.mirror_cache or 3 * len(suffixes) + 16)
            try:
                for s3 in [None, s3_url] if args.s3 else [None]:
                    runs = [] if args.no_alone else [(1, False)]
                    runs += [(n, True) for n in args.workers or [1, 2]]
                    if not args.no_warmup:  # the mirror's cache of rendered documents starts warm for every run
                        bench_one(
                            corpus,
                            url,
                            suffixes[0],
                            len(suffixes),
                            1,
                            False,
                            s3,
                            workdir,
                            server.pid,
                            moto and moto.pid,
                        )
                    for _ in range(args.rounds):
                        one = None
                        for workers, frontier in runs:
                            load = os.getloadavg()[0]
                            r = bench_one(
                                corpus,
                                url,
                                suffixes[0],
                                len(suffixes),
                                workers,
                                frontier,
                                s3,
                                workdir,
                                server.pid,
                                moto and moto.pid,
                            )
                            rates.setdefault(r["label"], []).append(r["rate"])
                            one = r["rate"] if frontier and workers == 1 else one
                            speedup = f"{r['rate'] / one:.2f}" if one and frontier else ""
                            print(
                                f"{r['label']:<24} {r['wall']:>7.1f} {r['rate']:>6.0f} {speedup:>5} {r['rss']:>7} "
                                f"{r['cpu_workers']:>14.1f} {r['cpu_mirror']:>6.1f} {r.get('cpu_redis', 0):>5.1f} "
                                f"{r.get('cpu_moto', 0):>5.1f} {r['redis_peak_mib']:>9.1f} {load:>5.2f}  "
                                f"{r['archived']}",
                                flush=True,
                            )
                            if args.json:
                                with args.json.open("a") as out:
                                    out.write(json.dumps({**r, "load": load}) + "\n")
            finally:
                server.terminate()
                server.wait()
    finally:
        if moto:
            moto.terminate()
            moto.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    print("median records/s:", ", ".join(f"{label} {statistics.median(r):.0f}" for label, r in rates.items()))


if __name__ == "__main__":
    main()
