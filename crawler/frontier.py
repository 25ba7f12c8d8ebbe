"""A frontier in Redis shared by many crawl workers, on one machine or many.

``PITH_FRONTIER = "redis://host:port/db"`` puts the request queue and the seen-sets of
a crawl in Redis, through scrapy-redis's scheduler, priority queue and duplicate
filter (``FrontierAddon`` derives their settings). What a crawl that must lose nothing
needs on top of them lives here too:

- **Tasks are data, not requests.** ``dumps``/``loads`` (this module is the
  SCHEDULER_SERIALIZER) carry a task as a few JSON fields: its kind, its record (or
  alias, or sitemap path on one of the worker's own resolver and mirrors) and depth.
  The worker rebuilds the request with its spider's own builders (``task_request``):
  method, headers, meta and callbacks are never read from Redis. Whoever can write to
  the Redis server can queue records of the crawl's resolver, never run code, reach
  another host or shape a request; an entry that does not fit is refused by name and
  counted (``pith/frontier_refused/<reason>``).
- **Claims.** A record is claimed by suffix (``Frontier.claim``): the first worker to
  see it takes it, every other one skips it.
- **Tasks with owners.** Every shared request is a task (``meta["pith_task"]``). A
  worker takes a task over atomically as it pops it, and releases it only once its
  final archive manifest is committed (not at checkpoints: a request still in flight
  would be released with the rest). A worker that dies (popped but never finished,
  or finished but never committed) stops renewing its lease; a surviving worker then
  puts its tasks back in the queue, and a task popped twice is dropped while a live
  worker holds it, so nothing is lost. Before any worker runs such a task it counts
  the takeover (``:recoveries``) and its archive reads the manifests committed since
  (``frontier_recovered``): what the dead worker's checkpoints hold is not archived
  twice, if its key is in the worker's ``--archive-keyring``. Two limits: a live
  worker whose reactor stalls longer than PITH_FRONTIER_LEASE counts as dead, and a
  worker killed between writing its manifest and releasing its tasks (one Redis
  call) has them redone; either way a record may then be archived by two committed
  runs, never lost.
- **One key, one live worker.** A worker signs its manifests and attestations with
  its own key (``Frontier.sign_as``): a second live worker with the same key would
  fork the key's attestation chain and is refused before it starts.
- **Idle is not done.** A worker with nothing to do stays open while the queue holds
  work or another live worker is busy; all close once everything has stayed drained
  for PITH_FRONTIER_IDLE_CLOSE seconds.

Keys, under PITH_FRONTIER_KEY (default ``pith``): ``:requests`` (the queue),
``:dupefilter``, ``:seen`` (claimed suffixes), ``:owner`` (task -> state|worker|arg),
``:tasks:<worker>``, ``:workers`` (lease expiry, Redis clock), ``:idle``,
``:recoveries`` (takeovers so far) and ``:signers`` (key id -> worker). The
scripts touch per-worker keys, so the server must be a standalone Redis (not a cluster).
"""

import heapq
import itertools
import logging
import os
import re
import secrets
import socket
import time
from urllib.parse import urlsplit

import orjson
import redis
from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider, NotConfigured
from scrapy.utils.asyncio import call_later, create_looping_call
from scrapy.utils.defer import deferred_from_coro
from scrapy_redis import defaults
from scrapy_redis.connection import get_redis
from scrapy_redis.queue import PriorityQueue
from scrapy_redis.scheduler import Scheduler

from pith.numbers import SUFFIX_RE

from . import signals as pith_signals
from .seeds import Seed, SeedError, parse_seed

logger = logging.getLogger(__name__)

CLAIMED, SEEN, FULL = "claimed", "seen", "full"
BUNDLE, PAGE = "b", "p"   # the record tasks: the spider rebuilds them from suffix and depth
TAKE = 8                  # tasks taken per round trip: few, so no worker sits on work another could do
_KEY = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


class FrontierError(Exception):
    """The frontier is misconfigured or unreachable."""


class SigningKeyInUse(FrontierError):
    """Another live worker of the crawl signs with this worker's archiver key."""


class RequestNotSerializable(FrontierError, TypeError):
    """A request that opens no task a frontier entry can name."""


