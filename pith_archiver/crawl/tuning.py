"""The crawl's performance knobs, in one place, so the essential path stays plain. Each
changes how fast or how lean a crawl runs, never what it fetches, verifies or stores;
docs/OPERATIONS.md ("Performance knobs") says what each does, its default and how to
set it, and bench/RESULTS.md has the figures.

- ``economise``: the allocators, set before anything allocates (pyarrow on the system
  allocator, at most two glibc malloc arenas).
- ``without_unused_libraries``: pyarrow loads neither numpy, pandas nor its remote
  filesystems into a crawl.
- ``root_log_level``: the root logger and Scrapy's at the crawl's LOG_LEVEL while it runs.
- The garbage collector's threshold is a Scrapy extension, so it lives with the
  crawler: ``crawler.extensions.collector`` (``PITH_GC_THRESHOLD``).
"""

import ctypes
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from storage.runtime.kept_out import keep_out

logger = logging.getLogger(__name__)

M_ARENA_MAX = -8  # glibc's malloc.h
CRAWL_ARENAS = 2


def economise() -> bool:
    """Much of a crawl's peak memory is not live data but pages the allocators keep once
    used: pyarrow's own pool (mimalloc or jemalloc) holds every interim commit's Parquet
    encoding buffers, and glibc gives each thread that ever allocated (upload,
    interim commit and Scrapy's DNS threads) an arena of its own. Both are settable only
    before the first allocation they govern: pyarrow reads ``ARROW_DEFAULT_MEMORY_POOL``
    when it first builds its pool, glibc caps arenas for threads started after
    ``mallopt``. An operator's own setting of either variable wins.

    Call before pyarrow is imported and before any thread starts. True when this call
    capped the malloc arenas (glibc, and no MALLOC_ARENA_MAX of the operator's)."""
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    if "MALLOC_ARENA_MAX" in os.environ or not sys.platform.startswith("linux"):
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)  # glibc and musl have it; musl ignores it
    if mallopt is None or not mallopt(M_ARENA_MAX, CRAWL_ARENAS):
        logger.debug("could not cap malloc arenas")
        return False
    return True


# pyarrow's bindings to remote filesystems: ``pyarrow.parquet`` imports ``pyarrow.fs``,
# which loads each that is built (S3's with the AWS SDK's library); pyarrow.fs goes on
# without them, as when they are not built
REMOTE_FILESYSTEMS = ("pyarrow._s3fs", "pyarrow._gcsfs", "pyarrow._azurefs", "pyarrow._hdfs")
KEPT_OUT = ("numpy", "pandas", *REMOTE_FILESYSTEMS)


def without_unused_libraries() -> None:
    """pyarrow imports numpy when it is imported, and pandas on its first conversion of
    Python values (to check whether they are pandas objects), whenever they are
    installed: ~45 MiB of a crawl's memory for libraries its tables never use (pyarrow
    needs neither; a release reader or a data user's notebook may well have them). Its
    Parquet module brings the remote filesystems' bindings, 4 MiB more, where a crawl
    stores through its own object store (boto3 for S3). For the crawl's process only:
    call before pyarrow is imported."""
    keep_out(KEPT_OUT, "kept out of a crawl")


# the loggers Scrapy leaves open to every level: the root, and its own, which its
# logging configuration sets to DEBUG
OPEN_LOGGERS = ("", "scrapy")


@contextmanager
def root_log_level(level: int | str) -> Iterator[None]:
    """The root logger and Scrapy's at ``level`` (the crawl's LOG_LEVEL) within, as they
    were after. Scrapy filters in its root handler and leaves those loggers open to
    every level, so each request's ("Crawled") and each item's ("Scraped from") DEBUG
    record is built only to be dropped: at INFO, ~5% of the crawl's thread for ours
    and 2% for Scrapy's. The handler's level, set on those loggers too, drops them
    before they are built."""
    opened = [logging.getLogger(name) for name in OPEN_LOGGERS]
    before = [each.level for each in opened]
    for each in opened:
        each.setLevel(level)
    try:
        yield
    finally:
        for each, was in zip(opened, before, strict=True):
            each.setLevel(was)
