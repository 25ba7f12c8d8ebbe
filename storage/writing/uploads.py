"""A small upload pool with a bound on the bytes it holds.

The crawl produces bundles faster than a slow bucket may take them. Each submission
declares its size; ``submit`` waits while the bytes queued or uploading would pass
``max_bytes_in_flight`` (one oversized job is still let through alone), so memory
stays flat however long the crawl. Futures come back so a Scrapy pipeline can wait
for its item off the reactor thread.
"""

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from storage.archive.stores import MiB

T = TypeVar("T")

logger = logging.getLogger(__name__)


class BoundedUploader:
    def __init__(self, max_bytes_in_flight: int = 128 * MiB, workers: int = 8):
        if max_bytes_in_flight < 1 or workers < 1:
            raise ValueError("max_bytes_in_flight and workers must be positive")
        self.max_bytes_in_flight = max_bytes_in_flight
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="pith-upload")
        self._changed = threading.Condition()
        self._bytes = 0

    @property
    def bytes_in_flight(self) -> int:
        with self._changed:
            return self._bytes

    def has_room(self, size: int) -> bool:
        """Whether ``submit(size, ...)`` would start at once; callers that must not
        block (a reactor thread) submit directly when it does, from a thread otherwise."""
        with self._changed:
            return self._bytes == 0 or self._bytes + size <= self.max_bytes_in_flight

    def submit(self, size: int, fn: Callable[..., T], *args: object, timeout: float | None = None) -> "Future[T]":
        """Run ``fn(*args)`` on the pool once ``size`` more bytes fit under the bound.
        Raises TimeoutError when they do not fit within ``timeout`` seconds."""
        with self._changed:
            fits = self._changed.wait_for(
                lambda: self._bytes == 0 or self._bytes + size <= self.max_bytes_in_flight, timeout
            )
            if not fits:
                raise TimeoutError(f"{self._bytes} bytes in flight; {size} more do not fit")
            self._bytes += size
        try:
            future = self._pool.submit(fn, *args)
        except BaseException:
            self._release(size)
            raise
        future.add_done_callback(lambda _: self._release(size))
        return future

    def _release(self, size: int) -> None:
        with self._changed:
            self._bytes -= size
            self._changed.notify_all()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