class RefusedEntry(FrontierError, ValueError):
    """An entry read from the frontier that is not a task this crawler would have queued.
    ``reason`` names the rule it breaks (counted as ``pith/frontier_refused/<reason>``)."""

    def __init__(self, reason: str, detail):
        detail = str(detail)
        super().__init__(f"{reason}: {detail[:200]}{'...' if len(detail) > 200 else ''}")
        self.reason = reason


# --- settings ------------------------------------------------------------------------

def check_url(url: str) -> str:
    """``url`` when it names a Redis database (redis://, rediss:// or unix://), else FrontierError."""
    parts = urlsplit(url or "")
    database = parts.path.strip("/") if parts.scheme in ("redis", "rediss") else "0"
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        port_ok = False
    if parts.scheme not in ("redis", "rediss", "unix") or not port_ok or not (database or "0").isdigit() \
            or (parts.scheme != "unix" and not parts.hostname) or (parts.scheme == "unix" and not parts.path):
        raise FrontierError(f"not a Redis URL (redis://host:port/db, rediss://... or unix:///path): {url!r}")
    return url


def queue_key(key: str) -> str:
    return f"{key}:requests"


def frontier_settings(url: str, key: str = "pith") -> dict:
    """The Scrapy settings that put a crawl's queue and seen-sets in the Redis at ``url``."""
    if not _KEY.match(key or ""):
        raise FrontierError(f"a frontier key is 1-64 of [A-Za-z0-9_.:-]: {key!r}")
    return {
        "REDIS_URL": check_url(url),
        "SCHEDULER": "crawler.frontier.FrontierScheduler",
        "SCHEDULER_QUEUE_CLASS": "crawler.frontier.TaskQueue",
        "SCHEDULER_SERIALIZER": "crawler.frontier",
        "SCHEDULER_QUEUE_KEY": queue_key(key),
        "SCHEDULER_DUPEFILTER_KEY": f"{key}:dupefilter",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_PERSIST": True,  # a worker that finishes must never flush the others' work
    }


class FrontierAddon:
    """Turns PITH_FRONTIER into scrapy-redis's settings, for ``pith-archiver crawl
    --frontier`` and ``scrapy crawl pith -s PITH_FRONTIER=...`` alike."""

    def update_settings(self, settings):
        url = settings.get("PITH_FRONTIER")
        if url:
            for name, value in frontier_settings(url, settings.get("PITH_FRONTIER_KEY") or "pith").items():
                settings.set(name, value, priority="addon")


def connect(url: str, params: dict | None = None) -> redis.Redis:
    """A client of the Redis at ``url`` that has answered a PING, else FrontierError."""
    server = get_redis(url=check_url(url), **{**defaults.REDIS_PARAMS, **(params or {})})
    try:
        server.ping()
    except redis.RedisError as exc:
        raise FrontierError(f"cannot reach the frontier at {url}: {exc}") from None
    return server


def worker_id(name: str | None) -> str:
    """Unique per process, readable in Redis: the worker name, the pid and a random tag."""
    base = "".join(c if c.isalnum() or c in "_.-" else "_" for c in (name or socket.gethostname()))[:48]
    return f"{base}.{os.getpid()}.{secrets.token_hex(2)}"


# --- the tasks (scrapy-redis's SCHEDULER_SERIALIZER) ------------------------------------------

# A queued task names what to fetch, never how: kind -> (its task prefix, its fields). Method,
# headers, meta and callbacks are the worker's own, from its spider's request builders; a base
# is one of the worker's own resolver and mirrors, never a URL the entry chooses.
KINDS = {
    "bundle": (BUNDLE, ("suffix", "depth")),
    "page": (PAGE, ("suffix", "depth")),
    "alias": ("alias", ("alias", "depth")),
    "sitemap": ("sitemap", ("base", "path")),
}
_KIND_OF = {prefix: kind for kind, (prefix, _) in KINDS.items()}
_ANY_FIELD = {"kind"}.union(*(fields for _, fields in KINDS.values()))
MAX_ENTRY = 4096     # bytes: a task is a few names, the longest a sitemap path
MAX_DEPTH = 100_000  # link hops from the seeds
_SITEMAP_PATH = re.compile(r"/[!-~]*")  # printable ASCII from the base's root on


