"""``PITH_FRONTIER`` turned into the settings of scrapy-redis's scheduler, queue and
duplicate filter, for ``pith-archiver crawl --frontier`` and ``scrapy crawl pith -s
PITH_FRONTIER=...`` alike."""

import re
from urllib.parse import urlsplit

from scrapy.settings import BaseSettings

from .errors import FrontierError

_KEY = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


def check_url(url: str) -> str:
    """``url`` when it names a Redis database (redis://, rediss:// or unix://), else FrontierError."""
    parts = urlsplit(url or "")
    database = parts.path.strip("/") if parts.scheme in ("redis", "rediss") else "0"
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
    if (
        parts.scheme not in ("redis", "rediss", "unix")
        or not port_ok
        or not (database or "0").isdigit()
        or (parts.scheme != "unix" and not parts.hostname)
        or (parts.scheme == "unix" and not parts.path)
    ):
        raise FrontierError(f"not a Redis URL (redis://host:port/db, rediss://... or unix:///path): {url!r}")
    return url


def queue_key(key: str) -> str:
    return f"{key}:requests"


def dupefilter_key(key: str) -> str:
    return f"{key}:dupefilter"


def frontier_settings(url: str, key: str = "pith") -> dict:
    """The Scrapy settings that put a crawl's queue and seen-sets in the Redis at ``url``."""
    if not _KEY.match(key or ""):
        raise FrontierError(f"a frontier key is 1-64 of [A-Za-z0-9_.:-]: {key!r}")
    return {
        "REDIS_URL": check_url(url),
        "SCHEDULER": "crawler.frontier.FrontierScheduler",
        "SCHEDULER_QUEUE_CLASS": "crawler.frontier.TaskQueue",
        "SCHEDULER_SERIALIZER": "crawler.frontier.serializer",
        "SCHEDULER_QUEUE_KEY": queue_key(key),
        "SCHEDULER_DUPEFILTER_KEY": dupefilter_key(key),
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_PERSIST": True,  # a worker that finishes must never flush the others' work
    }


class FrontierAddon:
    """Sets scrapy-redis's settings when PITH_FRONTIER is set (the Frontier extension,
    in the project's EXTENSIONS, switches itself on from the same setting)."""

    def update_settings(self, settings: BaseSettings) -> None:
        url = settings.get("PITH_FRONTIER")
        if url:
            for name, value in frontier_settings(url, settings.get("PITH_FRONTIER_KEY") or "pith").items():
                # the project's own SCHEDULER is the local one: this replaces it, as it would the default
                settings.set(name, value, priority="project" if name == "SCHEDULER" else "addon")
