"""Threads or processes for verification beside a busy crawl thread: a model of the crawl
in which one thread spends a fixed CPU time per bundle (Scrapy's own work) and each
bundle is parsed and verified (crawler.verifying.verify_worker.BundleChecker) either inline, in a
thread pool, in a ``concurrent.futures`` process pool (the baseline: how the crawl
handed bundles over before), or by ``crawler.verifying.verifier.Verifier``'s worker process over
its socket, as the crawl runs it now; at most 64 in flight.

    python bench/bench_verify_pool.py --corpus DIR [--bundles 3000] [--scrapy-us 1500] [--rounds 2]

DIR is a generated corpus (``python -m pith_testkit corpus generate``). Prints wall time and the
CPU time of this process (all its threads; the worker processes' own time excluded):
the latter is what a crawl thread would have left for Scrapy.
"""

import argparse
import asyncio
import multiprocessing
import sys
import time
from collections import deque
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crawler.verifying.verifier import Verifier  # noqa: E402
from crawler.verifying.verify_worker import BundleChecker  # noqa: E402
from pith.keyring import Keyring  # noqa: E402
from pith.parse import Limits  # noqa: E402


def busy(microseconds: int) -> None:
    end = time.thread_time() + microseconds / 1e6
    while time.thread_time() < end:
        pass


_checker = None  # in a concurrent.futures worker


def _start(checker: BundleChecker) -> None:
    global _checker
    _checker = checker


def _check(raw: bytes):
    return _checker(raw)


async def through_verifier(raws: list[bytes], checker: BundleChecker, scrapy_us: int) -> tuple[float, float]:
    verifier = Verifier(checker, 1)
    await verifier.verify(b"{}")  # started before the clock matters
    wall, cpu = time.perf_counter(), time.process_time()
    pending = deque()
    for raw in raws:
        busy(scrapy_us)
        pending.append(asyncio.ensure_future(verifier.verify(raw)))
        await asyncio.sleep(0)  # the loop turns, as the reactor's does between callbacks
        while pending and (pending[0].done() or len(pending) > 64):
            await pending.popleft()
    for task in pending:
        await task
    verifier.close()
    return wall, cpu


def run(mode: str, workers: int, raws: list[bytes], checker: BundleChecker, scrapy_us: int) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    if mode == "socket":
        wall, cpu = asyncio.run(through_verifier(raws, checker, scrapy_us))
    elif mode == "inline":
        for raw in raws:
            busy(scrapy_us)
            checker(raw)
    else:
        pool = (
            ProcessPoolExecutor(
                workers, mp_context=multiprocessing.get_context("spawn"), initializer=_start, initargs=(checker,)
            )
            if mode == "futures"
            else ThreadPoolExecutor(workers)
        )
        task = _check if mode == "futures" else checker
        pool.submit(task, b"{}").result()  # started before the clock matters
        wall, cpu = time.perf_counter(), time.process_time()
        pending = deque()
        for raw in raws:
            busy(scrapy_us)
            pending.append(pool.submit(task, raw))
            while pending and (pending[0].done() or len(pending) > 64):
                pending.popleft().result()
        for future in pending:
            future.result()
        pool.shutdown()
    print(f"{mode:>8} {workers:>7} {time.perf_counter() - wall:>8.2f} {time.process_time() - cpu:>12.2f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--bundles", type=int, default=3000)
    parser.add_argument("--scrapy-us", type=int, default=1500, help="CPU µs of the crawl thread's own work per bundle")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    raws = [path.read_bytes() for path in sorted((args.corpus / "bundles").glob("*.bundle.json"))[: args.bundles]]
    checker = BundleChecker(Keyring.build([args.corpus / "keyring.json"], True), Limits())
    print(f"{len(raws)} bundles, {args.scrapy_us} µs of crawl-thread work each")
    print(f"{'mode':>8} {'workers':>7} {'wall s':>8} {'this CPU s':>12}")
    for _ in range(args.rounds):  # alternated
        for mode, workers in (("inline", 0), ("thread", 1), ("futures", 1), ("socket", 1)):
            run(mode, workers, raws, checker, args.scrapy_us)


if __name__ == "__main__":
    main()