def check_task(entry) -> dict:
    """``entry`` when it is a task of the schema above, field by field; else RefusedEntry."""
    if not isinstance(entry, dict):
        raise RefusedEntry("not_an_object", f"a JSON {type(entry).__name__}")
    kind = entry.get("kind")
    fields = KINDS[kind][1] if isinstance(kind, str) and kind in KINDS else ()
    unknown = set(entry) - (_ANY_FIELD if not fields else {"kind", *fields})
    if unknown:
        raise RefusedEntry("unknown_field", sorted(unknown))
    if not fields:
        raise RefusedEntry("unknown_kind", repr(kind))
    missing = [field for field in fields if field not in entry]
    if missing:
        raise RefusedEntry("missing_field", missing)
    for field in fields:
        if not isinstance(entry[field], int if field == "depth" else str) or isinstance(entry[field], bool):
            raise RefusedEntry("wrong_type", f"{field} is a {type(entry[field]).__name__}")
    if "depth" in entry and not 0 <= entry["depth"] <= MAX_DEPTH:
        raise RefusedEntry("bad_depth", entry["depth"])
    if "suffix" in entry and not SUFFIX_RE.fullmatch(entry["suffix"]):
        raise RefusedEntry("bad_suffix", repr(entry["suffix"]))
    if "alias" in entry and not _is_alias(entry["alias"]):
        raise RefusedEntry("bad_alias", repr(entry["alias"]))
    if "path" in entry and not (_SITEMAP_PATH.fullmatch(entry["path"]) and
                                urlsplit(entry["path"]).path.endswith(".xml")):
        raise RefusedEntry("bad_path", repr(entry["path"]))
    return entry


def _is_alias(text: str) -> bool:
    try:
        return parse_seed(text) == Seed("alias", text)
    except SeedError:
        return False


def task_of(request: Request, sources: list[str]) -> dict:
    """The task a request opens (``meta["pith_task"]``, and its depth), as queued;
    ``sources``: the worker's resolver and mirrors, one of which a sitemap must be on."""
    prefix, _, value = request.meta["pith_task"].partition(":")
    kind = _KIND_OF.get(prefix)
    if kind == "sitemap":
        base = max((b for b in sources if value.startswith(b + "/")), key=len, default=None)
        if base is None:
            raise RequestNotSerializable(f"the sitemap {value} is on none of the crawl's resolvers and mirrors")
        return {"kind": kind, "base": base, "path": value[len(base):]}
    if kind is None:
        raise RequestNotSerializable(f"no task kind of ours: {request.meta['pith_task']!r}")
    return {"kind": kind, KINDS[kind][1][0]: value, "depth": request.meta.get("pith_depth", 0)}


def dumps(task: dict) -> bytes:
    return orjson.dumps(check_task(task))


def loads(data: bytes) -> dict:
    """The task ``dumps`` wrote, checked: what Redis holds is input like any other, written
    by whoever can reach that Redis (RefusedEntry, naming the rule it breaks)."""
    if len(data) > MAX_ENTRY:
        raise RefusedEntry("too_large", f"{len(data)} bytes, more than {MAX_ENTRY}")
    try:
        return check_task(orjson.loads(data))
    except orjson.JSONDecodeError as exc:
        raise RefusedEntry("not_json", exc) from None


# --- the ledger ----------------------------------------------------------------------------

_NOW = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "
_OWNER = "'^(%a)|([^|]*)|(.*)$'"

# KEYS seen, owner; ARGV prefix, me, depth, limit, page, suffix... Returns 1 claimed, 0 seen, 2 full, each.
_CLAIM = """
local out, limit, mine = {}, tonumber(ARGV[4]), ARGV[1] .. 'tasks:' .. ARGV[2]
local kinds = {'b'}
if ARGV[5] == '1' then kinds[2] = 'p' end
for i = 6, #ARGV do
  if redis.call('SISMEMBER', KEYS[1], ARGV[i]) == 1 then
    out[#out + 1] = 0
  elseif limit > 0 and redis.call('SCARD', KEYS[1]) >= limit then
    out[#out + 1] = 2
  else
    redis.call('SADD', KEYS[1], ARGV[i])
    for _, kind in ipairs(kinds) do
      redis.call('HSET', KEYS[2], kind .. ':' .. ARGV[i], 'q|' .. ARGV[2] .. '|' .. ARGV[3])
      redis.call('SADD', mine, kind .. ':' .. ARGV[i])
    end
    out[#out + 1] = 1
  end
end
return out
"""

