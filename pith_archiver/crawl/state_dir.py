"""Where a crawl keeps its own state between crawls (validators for conditional requests,
logs): named by the archive it writes, so the next crawl into the same archive finds it. Apart from
``crawling`` because the options are checked, and a sync from a peer runs, without Scrapy."""

import hashlib
import os
from pathlib import Path


def archive_location(archive: str) -> str:
    """``--out`` as one string wherever the command runs: a URL, or a folder's absolute path."""
    return archive if "://" in archive else str(Path(archive).absolute())


def default_state_dir(archive: str, jobdir: str | None) -> str:
    """Where a crawl's own state (validators for conditional requests, logs) lives:
    beside the job, or in the user's cache keyed by the archive's location; never in
    the archive, which holds only what its manifests list."""
    if jobdir:
        return str(Path(jobdir) / "pith-state")
    key = hashlib.sha256(archive_location(archive).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return str(cache / "pith-archiver" / "state" / key)
