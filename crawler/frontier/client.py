"""One worker's handle on the ledger of a shared crawl in Redis: claims, task owners, leases.

Each step is one Lua script (``lua/*.lua``, after ``lua/prelude.lua``), so it is atomic
in Redis. Keys, under PITH_FRONTIER_KEY (default ``pith``): ``:requests`` (the queue),
``:dupefilter``, ``:seen`` (claimed suffixes), ``:owner`` (task -> state|worker|arg),
``:tasks:<worker>``, ``:workers`` (lease expiry, Redis clock), ``:idle``,
``:recoveries`` (takeovers so far), ``:signers`` (key id -> worker) and ``:commits``
(the run ids of the manifests its workers committed: what the archive must still hold
for the claims to stand, ``Frontier.check``). The scripts
touch per-worker keys, so the server must be a standalone Redis (not a cluster).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from importlib.resources import files
from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured

from .. import signals as pith_signals
from ..crawl_config import crawl_config
from ..scheduling.claims import BUNDLE, CLAIMED, FULL, PAGE, SEEN
from ..stat_keys import StatFamily
from ..worker import worker_name
from .addon import check_url, dupefilter_key, queue_key
from .errors import FrontierError, SigningKeyInUse

if TYPE_CHECKING:
    from collections.abc import Iterable

    import redis
    from redis.commands.core import Script
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

_LUA = files(__package__) / "lua"


def _script(server: redis.Redis, name: str) -> Script:
    """The script ``lua/<name>.lua``, registered with the helpers of ``lua/prelude.lua``."""
    return server.register_script((_LUA / "prelude.lua").read_text("utf-8") + (_LUA / f"{name}.lua").read_text("utf-8"))


def connect(url: str, params: dict | None = None) -> redis.Redis:
    """A client of the Redis at ``url`` that has answered a PING, else FrontierError."""
    import redis  # only where a frontier is used: a crawl without one never loads the client
    from scrapy_redis import defaults
    from scrapy_redis.connection import get_redis

    server = get_redis(url=check_url(url), **{**defaults.REDIS_PARAMS, **(params or {})})
    try:
        server.ping()
    except redis.RedisError as exc:
        raise FrontierError(f"cannot reach the frontier at {url}: {exc}") from None
    return server


def worker_id(name: str | None) -> str:
    """Unique per process, readable in Redis: the worker name, the pid and a random tag."""
    return f"{worker_name(name or socket.gethostname())[:48]}.{os.getpid()}.{secrets.token_hex(2)}"


class Frontier:
    """One worker's handle on the shared ledger of a crawl. An extension of the crawler
    (NotConfigured without PITH_FRONTIER): the spider, the scheduler and the archive
    pipeline reach the one Frontier of a crawl with ``crawler.get_extension(Frontier)``."""

    def __init__(
        self, server: redis.Redis, key: str, worker: str, lease: float, stats: StatsCollector | None = None
    ) -> None:
        self.server = server
        self.worker = worker
        self.lease_ms = int(lease * 1000)
        self.prefix = f"{key}:"
        self.known: set[str] = set()  # suffixes claimed by anyone: most links name one already
        self.full = False  # --max-records reached: claims only ever grow
        self.queue_key = queue_key(key)
        self.seen_key, self.owner_key = self.prefix + "seen", self.prefix + "owner"
        self.workers_key, self.idle_key = self.prefix + "workers", self.prefix + "idle"
        self.recoveries_key = self.prefix + "recoveries"
        self.commits_key = self.prefix + "commits"
        self.dupefilter_key = dupefilter_key(key)
        self.stats = stats
        self.commits_before: set[bytes] = set()  # noted before this worker read the archive
        (
            self._claim,
            self._push,
            self._pop,
            self._release,
            self._heartbeat,
            self._leave,
            self._recover,
            self._drain,
            self._signer,
            self._forget,
        ) = (
            _script(server, name)
            for name in (
                "claim",
                "push",
                "pop",
                "release",
                "heartbeat",
                "leave",
                "recover",
                "drain",
                "signer",
                "forget",
            )
        )

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Frontier:
        settings = crawler.settings
        url = settings.get("PITH_FRONTIER")
        if not url:
            raise NotConfigured("PITH_FRONTIER is not set")
        config = crawl_config(crawler)
        frontier = cls(
            connect(url, settings.getdict("REDIS_PARAMS")),
            settings.get("PITH_FRONTIER_KEY") or "pith",
            worker_id(config.worker),
            settings.getfloat("PITH_FRONTIER_LEASE"),
            crawler.stats,
        )
        if config.signer is not None:  # before the engine is made: a refused worker starts nothing
            frontier.sign_as(config.signer.key_id)
        frontier.remember_commits()  # before the archive pipeline reads the archive
        crawler.signals.connect(frontier.check, signal=pith_signals.archive_opened)
        crawler.signals.connect(frontier.note_commit, signal=pith_signals.interim_committed)
        crawler.signals.connect(frontier.note_commit, signal=pith_signals.archive_committed)
        return frontier

    def remember_commits(self) -> None:
        """The commits the crawl's workers noted before this one reads the archive: only
        those can be missing from what it reads. A worker notes a commit after writing
        its manifest, so one noted later may have been written after the read: it is
        not lost, and taking it for lost would have the crawl redo (and archive twice)
        everything that worker archived."""
        import redis

        try:
            self.commits_before = {
                run if isinstance(run, bytes) else run.encode() for run in self.server.smembers(self.commits_key)
            }
        except redis.RedisError as exc:  # the scheduler says so, and retries; nothing is dropped
            logger.warning("frontier unreachable, its commits not checked against the archive: %s", exc)

    def check(self, present: frozenset) -> None:
        """The archive is the truth: when it no longer holds a manifest this crawl's
        workers committed (deleted, emptied, restored from an older copy, replaced),
        the claims made for it are a stale cache and the crawl is forgotten, so every
        record is claimed and archived again. ``present``: the run ids of the manifests
        the archive holds, read after ``remember_commits``."""
        missing = sorted(self.commits_before - {run.encode() for run in present})
        if not missing:
            return
        keys = [self.commits_key, self.seen_key, self.owner_key, self.dupefilter_key, self.queue_key, self.idle_key]
        dropped = self._forget(keys=keys, args=[self.prefix, *missing])
        if dropped >= 0:
            if self.stats is not None:
                self.stats.set_value(StatFamily.CACHE_DROPPED + "frontier", dropped)
            logger.warning(
                "cache did not match the archive: it lacks %d manifests this frontier's workers committed; "
                "the frontier's %d claims dropped, its records are crawled again",
                len(missing),
                dropped,
            )

    def note_commit(self, run_id: str) -> None:
        """A manifest of this worker's is committed: the claims now stand on it."""
        self.server.sadd(self.commits_key, run_id)

    def claim(
        self, suffixes: Iterable[str], depth: int, limit: int = 0, *, page: bool = False
    ) -> list[tuple[str, str]]:
        """``(suffix, verdict)`` for each suffix once, in order: CLAIMED for the first
        worker to see it (its bundle task, and its page task when ``page``, now belong
        to this worker), SEEN after that, FULL once ``limit`` records are claimed."""
        verdicts = dict.fromkeys(suffixes, SEEN)
        unknown = [s for s in verdicts if s not in self.known]
        if self.full:
            return [(s, FULL if s in unknown else SEEN) for s in verdicts]
        for start in range(0, len(unknown), 1000):
            chunk = unknown[start : start + 1000]
            answers = self._claim(
                keys=[self.seen_key, self.owner_key], args=[self.prefix, self.worker, depth, limit, int(page), *chunk]
            )
            for suffix, answer in zip(chunk, answers):
                verdicts[suffix] = {1: CLAIMED, 0: SEEN, 2: FULL}[answer]
                if answer == 2:
                    self.full = True
                else:
                    self.known.add(suffix)
        return list(verdicts.items())

    def push(self, entries: Iterable[tuple[str, bytes, int, str | None]], dupefilter_key: str) -> int:
        """Queue tasks' requests, ``(task, data, score, fingerprint)`` each, in one round
        trip; how many were queued. A request with a fingerprint passes the duplicate
        filter first; a task no claim created gets this worker as its owner, who keeps
        its request to give it back should this worker die."""
        pipe = self.server.pipeline(transaction=False)
        for task, data, score, fingerprint in entries:
            adopt = task.partition(":")[0] not in (BUNDLE, PAGE)
            self._push(
                keys=[self.queue_key, self.owner_key, dupefilter_key],
                client=pipe,
                args=[
                    self.prefix,
                    self.worker,
                    task,
                    data if adopt else b"",
                    score,
                    task.encode() + b"\n" + data,
                    fingerprint or "",
                ],
            )
        return sum(pipe.execute())

    def pop(self, most: int) -> list[tuple[str, bytes]]:
        """Take up to ``most`` tasks nobody alive holds, first first: ``[(task, request data)]``."""
        members = self._pop(
            keys=[self.queue_key, self.owner_key, self.workers_key, self.idle_key],
            args=[self.prefix, self.worker, most],
        )
        return [(task.decode(errors="replace"), data) for task, _, data in (m.partition(b"\n") for m in members)]

    def heartbeat(self) -> None:
        self._heartbeat(keys=[self.workers_key], args=[self.worker, self.lease_ms])

    def mark_idle(self) -> None:
        self.server.sadd(self.idle_key, self.worker)

    def release(self, tasks: Iterable[str]) -> int:
        """Done with ``tasks`` for good: their results are committed, or their entries refused."""
        tasks, released = sorted(tasks), 0
        for start in range(0, len(tasks), 1000):
            released += self._release(
                keys=[self.owner_key], args=[self.prefix, self.worker, *tasks[start : start + 1000]]
            )
        return released

    def leave(self) -> int:
        """Stop taking part; returns how many tasks are handed to the others."""
        return self._leave(keys=[self.workers_key, self.idle_key], args=[self.prefix, self.worker])

    def recover(self, batch: int = 500) -> list[tuple[str, bytes]]:
        """Take over the tasks of a worker whose lease lapsed: ``[(task, arg)]`` to queue
        again (arg: the depth of a record task, else the request as queued)."""
        flat = self._recover(
            keys=[self.workers_key, self.owner_key, self.idle_key], args=[self.prefix, self.worker, batch]
        )
        return [(flat[i].decode(), flat[i + 1]) for i in range(0, len(flat), 2)]

    def sign_as(self, key_id: str) -> None:
        """Take ``key_id`` as this worker's archiver key. Two live workers signing with
        one key would fork its attestation chain (each run continues the key's last
        committed attestation): refused, naming the other worker."""
        holder = self._signer(keys=[self.workers_key, self.prefix + "signers"], args=[self.worker, key_id])
        if holder:
            raise SigningKeyInUse(
                f"the signing key {key_id} is in use by the live worker {holder.decode()} "
                "of this crawl: give each worker its own --signing-key"
            )
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