# KEYS queue, owner, dupefilter; ARGV prefix, me, task, arg, score, member, fingerprint. A request
# with a fingerprint passes scrapy-redis's duplicate filter, and a task no claim created (arg: its
# request) gets this worker as its owner, in the same step as it is queued: no worker can die
# between the three.
_PUSH = """
if ARGV[7] ~= '' and redis.call('SADD', KEYS[3], ARGV[7]) == 0 then return 0 end
if ARGV[4] ~= '' and redis.call('HSETNX', KEYS[2], ARGV[3], 'q|' .. ARGV[2] .. '|' .. ARGV[4]) == 1 then
  redis.call('SADD', ARGV[1] .. 'tasks:' .. ARGV[2], ARGV[3])
end
redis.call('ZADD', KEYS[1], ARGV[5], ARGV[6])
return 1
"""

# KEYS queue, owner, workers, idle; ARGV prefix, me, most. Returns the members taken.
_POP = _NOW + """
local taken = {}
for _ = 1, 100 do
  local top = redis.call('ZRANGE', KEYS[1], 0, 0)
  if #top == 0 or #taken >= tonumber(ARGV[3]) then break end
  local member = top[1]
  redis.call('ZREM', KEYS[1], member)
  local cut = string.find(member, '\\n', 1, true)
  local task = cut and string.sub(member, 1, cut - 1)
  local owner = task and redis.call('HGET', KEYS[2], task)
  if owner then  -- no owner: done and committed (a stale copy), or not a task at all
    local state, worker, arg = string.match(owner, """ + _OWNER + """)
    local lease = tonumber(redis.call('ZSCORE', KEYS[3], worker) or '0')
    if state == 'q' or (worker ~= ARGV[2] and lease <= now) then
      if worker ~= ARGV[2] then
        redis.call('SREM', ARGV[1] .. 'tasks:' .. worker, task)
        redis.call('SADD', ARGV[1] .. 'tasks:' .. ARGV[2], task)
      end
      redis.call('HSET', KEYS[2], task, 'r|' .. ARGV[2] .. '|' .. arg)
      taken[#taken + 1] = member
    end
  end
end
if #taken > 0 then redis.call('SREM', KEYS[4], ARGV[2]) end
return taken
"""

# KEYS owner; ARGV prefix, me, task... Releases the tasks this worker holds, running or queued.
_RELEASE = """
local mine, n = ARGV[1] .. 'tasks:' .. ARGV[2], 0
for i = 3, #ARGV do
  local _, worker = string.match(redis.call('HGET', KEYS[1], ARGV[i]) or '', """ + _OWNER + """)
  if worker == ARGV[2] then
    redis.call('HDEL', KEYS[1], ARGV[i])
    redis.call('SREM', mine, ARGV[i])
    n = n + 1
  end
end
return n
"""

# KEYS workers; ARGV me, lease ms
_HEARTBEAT = _NOW + "redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])"

# KEYS workers, signers; ARGV me, key id. The live worker already signing with that key,
# or false: then this worker is.
_SIGNER = _NOW + """
local holder = redis.call('HGET', KEYS[2], ARGV[2])
if holder and holder ~= ARGV[1] then
  local lease = redis.call('ZSCORE', KEYS[1], holder)
  if lease and tonumber(lease) > now then return holder end
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1])
return false
"""

# KEYS workers, idle; ARGV prefix, me. Leaves at once; tasks still held go to the others now.
_LEAVE = """
redis.call('SREM', KEYS[2], ARGV[2])
local held = redis.call('SCARD', ARGV[1] .. 'tasks:' .. ARGV[2])
if held == 0 then redis.call('ZREM', KEYS[1], ARGV[2]) else redis.call('ZADD', KEYS[1], 0, ARGV[2]) end
return held
"""

