"""Map a function over a long input on every core, results in input order.

Verification is CPU-bound Python (hashing and Ed25519 hold the GIL for most of a
bundle), so the work goes to processes. The input is cut into chunks and only a few
chunks per process are in flight at once: results stream out as the input streams in,
and a folder of a million bundles never sits in memory.
"""

import signal
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import islice
from typing import Any

IN_FLIGHT_PER_JOB = 3
MAX_CHUNK = 64
WORTH_A_POOL = 64  # fewer items finish before the worker processes would have started

_function = None  # in a worker: the function it applies, sent once when it starts


def ordered_map(function: Callable[[Any], Any], items: list, jobs: int) -> Iterator[Any]:
    """``function(item)`` for each item, in order, on ``jobs`` processes (in this one
    when there is too little work to share). ``function`` must pickle; it is sent to
    each worker once."""
    size = max(1, min(MAX_CHUNK, len(items) // (jobs * IN_FLIGHT_PER_JOB)))
    chunks = (items[start : start + size] for start in range(0, len(items), size))
    if jobs <= 1 or len(items) < WORTH_A_POOL:
        for chunk in chunks:
            yield from map(function, chunk)
        return
    from concurrent.futures import ProcessPoolExecutor  # only when the work is shared

    with ProcessPoolExecutor(jobs, initializer=_start_worker, initargs=(function,)) as pool:
        pending = deque(pool.submit(_apply, chunk) for chunk in islice(chunks, jobs * IN_FLIGHT_PER_JOB))
        while pending:
            results = pending.popleft().result()
            for chunk in islice(chunks, 1):
                pending.append(pool.submit(_apply, chunk))
            yield from results


@contextmanager
def eager_map(function: Callable[[Any], Any], jobs: int) -> Iterator[Callable[[list], Iterator[Any]]]:
    """A map of ``function`` on ``jobs`` processes, started for the whole of a batch at
    once (the caller works meanwhile: a sync writes one batch as the next is verified),
    results in order; one pool for every batch, its processes started on entry.
    ``function`` must pickle."""
    if jobs <= 1:
        yield lambda items: map(function, items)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(jobs, initializer=_start_worker, initargs=(function,)) as pool:
        # every process forked now, from the caller as it is before its work grows it (an
        # archive's history read later is not copied into each: their memory stays small)
        pool.submit(int).result()

        def mapped(items: list) -> Iterator[Any]:
            size = max(1, min(MAX_CHUNK, len(items) // (jobs * IN_FLIGHT_PER_JOB)))
            futures = [pool.submit(_apply, items[start : start + size]) for start in range(0, len(items), size)]
            return (result for future in futures for result in future.result())

        yield mapped


def _start_worker(function: Callable[[Any], Any]) -> None:
    global _function
    _function = function
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle


def _apply(chunk: list) -> list:
    function = _function
    if function is None:
        raise RuntimeError("a worker applies the function it was started with")
    return [function(item) for item in chunk]
