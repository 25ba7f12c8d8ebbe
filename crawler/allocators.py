"""Keep a long crawl's native memory from creeping: what grows in a crawl's resident
memory is not Python objects but freed pages the allocators keep (bench/RESULTS.md,
"Verification off the reactor", Memory).

Two process-wide settings, made when the crawl is created, before its threads start:
glibc keeps at most two malloc arenas (by default up to eight per core, one for each
thread that allocates: the upload, checkpoint and reactor pool threads each strand
their own freed pages), and pyarrow encodes Parquet with the system allocator rather
than its own pool, which holds on to the pages of every checkpoint.
``PITH_COMPACT_ALLOCATORS = False`` keeps both defaults.
"""

import ctypes
import ctypes.util
import logging

from scrapy.exceptions import NotConfigured

logger = logging.getLogger(__name__)

M_ARENA_MAX = -8  # glibc's mallopt parameter
ARENAS = 2


class CompactAllocators:
    """An extension whose whole work is done as the crawl is created."""

    @classmethod
    def from_crawler(cls, crawler):
        if not crawler.settings.getbool("PITH_COMPACT_ALLOCATORS"):
            raise NotConfigured("PITH_COMPACT_ALLOCATORS is off")
        limited = _limit_arenas()
        import pyarrow  # the archive's table writer imports it anyway

        pyarrow.set_memory_pool(pyarrow.system_memory_pool())
        logger.debug("pyarrow uses the system allocator; glibc arenas %s", "limited" if limited else "unchanged")
        return cls()


def _limit_arenas() -> bool:
    """Limit glibc's malloc arenas; False where the C library is not glibc."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(getattr(libc, "mallopt")(M_ARENA_MAX, ARENAS))
    except (OSError, AttributeError):
        return False