# KEYS workers, owner, idle; ARGV prefix, me, batch. Returns task, arg, task, arg...
_RECOVER = _NOW + """
local out = {}
for _, worker in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
  if worker ~= ARGV[2] then
    local theirs = ARGV[1] .. 'tasks:' .. worker
    for _, task in ipairs(redis.call('SPOP', theirs, ARGV[3])) do
      local owner = redis.call('HGET', KEYS[2], task)
      local state, who, arg = string.match(owner or '', """ + _OWNER + """)
      if who == worker then
        redis.call('HSET', KEYS[2], task, 'q|' .. ARGV[2] .. '|' .. arg)
        redis.call('SADD', ARGV[1] .. 'tasks:' .. ARGV[2], task)
        out[#out + 1] = task
        out[#out + 1] = arg
      end
    end
    if redis.call('SCARD', theirs) == 0 then
      redis.call('ZREM', KEYS[1], worker)
      redis.call('SREM', KEYS[3], worker)
    end
    if #out > 0 then return out end
  end
end
return out
"""

# KEYS queue, workers, idle. Returns queued, busy live workers, dead workers.
_DRAIN = _NOW + """
local busy, dead = 0, 0
local all = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #all, 2 do
  if tonumber(all[i + 1]) > now then
    if redis.call('SISMEMBER', KEYS[3], all[i]) == 0 then busy = busy + 1 end
  else
    dead = dead + 1
  end
end
return {redis.call('ZCARD', KEYS[1]), busy, dead}
"""


class Frontier:
    """One worker's handle on the shared ledger of a crawl: claims, task owners, leases."""

    def __init__(self, server: redis.Redis, key: str, worker: str, lease: float):
        self.server = server
        self.worker = worker
        self.lease_ms = int(lease * 1000)
        self.prefix = f"{key}:"
        self.known: set[str] = set()  # suffixes claimed by anyone: most links name one already
        self.full = False             # --max-records reached: claims only ever grow
        self.queue_key = queue_key(key)
        self.seen_key, self.owner_key = self.prefix + "seen", self.prefix + "owner"
        self.workers_key, self.idle_key = self.prefix + "workers", self.prefix + "idle"
        self.recoveries_key = self.prefix + "recoveries"
        script = server.register_script
        self._claim, self._push, self._pop, self._release = \
            script(_CLAIM), script(_PUSH), script(_POP), script(_RELEASE)
        self._heartbeat, self._leave, self._recover, self._drain, self._signer = \
            script(_HEARTBEAT), script(_LEAVE), script(_RECOVER), script(_DRAIN), script(_SIGNER)

    @classmethod
    def from_crawler(cls, crawler):
        settings = crawler.settings
        url = settings.get("PITH_FRONTIER")
        if not url:
            raise NotConfigured("PITH_FRONTIER is not set")
        return cls(connect(url, settings.getdict("REDIS_PARAMS")), settings.get("PITH_FRONTIER_KEY") or "pith",
                   worker_id(settings.get("PITH_WORKER")), settings.getfloat("PITH_FRONTIER_LEASE"))

    def claim(self, suffixes, depth: int, page: bool, limit: int = 0) -> list[tuple[str, str]]:
        """``(suffix, verdict)`` for each suffix once, in order: CLAIMED for the first
        worker to see it (its bundle task, and its page task when ``page``, now belong
        to this worker), SEEN after that, FULL once ``limit`` records are claimed."""
        verdicts = dict.fromkeys(suffixes, SEEN)
        unknown = [s for s in verdicts if s not in self.known]
        if self.full:
            return [(s, FULL if s in unknown else SEEN) for s in verdicts]
        for start in range(0, len(unknown), 1000):
            chunk = unknown[start:start + 1000]
            answers = self._claim(keys=[self.seen_key, self.owner_key],
                                  args=[self.prefix, self.worker, depth, limit, int(page), *chunk])
            for suffix, answer in zip(chunk, answers):
                verdicts[suffix] = {1: CLAIMED, 0: SEEN, 2: FULL}[answer]
                if answer == 2:
                    self.full = True
                else:
                    self.known.add(suffix)
        return list(verdicts.items())

    def push(self, entries, dupefilter_key: str) -> int:
        """Queue tasks' requests, ``(task, data, score, fingerprint)`` each, in one round
        trip; how many were queued. A request with a fingerprint passes the duplicate
        filter first; a task no claim created gets this worker as its owner, who keeps
        its request to give it back should this worker die."""
        pipe = self.server.pipeline(transaction=False)
        for task, data, score, fingerprint in entries:
            adopt = task.partition(":")[0] not in (BUNDLE, PAGE)
            self._push(keys=[self.queue_key, self.owner_key, dupefilter_key], client=pipe,
                       args=[self.prefix, self.worker, task, data if adopt else b"", score,
                             task.encode() + b"\n" + data, fingerprint or ""])
        return sum(pipe.execute())

    def pop(self, most: int) -> list[tuple[str, bytes]]:
        """Take up to ``most`` tasks nobody alive holds, first first: ``[(task, request data)]``."""
        members = self._pop(keys=[self.queue_key, self.owner_key, self.workers_key, self.idle_key],
                            args=[self.prefix, self.worker, most])
        return [(task.decode(errors="replace"), data) for task, _, data in (m.partition(b"\n") for m in members)]

    def heartbeat(self) -> None:
        self._heartbeat(keys=[self.workers_key], args=[self.worker, self.lease_ms])

    def mark_idle(self) -> None:
        self.server.sadd(self.idle_key, self.worker)

    def release(self, tasks) -> int:
        """Done with ``tasks`` for good: their results are committed, or their entries refused."""
        tasks, released = sorted(tasks), 0
        for start in range(0, len(tasks), 1000):
            released += self._release(keys=[self.owner_key],
                                      args=[self.prefix, self.worker, *tasks[start:start + 1000]])
        return released

    def leave(self) -> int:
        """Stop taking part; returns how many tasks are handed to the others."""
        return self._leave(keys=[self.workers_key, self.idle_key], args=[self.prefix, self.worker])

    def recover(self, batch: int = 500) -> list[tuple[str, bytes]]:
        """Take over the tasks of a worker whose lease lapsed: ``[(task, arg)]`` to queue
        again (arg: the depth of a record task, else the request as queued)."""
        flat = self._recover(keys=[self.workers_key, self.owner_key, self.idle_key],
                             args=[self.prefix, self.worker, batch])
        return [(flat[i].decode(), flat[i + 1]) for i in range(0, len(flat), 2)]

    def sign_as(self, key_id: str) -> None:
        """Take ``key_id`` as this worker's archiver key. Two live workers signing with
        one key would fork its attestation chain (each run continues the key's last
        committed attestation): refused, naming the other worker."""
        holder = self._signer(keys=[self.workers_key, self.prefix + "signers"], args=[self.worker, key_id])
        if holder:
            raise SigningKeyInUse(f"the signing key {key_id} is in use by the live worker {holder.decode()} "
                                  "of this crawl: give each worker its own --signing-key")
        self.heartbeat()  # alive from now: a second worker with this key is refused at once

    def announce_recovery(self) -> None:
        """Count a takeover, before its tasks are queued again: whoever takes one of
        them sees the count go up first."""
        self.server.incr(self.recoveries_key)

    def recoveries(self) -> int:
        return int(self.server.get(self.recoveries_key) or 0)

    def drain(self) -> tuple[int, int, int]:
        """(requests queued, live workers busy, dead workers not yet recovered)."""
        return tuple(self._drain(keys=[self.queue_key, self.workers_key, self.idle_key]))


