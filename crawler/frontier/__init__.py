"""A frontier in Redis shared by many crawl workers, on one machine or many.

``PITH_FRONTIER = "redis://host:port/db"`` puts the request queue and the seen-sets of
a crawl in Redis, through scrapy-redis's scheduler, priority queue and duplicate
filter (``addon``: FrontierAddon derives their settings). What a crawl that must lose
nothing needs on top of them lives here too, one concern a module:

- **Tasks are data, not requests** (``serializer``, the SCHEDULER_SERIALIZER): a task
  is a few JSON fields the worker rebuilds its own request from; an entry that does
  not fit is refused by name and counted (``pith/frontier_refused/<reason>``).
- **Claims** (``client``: ``Frontier.claim``). A record is claimed by suffix: the
  first worker to see it takes it, every other one skips it (the vocabulary and the
  claim loop are the local scheduler's too, ``crawler.scheduling.claims``).
- **Tasks with owners** (``client``, ``queue``, ``scheduler``). Every shared request is
  a task (``meta[Meta.TASK]``, crawler.meta_keys). A worker takes a task over atomically as it pops it,
  and releases it only once its final archive manifest is committed (not at
  interim commits: a request still in flight would be released with the rest). A worker
  that dies (popped but never finished, or finished but never committed) stops
  renewing its lease; a surviving worker then puts its tasks back in the queue, and a
  task popped twice is dropped while a live worker holds it, so nothing is lost.
  Before any worker runs such a task it counts the takeover (``:recoveries``) and its
  archive reads the manifests committed since (``frontier_recovered``): what the dead
  worker's interim commits hold is not archived twice, if its key is in the worker's
  ``--archive-keyring``. Two limits: a live worker whose reactor stalls longer than
  PITH_FRONTIER_LEASE counts as dead, and a worker killed between writing its
  manifest and releasing its tasks (one Redis call) has them redone; either way a
  record may then be archived by two committed runs, never lost.
- **One key, one live worker** (``Frontier.sign_as``). A worker signs its manifests
  and attestations with its own key: a second live worker with the same key would
  fork the key's attestation chain and is refused before it starts.
- **Idle is not done** (``scheduler``). A worker with nothing to do stays open while
  the queue holds work or another live worker is busy; all close once everything has
  stayed drained for PITH_FRONTIER_IDLE_CLOSE seconds.

The ``Frontier`` (one per crawl) is an extension of the crawler; the spider, the
scheduler and the archive pipeline reach it with ``crawler.get_extension(Frontier)``.
"""

import importlib

from .addon import FrontierAddon, check_url, frontier_settings
from .client import Frontier, connect
from .errors import FrontierError, RefusedEntry, RequestNotSerializable, SigningKeyInUse

# built on scrapy-redis, loaded when Scrapy asks for them (PITH_FRONTIER set): a crawl
# without a frontier never imports the Redis client (~6 MiB, ~0.1 s of start-up)
_ON_DEMAND = {"TaskQueue": ".queue", "FrontierScheduler": ".scheduler"}


def __getattr__(name: str) -> type:
    if name in _ON_DEMAND:
        return getattr(importlib.import_module(_ON_DEMAND[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Frontier",
    "FrontierAddon",
    "FrontierError",
    "FrontierScheduler",
    "RefusedEntry",
    "RequestNotSerializable",
    "SigningKeyInUse",
    "TaskQueue",
    "check_url",
    "connect",
    "frontier_settings",
]
