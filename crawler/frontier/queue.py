"""scrapy-redis's priority queue, holding tasks (``serializer``) rather than requests."""

import logging
from typing import Any

import redis
from scrapy import Request, Spider
from scrapy_redis.queue import PriorityQueue

from ..meta_keys import Meta
from ..stat_keys import StatFamily
from .client import Frontier
from .errors import FrontierError, RefusedEntry
from .serializer import check_task, task_of

logger = logging.getLogger(__name__)


class TaskQueue(PriorityQueue):
    """scrapy-redis's priority queue whose entries are tasks. Pushes wait in ``pending``
    until ``flush`` sends them in one round trip; ``take`` takes several tasks over in
    one; each step is atomic in Redis (see Frontier)."""

    def __init__(self, server: redis.Redis, spider: Spider, key: str, serializer: Any = None) -> None:
        super().__init__(server, spider, key, serializer)
        frontier = spider.crawler.get_extension(Frontier)
        if frontier is None:
            raise FrontierError("TaskQueue needs the Frontier extension (set PITH_FRONTIER)")
        self.frontier = frontier
        self.pending: list[tuple[str, bytes, int, str | None]] = []

    def push(self, request: Request, fingerprint: str | None = None) -> None:
        self.pending.append((request.meta[Meta.TASK], self._encode_request(request), -request.priority, fingerprint))

    def _encode_request(self, request: Request) -> bytes:
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
            if request.meta.get(Meta.TASK) != task:
                raise RefusedEntry("task_mismatch", f"queued as {task!r}, it is {request.meta.get('pith_task')!r}")
            return request
        except RefusedEntry as refused:
            logger.error("refused a frontier entry (%s)", refused)
            self.spider.crawler.stats.inc_value(StatFamily.FRONTIER_REFUSED + refused.reason)
            return None

    def pop(self, timeout: float = 0) -> Request | None:
        return next(iter(self.take(1)), None)