def record_task(kind: str, suffix: str) -> str:
    return f"{kind}:{suffix}"


# --- scrapy-redis's scheduler and queue, with tasks -----------------------------------------

class TaskQueue(PriorityQueue):
    """scrapy-redis's priority queue whose entries are tasks. Pushes wait in ``pending``
    until ``flush`` sends them in one round trip; ``take`` takes several tasks over in
    one; each step is atomic in Redis (see Frontier)."""

    def __init__(self, server, spider, key, serializer=None):
        super().__init__(server, spider, key, serializer)
        self.frontier: Frontier = spider.frontier
        self.pending: list[tuple] = []

    def push(self, request, fingerprint: str | None = None):
        self.pending.append((request.meta["pith_task"], self._encode_request(request), -request.priority,
                             fingerprint))

    def _encode_request(self, request) -> bytes:
        return self.serializer.dumps(task_of(request, self.spider.sources))

    def flush(self, dupefilter_key: str) -> int:
        """Send the pending pushes; how many a duplicate filter dropped."""
        entries, self.pending = self.pending, []
        return len(entries) - self.frontier.push(entries, dupefilter_key) if entries else 0

    def take(self, most: int) -> list[Request]:
        taken = [(task, self.rebuild(task, data)) for task, data in self.frontier.pop(most)]
        self.frontier.release([task for task, request in taken if request is None])
        return [request for _, request in taken if request is not None]

    def rebuild(self, task: str, entry: bytes | dict) -> Request | None:
        """This worker's own request for a task read from the frontier (``entry``: the
        task as queued, or the fields of a record task's owner), or None when the entry
        is refused: logged and counted by reason, never fetched."""
        try:
            checked = self.serializer.loads(entry) if isinstance(entry, bytes) else check_task(entry)
            if "base" in checked and checked["base"] not in self.spider.sources:
                raise RefusedEntry("unknown_base", f"{checked['base']} is none of this worker's resolver and mirrors")
            request = self.spider.task_request(checked)
            if request.meta.get("pith_task") != task:
                raise RefusedEntry("task_mismatch", f"queued as {task!r}, it is {request.meta.get('pith_task')!r}")
            return request
        except RefusedEntry as refused:
            logger.error("refused a frontier entry (%s)", refused)
            self.spider.crawler.stats.inc_value(f"pith/frontier_refused/{refused.reason}")
            return None

    def pop(self, timeout=0):
        return next(iter(self.take(1)), None)


