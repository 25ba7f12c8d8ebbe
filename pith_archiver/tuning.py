"""Allocator settings for a long crawl, made before it starts.

Much of a crawl's peak memory is not live data but pages the allocators keep once
used: pyarrow's own pool (mimalloc or jemalloc) holds every checkpoint's Parquet
encoding buffers, and glibc gives each thread that ever allocated (upload, checkpoint
and Scrapy's DNS threads) an arena of its own. Both are settable only before the
first allocation they govern: pyarrow reads ``ARROW_DEFAULT_MEMORY_POOL`` when it
first builds its pool, glibc caps arenas for threads started after ``mallopt``. An
operator's own setting of either variable wins.
"""

import ctypes
import logging
import os
import sys

logger = logging.getLogger(__name__)

M_ARENA_MAX = -8  # glibc's malloc.h
CRAWL_ARENAS = 2


def economise() -> bool:
    """Call before pyarrow is imported and before any thread starts. True when this
    call capped the malloc arenas (glibc, and no MALLOC_ARENA_MAX of the operator's)."""
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    if "MALLOC_ARENA_MAX" in os.environ or not sys.platform.startswith("linux"):
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)  # glibc and musl have it; musl ignores it
    if mallopt is None or not mallopt(M_ARENA_MAX, CRAWL_ARENAS):
        logger.debug("could not cap malloc arenas")
        return False
    return True