class FrontierScheduler(Scheduler):
    """scrapy-redis's scheduler for a crawl shared by many workers.

    A request that opens a task (``meta["pith_task"]`` not held by this worker) goes
    to the shared queue, through scrapy-redis's shared duplicate filter; everything
    else (retries, redirects, mirror fallbacks, the state.json check of a bundle, the
    mirror manifest) stays in a local queue, unfiltered: it continues work this worker
    holds, which another worker redoes whole if this one dies. Settings:
    PITH_FRONTIER_LEASE, PITH_FRONTIER_IDLE_CLOSE, PITH_FRONTIER_POLL.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.local: list = []
        self.order = itertools.count()
        self.running: set[str] = set()   # tasks this worker popped
        self.recoveries_seen = 0         # takeovers whose checkpoints the archive has read
        self.closing = False
        self.drained_since: float | None = None

    @classmethod
    def from_crawler(cls, crawler):
        frontier = getattr(crawler.spider, "frontier", None)
        if frontier is None:
            raise FrontierError("FrontierScheduler needs a spider with a frontier (set PITH_FRONTIER)")
        scheduler = super().from_crawler(crawler)
        scheduler.crawler, scheduler.frontier = crawler, frontier
        settings = crawler.settings
        scheduler.idle_close = settings.getfloat("PITH_FRONTIER_IDLE_CLOSE")
        scheduler.poll = settings.getfloat("PITH_FRONTIER_POLL")
        crawler.signals.connect(scheduler.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(scheduler.spider_idle, signal=signals.spider_idle)
        crawler.signals.connect(scheduler.archive_committed, signal=pith_signals.archive_committed)
        scheduler.ticker = create_looping_call(scheduler.tick)
        return scheduler

    def open(self, spider):
        super().open(spider)
        self.frontier.heartbeat()
        logger.info("worker %s joined the frontier %s (%d requests queued)", self.frontier.worker,
                    self.frontier.prefix.rstrip(":"), len(self.queue))

    def spider_opened(self, spider):
        self.ticker.start(self.poll, now=False)  # the engine's scraper is open only now

    def enqueue_request(self, request):
        task = request.meta.get("pith_task")
        if task and task not in self.running and self._share(request):
            self.stats.inc_value("scheduler/enqueued/redis")
        else:
            self._keep(request)
            self.stats.inc_value("scheduler/enqueued/memory")
        return True

    def _share(self, request) -> bool:
        """Queue a request that opens a task in the frontier, past scrapy-redis's duplicate
        filter (its fingerprint and set, checked as it is queued). False when no task can
        name it (a sitemap seed on an --allow-host host): this worker fetches it alone."""
        first = not self.queue.pending
        try:
            self.queue.push(request, None if request.dont_filter else self.df.request_fingerprint(request))
        except RequestNotSerializable as exc:
            logger.warning("%s: this worker reads it alone", exc)
            return False
        if first:  # send what this turn of the reactor queues in one go
            call_later(0, self.flush)
        return True

    def _keep(self, request):
        heapq.heappush(self.local, (-request.priority, next(self.order), request))

    def flush(self):
        filtered = self.queue.flush(self.df.key)
        if filtered:
            self.stats.inc_value("dupefilter/filtered", filtered)

    def next_request(self):
        self.flush()
        if not self.local:
            self._take()
        return heapq.heappop(self.local)[2] if self.local else None

    def _take(self) -> int:
        """Take a few shared tasks into the local queue; how many."""
        requests = self.queue.take(TAKE)
        if requests:
            self._learn_recoveries()
        for request in requests:
            self.running.add(request.meta["pith_task"])
            self._keep(request)
        if requests:
            self.stats.inc_value("scheduler/dequeued/redis", len(requests))
        return len(requests)

    def _learn_recoveries(self) -> None:
        """Before running tasks a dead worker held, have the archive read what that
        worker's checkpoints committed, so none of it is archived twice."""
        count = self.frontier.recoveries()
        if count > self.recoveries_seen:
            self.recoveries_seen = count
            self.crawler.signals.send_catch_log(pith_signals.frontier_recovered)

    def has_pending_requests(self):
        return bool(self.local or self.queue.pending) or len(self.queue) > 0

    def archive_committed(self):
        """Release the tasks whose results the manifest just committed lists. The archive
        commits once, as the spider closes, when the engine has run every request it
        started; the tasks still queued here never ran and go to the other workers."""
        self.flush()
        unfinished = {entry[2].meta.get("pith_task") for entry in self.local}
        released = self.frontier.release(self.running - unfinished)
        self.stats.set_value("pith/frontier_released", released)

    def spider_idle(self):
        """Keep the worker open: the frontier, not one worker's empty queue, says when
        the crawl is over (see ``tick``)."""
        if not self.closing:
            self.frontier.mark_idle()
            raise DontCloseSpider

    def tick(self):
        """Renew the lease; when there is room, take shared work; when idle, give back
        dead workers' tasks, and close once all has stayed drained for a while."""
        try:
            self._tick()
        except redis.RedisError as exc:  # a LoopingCall that raises never runs again
            logger.error("frontier unreachable, retrying: %s", exc)

    def _tick(self):
        self.frontier.heartbeat()
        engine = self.crawler.engine
        if self.closing or engine.spider is None:
            return
        self.flush()
        if not engine.needs_backout() and self._take():
            engine.crawl(heapq.heappop(self.local)[2])  # wakes the engine now, not at its next heartbeat
        if not engine.spider_is_idle():
            self.drained_since = None
            return
        self.frontier.mark_idle()
        if self.recover() or any(self.frontier.drain()):
            self.drained_since = None
            return
        now = time.monotonic()
        self.drained_since = self.drained_since or now
        if now - self.drained_since >= self.idle_close:
            self.closing = True
            deferred_from_coro(engine.close_spider_async(reason="finished"))

    def recover(self) -> int:
        """Queue again the tasks of workers that died; how many."""
        taken = self.frontier.recover()
        if taken:
            self.frontier.announce_recovery()
            self._learn_recoveries()
        refused = []
        for task, arg in taken:
            prefix, _, suffix = task.partition(":")
            if prefix in (BUNDLE, PAGE):  # a record task's owner holds its depth
                depth = int(arg) if arg.isdigit() else arg.decode("latin-1")
                arg = {"kind": _KIND_OF[prefix], "suffix": suffix, "depth": depth}
            request = self.queue.rebuild(task, arg)
            if request is None:
                refused.append(task)
            else:
                self.queue.push(request)  # past the duplicate filter already
        self.frontier.release(refused)
        self.flush()
        if taken:
            self.stats.inc_value("pith/frontier_recovered", len(taken))
            logger.info("queued again %d tasks of a worker that stopped", len(taken))
        return len(taken)

    def close(self, reason):
        """Leave the crawl, handing the tasks still held (all of them when nothing was
        committed) to the other workers. Never flush: the queue and seen-sets belong to
        the whole crawl."""
        if self.ticker.running:
            self.ticker.stop()
        self.closing = True
        self.flush()
        handed_over = self.frontier.leave()
        logger.info("worker %s left the frontier: %d tasks done, %d handed to the other workers",
                    self.frontier.worker, self.stats.get_value("pith/frontier_released", 0), handed_over)
